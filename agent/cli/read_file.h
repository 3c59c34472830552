// Reading an input file named on the command line, for every shoalctl command.
#pragma once

#include <string>

#include "common/file.h"
#include "common/status.h"
#include "common/text.h"

namespace shoal::cli {

// Manifests, inventories, tokens and id cards are small; anything larger
// than this is a mistake (or /dev/zero).
inline constexpr size_t kMaxInputBytes = 4 << 20;

// The whole file, or an InvalidArgument naming the flag and the path.
inline Result<std::string> read_input_file(const std::string& path, const std::string& flag) {
  auto text = read_bounded_file(path, kMaxInputBytes, flag);
  if (!text.is_ok()) return invalid_argument(text.status().message());
  SHOAL_RETURN_IF_ERROR(validate_utf8_lines(*text, flag + " " + path));
  return text;
}

}  // namespace shoal::cli
