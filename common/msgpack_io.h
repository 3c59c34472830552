// Safe reading and writing of positional MessagePack arrays, shared by every
// decoder that faces untrusted bytes (wire envelopes, message bodies,
// invitation tokens). Reading never throws: a wrong type, a missing element
// or trailing garbage becomes a Status that names the field.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <msgpack.hpp>

#include "common/status.h"
#include "common/text.h"

namespace shoal {

// One object unpacked by unpack_one, and the zone that holds its elements.
// Its strings and binaries point into the bytes it was unpacked from, so it
// must not outlive them.
//
// The zone is borrowed from a small pool of this thread's and cleared on its
// way back: a message that fits the first chunk costs no allocation at all.
// A zone per parse (msgpack's object_handle) was two mallocs and two frees,
// as much as the parse itself of a small message, and every envelope is
// parsed twice. Move-only; it gives its zone back when destroyed.
class Unpacked {
 public:
  Unpacked(Unpacked&& other) noexcept
      : object_(other.object_), zone_(std::exchange(other.zone_, nullptr)) {}
  Unpacked& operator=(Unpacked&& other) noexcept {
    if (this != &other) {
      give_back();
      object_ = other.object_;
      zone_ = std::exchange(other.zone_, nullptr);
    }
    return *this;
  }
  Unpacked(const Unpacked&) = delete;
  Unpacked& operator=(const Unpacked&) = delete;
  ~Unpacked() { give_back(); }

  const msgpack::object& get() const { return object_; }

 private:
  friend Result<Unpacked> unpack_one(std::span<const uint8_t> bytes, std::string_view what);

  // Each chunk takes elements of 24 bytes (msgpack::object): 8 KiB holds a
  // few hundred, more than a protocol message has. A larger message makes
  // the zone add chunks, which clear() frees again.
  static constexpr size_t kChunk = 8192;
  // Parses nest (an envelope's body inside its frame, a BATCH's messages
  // inside it): a few zones are out at once, never many.
  static constexpr size_t kPooled = 4;
  static std::vector<std::unique_ptr<msgpack::zone>>& pool() {
    thread_local std::vector<std::unique_ptr<msgpack::zone>> zones;
    return zones;
  }
  static msgpack::zone* borrow() {
    auto& zones = pool();
    if (zones.empty()) return new msgpack::zone(kChunk);
    msgpack::zone* zone = zones.back().release();
    zones.pop_back();
    return zone;
  }
  void give_back() {
    if (!zone_) return;
    zone_->clear();
    auto& zones = pool();
    if (zones.size() < kPooled) {
      zones.emplace_back(zone_);
    } else {
      delete zone_;
    }
    zone_ = nullptr;
  }

  Unpacked() : zone_(borrow()) {}

  msgpack::object object_;
  msgpack::zone* zone_;  // owned; null once moved from
};

// The most elements one array may hold for unpack_one: a sender that
// packs more (a BATCH of many small messages) must split them.
inline constexpr size_t kMaxArrayItems = 4096;

// Unpacks exactly one object from `bytes`; anything after it is an error.
// `what` names the thing being decoded in errors ("envelope", "token").
inline Result<Unpacked> unpack_one(std::span<const uint8_t> bytes, std::string_view what) {
  try {
    Unpacked unpacked;
    size_t offset = 0;
    // Limits bound the memory an attacker can make us allocate.
    msgpack::unpack_limit limits(/*array=*/kMaxArrayItems, /*map=*/1024, /*str=*/1 << 20,
                                 /*bin=*/1 << 20, /*ext=*/0, /*depth=*/16);
    unpacked.object_ = msgpack::unpack(*unpacked.zone_, reinterpret_cast<const char*>(bytes.data()),
                                       bytes.size(), offset, nullptr, nullptr, limits);
    if (offset != bytes.size()) return corrupt(std::string(what) + ": trailing bytes");
    return unpacked;
  } catch (const std::exception& e) {
    return corrupt(std::string(what) + ": not valid MessagePack (" + e.what() + ")");
  }
}

// Reads the elements of one MessagePack array in order. The first failure
// sticks; later reads return defaults, so a decoder can read every field and
// check status() once.
//
// A nested reader names its place by its parent and field, and spells the
// whole path ("CAPACITY namespaces item queues ...") only when it fails:
// so it must not outlive the reader it came from (a local in the decoder
// that reads its parent, as every decoder here does).
class ArrayReader {
 public:
  ArrayReader(const msgpack::object& object, std::string what) : what_(std::move(what)) {
    open(object);
  }

  const Status& status() const { return status_; }
  bool ok() const { return status_.is_ok(); }
  size_t size() const { return items_.size(); }
  // Whether another element follows: for fields appended after a message's
  // first version, which older senders leave out.
  bool has_more() const { return ok() && index_ < items_.size(); }

  const msgpack::object* next(std::string_view field) {
    if (!ok()) return nullptr;
    if (index_ >= items_.size()) {
      fail(field, "missing");
      return nullptr;
    }
    return &items_[index_++];
  }

  template <typename Int>
  Int integer(std::string_view field) {
    static_assert(std::is_integral_v<Int>);
    const msgpack::object* o = next(field);
    if (!o) return Int{};
    if (o->type == msgpack::type::POSITIVE_INTEGER) {
      if (o->via.u64 > static_cast<uint64_t>(std::numeric_limits<Int>::max())) {
        fail(field, "integer out of range");
        return Int{};
      }
      return static_cast<Int>(o->via.u64);
    }
    if (o->type == msgpack::type::NEGATIVE_INTEGER && std::is_signed_v<Int>) {
      if (o->via.i64 < static_cast<int64_t>(std::numeric_limits<Int>::min())) {
        fail(field, "integer out of range");
        return Int{};
      }
      return static_cast<Int>(o->via.i64);
    }
    fail(field, "expected an integer");
    return Int{};
  }

  double real(std::string_view field) {
    const msgpack::object* o = next(field);
    if (!o) return 0;
    if (o->type == msgpack::type::FLOAT32 || o->type == msgpack::type::FLOAT64) return o->via.f64;
    if (o->type == msgpack::type::POSITIVE_INTEGER) return static_cast<double>(o->via.u64);
    fail(field, "expected a number");
    return 0;
  }

  bool boolean(std::string_view field) {
    const msgpack::object* o = next(field);
    if (!o) return false;
    if (o->type != msgpack::type::BOOLEAN) {
      fail(field, "expected a boolean");
      return false;
    }
    return o->via.boolean;
  }

  std::string string(std::string_view field) {
    const msgpack::object* o = next(field);
    if (!o) return {};
    if (o->type != msgpack::type::STR) {
      fail(field, "expected a string");
      return {};
    }
    std::string_view text(o->via.str.ptr, o->via.str.size);
    // Every string that crosses the wire is UTF-8: names, labels and reasons
    // end up in JSON, which cannot carry anything else.
    if (!is_valid_utf8(text)) {
      fail(field, "expected UTF-8 text");
      return {};
    }
    return std::string(text);
  }

  // A map of UTF-8 strings to UTF-8 strings (labels, selectors).
  std::map<std::string, std::string> string_map(std::string_view field) {
    std::map<std::string, std::string> out;
    const msgpack::object* o = next(field);
    if (!o) return out;
    if (o->type != msgpack::type::MAP) {
      fail(field, "expected a map");
      return out;
    }
    for (uint32_t i = 0; i < o->via.map.size; ++i) {
      const auto& entry = o->via.map.ptr[i];
      if (entry.key.type != msgpack::type::STR || entry.val.type != msgpack::type::STR) {
        fail(field, "expected string keys and values");
        return {};
      }
      std::string_view key(entry.key.via.str.ptr, entry.key.via.str.size);
      std::string_view value(entry.val.via.str.ptr, entry.val.via.str.size);
      if (!is_valid_utf8(key) || !is_valid_utf8(value)) {
        fail(field, "expected UTF-8 text");
        return {};
      }
      out[std::string(key)] = std::string(value);
    }
    return out;
  }

  std::string binary(std::string_view field, size_t exact_size = 0) {
    return std::string(binary_view(field, exact_size));
  }
  // The same without a copy: it points into the unpacked bytes.
  std::string_view binary_view(std::string_view field, size_t exact_size = 0) {
    const msgpack::object* o = next(field);
    if (!o) return {};
    if (o->type != msgpack::type::BIN) {
      fail(field, "expected binary");
      return {};
    }
    if (exact_size && o->via.bin.size != exact_size) {
      fail(field, "expected " + std::to_string(exact_size) + " bytes");
      return {};
    }
    return std::string_view(o->via.bin.ptr, o->via.bin.size);
  }

  std::vector<std::string> strings(std::string_view field) {
    std::vector<std::string> out;
    const msgpack::object* o = next(field);
    if (!o) return out;
    ArrayReader inner(*o, this, field);
    while (inner.ok() && inner.index_ < inner.size()) out.push_back(inner.string("item"));
    if (!inner.ok()) status_ = inner.status();
    return out;
  }

  // A nested array, read by its own reader; its failure becomes ours via adopt().
  ArrayReader nested(std::string_view field) {
    const msgpack::object* o = next(field);
    if (!o) return ArrayReader(msgpack::object(), this, field);
    return ArrayReader(*o, this, field);
  }
  void adopt(const ArrayReader& inner) {
    if (ok() && !inner.ok()) status_ = inner.status();
  }
  bool at_end() const { return index_ >= items_.size(); }
  // Takes the next item if it is nil (an optional field left unset).
  bool skip_nil() {
    if (!ok() || at_end() || items_[index_].type != msgpack::type::NIL) return false;
    ++index_;
    return true;
  }

  void fail(std::string_view field, const std::string& expectation) {
    if (!ok()) return;
    status_ = corrupt(path() + (field.empty() ? "" : " " + std::string(field)) + ": " +
                      expectation);
  }

 private:
  ArrayReader(const msgpack::object& object, const ArrayReader* parent, std::string_view field)
      : parent_(parent), field_(field) {
    open(object);
  }
  void open(const msgpack::object& object) {
    if (object.type != msgpack::type::ARRAY) {
      fail("", "expected an array");
      return;
    }
    items_ = std::span<const msgpack::object>(object.via.array.ptr, object.via.array.size);
  }
  // What this reader reads, for errors: the root's name and the fields down to it.
  std::string path() const {
    return parent_ ? parent_->path() + " " + std::string(field_) : what_;
  }

  std::string what_;                      // the root's
  const ArrayReader* parent_ = nullptr;   // a nested reader's
  std::string_view field_;                // a nested reader's field in its parent
  std::span<const msgpack::object> items_;
  size_t index_ = 0;
  Status status_;
};

inline std::vector<uint8_t> to_bytes(const msgpack::sbuffer& buffer) {
  const auto* begin = reinterpret_cast<const uint8_t*>(buffer.data());
  return std::vector<uint8_t>(begin, begin + buffer.size());
}

// A packer's stream that writes straight into the byte vector it hands back:
// no 8 KiB sbuffer to allocate and no copy out of it per message.
struct ByteWriter {
  std::vector<uint8_t> bytes;

  explicit ByteWriter(size_t expected_size = 64) { bytes.reserve(expected_size); }
  void write(const char* data, size_t size) {
    const auto* begin = reinterpret_cast<const uint8_t*>(data);
    // Most writes are a value's 1 to 9 bytes: byte by byte they stay inline,
    // where a range insert's out-of-line call cost about a hundred
    // instructions each (5 % of a large simulation).
    if (size <= 16) {
      for (size_t i = 0; i < size; ++i) bytes.push_back(begin[i]);
      return;
    }
    bytes.insert(bytes.end(), begin, begin + size);
  }
};

template <typename Stream>
void pack_binary(msgpack::packer<Stream>& packer, std::string_view bytes) {
  packer.pack_bin(static_cast<uint32_t>(bytes.size()));
  packer.pack_bin_body(bytes.data(), static_cast<uint32_t>(bytes.size()));
}

}  // namespace shoal
