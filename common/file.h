// Reading a whole text file: one place for the agent, the CLI and tests.
#pragma once

#include <optional>
#include <string>

#include "common/status.h"

namespace shoal {

// The file's bytes, or nullopt when it cannot be opened or read. Callers
// word the error: what the file was for decides the message and the code.
std::optional<std::string> read_text_file(const std::string& path);

// At most `max_bytes` of input named on a command line or in a config:
// NotFound when it cannot be opened, InvalidArgument when it holds more (a
// device such as /dev/zero never ends, and must not eat the memory).
// Errors start with `what` and the path.
Result<std::string> read_bounded_file(const std::string& path, size_t max_bytes,
                                      const std::string& what);

}  // namespace shoal
