// Reading an input file named on the command line, for every shoalctl command.
#pragma once

#include <string>

#include "common/file.h"
#include "common/status.h"

namespace shoal::cli {

// The whole file, or an InvalidArgument naming the flag and the path.
inline Result<std::string> read_input_file(const std::string& path, const std::string& flag) {
  std::optional<std::string> text = read_text_file(path);
  if (!text) return invalid_argument(flag + " " + path + ": cannot read the file");
  return *std::move(text);
}

}  // namespace shoal::cli
