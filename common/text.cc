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

std::string name_rule_violation(std::string_view value) {
  auto is_alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  bool ok = !value.empty() && value.size() <= 63 && is_alnum(value.front()) &&
            is_alnum(value.back());
  for (char c : value) ok = ok && (is_alnum(c) || c == '-');
  if (ok) return "";
  return "expected lowercase letters, digits and '-' (1-63 characters, starting and ending with a "
         "letter or digit), got " + quoted_text(value);
}

Status validate_name(std::string_view value, std::string_view field) {
  std::string violation = name_rule_violation(value);
  if (violation.empty()) return Status::ok();
  return invalid_argument(std::string(field) + ": " + violation);
}

namespace {

bool is_label_name(std::string_view name) {
  auto is_alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  if (name.empty() || name.size() > 63 || !is_alnum(name.front()) || !is_alnum(name.back())) return false;
  for (char c : name) {
    if (!is_alnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

// A DNS subdomain: dot-separated lowercase labels, at most 253 characters.
bool is_dns_subdomain(std::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  size_t start = 0;
  while (true) {
    size_t dot = name.find('.', start);
    std::string_view part = name.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    bool ok = !part.empty() && part.size() <= 63;
    for (char c : part) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-');
    if (!ok || part.front() == '-' || part.back() == '-') return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

}  // namespace

Status validate_dns_subdomain(std::string_view value, std::string_view field) {
  if (is_dns_subdomain(value)) return Status::ok();
  return invalid_argument(std::string(field) +
                          ": expected a DNS subdomain (lowercase letters, digits, '-' and '.', at most 253 "
                          "characters), got " + quoted_text(value));
}

Status validate_kubernetes_label(std::string_view key, std::string_view value, std::string_view field) {
  size_t slash = key.rfind('/');
  std::string_view name = slash == std::string_view::npos ? key : key.substr(slash + 1);
  bool key_ok = is_label_name(name) && (slash == std::string_view::npos || is_dns_subdomain(key.substr(0, slash)));
  if (!key_ok) {
    return invalid_argument(std::string(field) + ": key " + quoted_text(key) +
                            ": expected an optional DNS-subdomain prefix and '/', then 1-63 letters, digits, "
                            "'-', '_' or '.' starting and ending with a letter or digit (Kubernetes' label syntax)");
  }
  if (!value.empty() && !is_label_name(value)) {
    return invalid_argument(std::string(field) + "." + std::string(key) + ": expected at most 63 letters, digits, "
                            "'-', '_' or '.' starting and ending with a letter or digit, or nothing "
                            "(Kubernetes' label syntax), got " + quoted_text(value));
  }
  return Status::ok();
}

}  // namespace shoal
