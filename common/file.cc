#include "common/file.h"

#include <fstream>
#include <sstream>

namespace shoal {

std::optional<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return text.str();
}

Result<std::string> read_bounded_file(const std::string& path, size_t max_bytes,
                                      const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(what + " " + path + ": cannot read the file");
  std::string text;
  char buffer[64 * 1024];
  while (in) {
    in.read(buffer, sizeof buffer);
    text.append(buffer, static_cast<size_t>(in.gcount()));
    if (text.size() > max_bytes) {
      return invalid_argument(what + " " + path + ": expected at most " + std::to_string(max_bytes) +
                              " bytes, and it holds more");
    }
  }
  if (in.bad()) return invalid_argument(what + " " + path + ": cannot read the file");
  return text;
}

}  // namespace shoal
