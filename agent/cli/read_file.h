// Reading an input file named on the command line, for every shoalctl command.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include "common/status.h"

namespace shoal::cli {

// The whole file, or an InvalidArgument naming the flag and the path.
inline Result<std::string> read_input_file(const std::string& path, const std::string& flag) {
  std::ifstream in(path);
  if (!in) return invalid_argument(flag + " " + path + ": cannot read the file");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace shoal::cli
