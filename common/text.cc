#include "common/text.h"

#include <cstdio>

namespace shoal {

bool is_valid_utf8(std::string_view text, size_t* bad_offset) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  size_t size = text.size();
  size_t i = 0;
  auto fail = [&](size_t at) {
    if (bad_offset) *bad_offset = at;
    return false;
  };
  while (i < size) {
    unsigned char lead = bytes[i];
    if (lead < 0x80) {
      ++i;
      continue;
    }
    size_t length;
    uint32_t low_bound;  // the smallest code point this length may encode
    if ((lead & 0xE0) == 0xC0) length = 2, low_bound = 0x80;
    else if ((lead & 0xF0) == 0xE0) length = 3, low_bound = 0x800;
    else if ((lead & 0xF8) == 0xF0) length = 4, low_bound = 0x10000;
    else return fail(i);
    if (i + length > size) return fail(i);
    uint32_t code_point = lead & (0x7F >> length);
    for (size_t k = 1; k < length; ++k) {
      if ((bytes[i + k] & 0xC0) != 0x80) return fail(i);
      code_point = (code_point << 6) | (bytes[i + k] & 0x3F);
    }
    if (code_point < low_bound || code_point > 0x10FFFF ||
        (code_point >= 0xD800 && code_point <= 0xDFFF)) {
      return fail(i);
    }
    i += length;
  }
  return true;
}

Status validate_utf8_lines(std::string_view text, std::string_view what, int first_line) {
  size_t bad = 0;
  if (is_valid_utf8(text, &bad)) return Status::ok();
  std::string_view before = text.substr(0, bad);
  int line = first_line;
  for (char c : before) line += c == '\n' ? 1 : 0;
  size_t line_start = before.rfind('\n');
  size_t column = line_start == std::string_view::npos ? bad + 1 : bad - line_start;
  return invalid_argument(std::string(what) + ": line " + std::to_string(line) +
                          ": expected UTF-8 text (column " + std::to_string(column) + " is not)");
}

std::string quoted_text(std::string_view text, size_t max_bytes) {
  bool cut = text.size() > max_bytes;
  if (cut) text = text.substr(0, max_bytes);
  std::string out = "\"";
  size_t i = 0;
  while (i < text.size()) {
    size_t bad = text.size();
    std::string_view rest = text.substr(i);
    if (is_valid_utf8(rest, &bad)) bad = rest.size();
    // Copy the valid run, escaping what would break the line or the quotes.
    for (size_t k = 0; k < bad; ++k) {
      unsigned char c = static_cast<unsigned char>(rest[k]);
      if (c == '"' || c == '\\') {
        out += '\\';
        out += static_cast<char>(c);
      } else if (c < 0x20 || c == 0x7F) {
        char buffer[8];
        std::snprintf(buffer, sizeof buffer, "\\x%02X", c);
        out += buffer;
      } else {
        out += static_cast<char>(c);
      }
    }
    i += bad;
    if (i < text.size()) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\x%02X", static_cast<unsigned char>(text[i]));
      out += buffer;
      ++i;
    }
  }
  out += cut ? "...\"" : "\"";
  return out;
}

Status validate_name(std::string_view value, std::string_view field) {
  auto is_alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  bool ok = !value.empty() && value.size() <= 63 && is_alnum(value.front()) &&
            is_alnum(value.back());
  for (char c : value) ok = ok && (is_alnum(c) || c == '-');
  if (ok) return Status::ok();
  return invalid_argument(std::string(field) +
                          ": expected lowercase letters, digits and '-' (1-63 characters, "
                          "starting and ending with a letter or digit), got " + quoted_text(value));
}

}  // namespace shoal
