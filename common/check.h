// Invariants checked in every build, release included: one that is broken
// stops the process at once, saying where and what, rather than let it act
// on a state it can never be in (TigerBeetle's rule). Only for what no
// input can cause; bad input gets a Status naming the field instead.
#pragma once

namespace shoal {

[[noreturn]] void check_failed(const char* file, int line, const char* condition, const char* what);

}  // namespace shoal

#define SHOAL_CHECK(condition, what)                                   \
  do {                                                                 \
    if (!(condition)) ::shoal::check_failed(__FILE__, __LINE__, #condition, what); \
  } while (false)
