// A string map key that orders exactly as its text does, but decides most
// comparisons without reading the text.
//
// Why: an agent looks up peers by id (43 characters of base64, so the text
// lives on the heap, not in the map node) several times per envelope. In a
// std::map<std::string, V> every comparison on the way down reads a node and
// then, a cache miss further, its key's characters. A TextKey keeps the
// first 8 bytes in the node as one big-endian integer: random ids almost
// always differ there, so the walk reads only nodes, and the text once, at
// the match. The order is the text's (std::string's operator<), so a map's
// iteration, and everything that follows from it, is unchanged.
//
// Use it through TextMap: its comparator is transparent, so
// find(), count() and lower_bound() take a std::string without making a key.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <string_view>

namespace shoal {

class TextKey {
 public:
  TextKey() = default;
  // Implicit, as the string it stands for.
  TextKey(std::string text) : prefix_(prefix_of(text)), text_(std::move(text)) {}  // NOLINT
  TextKey(const char* text) : TextKey(std::string(text)) {}                       // NOLINT

  const std::string& text() const { return text_; }
  operator const std::string&() const { return text_; }  // NOLINT: reads as the string
  uint64_t prefix() const { return prefix_; }

  // The first 8 bytes, big-endian, zero-padded: when two prefixes differ
  // they order the texts; when equal, the texts must be compared.
  static uint64_t prefix_of(std::string_view text) {
    uint64_t value = 0;
    if (text.size() >= 8) {
      std::memcpy(&value, text.data(), 8);
    } else if (!text.empty()) {
      std::memcpy(&value, text.data(), text.size());
    }
    if constexpr (std::endian::native == std::endian::little) value = __builtin_bswap64(value);
    return value;
  }

  friend bool operator==(const TextKey& a, const TextKey& b) {
    return a.prefix_ == b.prefix_ && a.text_ == b.text_;
  }
  friend bool operator==(const TextKey& a, const std::string& b) { return a.text_ == b; }
  friend bool operator==(const std::string& a, const TextKey& b) { return a == b.text_; }

 private:
  uint64_t prefix_ = 0;
  std::string text_;
};

struct TextKeyLess {
  using is_transparent = void;
  bool operator()(const TextKey& a, const TextKey& b) const {
    return a.prefix() != b.prefix() ? a.prefix() < b.prefix() : a.text() < b.text();
  }
  bool operator()(const TextKey& a, const std::string& b) const {
    uint64_t pb = TextKey::prefix_of(b);
    return a.prefix() != pb ? a.prefix() < pb : a.text() < b;
  }
  bool operator()(const std::string& a, const TextKey& b) const {
    uint64_t pa = TextKey::prefix_of(a);
    return pa != b.prefix() ? pa < b.prefix() : a < b.text();
  }
};

template <typename Value>
using TextMap = std::map<TextKey, Value, TextKeyLess>;

}  // namespace shoal
