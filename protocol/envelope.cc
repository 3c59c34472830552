#include "protocol/envelope.h"

#include <cstring>

#include "common/msgpack_io.h"

namespace shoal::protocol {
namespace {

std::string_view as_chars(std::span<const uint8_t> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

}  // namespace

std::vector<uint8_t> seal(const Envelope& envelope, const crypto::Identity& sender,
                          const crypto::SignatureScheme& signatures) {
  // Headers, keys and counters take under 128 bytes; sized once, no regrowth.
  ByteWriter inner(envelope.body.size() + 128);
  msgpack::packer<ByteWriter> p(inner);
  p.pack_array(10);
  p.pack(envelope.version);
  p.pack(static_cast<uint8_t>(envelope.type));
  pack_binary(p, as_chars(envelope.from));
  pack_binary(p, as_chars(envelope.to));
  p.pack(envelope.boot);
  p.pack(envelope.seq);
  p.pack(envelope.sent_at_ms);
  pack_binary(p, as_chars(envelope.body));
  p.pack(envelope.acked_boot);
  p.pack(envelope.acked_sent_at_ms);
  crypto::Signature signature = signatures.sign(sender, inner.bytes);

  ByteWriter outer(inner.bytes.size() + signature.size() + 16);
  msgpack::packer<ByteWriter> q(outer);
  q.pack_array(2);
  pack_binary(q, as_chars(inner.bytes));
  pack_binary(q, as_chars(signature));
  return std::move(outer.bytes);
}

Result<Envelope> open(std::span<const uint8_t> wire, DropReason* reason,
                      const crypto::SignatureScheme& signatures) {
  *reason = DropReason::kMalformed;
  // Both readers point into `wire`, which outlives them: nothing is copied
  // but the body.
  SHOAL_ASSIGN_OR_RETURN(Unpacked outer_handle, unpack_one(wire, "envelope"));
  ArrayReader outer(outer_handle.get(), "envelope");
  std::string_view signed_bytes = outer.binary_view("signed");
  std::string_view signature_bytes = outer.binary_view("signature", sizeof(crypto::Signature));
  if (!outer.ok()) return outer.status();

  std::span<const uint8_t> signed_span(reinterpret_cast<const uint8_t*>(signed_bytes.data()),
                                       signed_bytes.size());
  SHOAL_ASSIGN_OR_RETURN(Unpacked inner_handle, unpack_one(signed_span, "envelope"));
  ArrayReader r(inner_handle.get(), "envelope");
  Envelope envelope;
  envelope.version = r.integer<uint32_t>("version");
  uint8_t type = r.integer<uint8_t>("type");
  std::string_view from = r.binary_view("from", 32);
  std::string_view to = r.binary_view("to", 32);
  envelope.boot = r.integer<uint64_t>("boot");
  envelope.seq = r.integer<uint64_t>("seq");
  envelope.sent_at_ms = r.integer<int64_t>("sentAt");
  std::string_view body = r.binary_view("body");
  if (r.has_more()) {  // appended after version 1 shipped
    envelope.acked_boot = r.integer<uint64_t>("ackedBoot");
    envelope.acked_sent_at_ms = r.integer<int64_t>("ackedSentAt");
  }
  if (!r.ok()) return r.status();
  if (envelope.version != kProtocolVersion) {
    *reason = DropReason::kUnknownVersion;
    return corrupt("envelope version: expected " + std::to_string(kProtocolVersion) + ", got " +
                   std::to_string(envelope.version));
  }
  if (type == 0 || type > kMaxMessageType) {
    *reason = DropReason::kUnknownType;
    return corrupt("envelope type: unknown message type " + std::to_string(type));
  }
  envelope.type = static_cast<MessageType>(type);
  std::memcpy(envelope.from.data(), from.data(), 32);
  std::memcpy(envelope.to.data(), to.data(), 32);
  envelope.body.assign(body.begin(), body.end());

  crypto::Signature signature;
  std::memcpy(signature.data(), signature_bytes.data(), signature.size());
  if (!signatures.verify(envelope.from, signed_span, signature)) {
    *reason = DropReason::kBadSignature;
    return corrupt("envelope signature: does not match the sender's key");
  }
  return envelope;
}

static_assert(kMaxBatchItems <= kMaxArrayItems, "a BATCH its receiver cannot decode");

size_t next_envelope_items(std::span<const BatchItem> items) {
  if (items.empty()) return 0;
  size_t count = 1;
  size_t bytes = items[0].body.size() + kBatchItemOverheadBytes;
  while (count < items.size() && count < kMaxBatchItems &&
         bytes + items[count].body.size() + kBatchItemOverheadBytes <= kMaxBodyBytes) {
    bytes += items[count].body.size() + kBatchItemOverheadBytes;
    ++count;
  }
  return count;
}

std::vector<uint8_t> encode_batch(std::span<const BatchItem> items) {
  size_t expected = 8;
  for (const BatchItem& item : items) expected += item.body.size() + kBatchItemOverheadBytes;
  ByteWriter buffer(expected);
  msgpack::packer<ByteWriter> p(buffer);
  p.pack_array(static_cast<uint32_t>(items.size()));
  for (const BatchItem& item : items) {
    p.pack_array(2);
    p.pack(item.type);
    pack_binary(p, as_chars(item.body));
  }
  return std::move(buffer.bytes);
}

Result<std::vector<BatchItem>> decode_batch(std::span<const uint8_t> body) {
  SHOAL_ASSIGN_OR_RETURN(Unpacked handle, unpack_one(body, "BATCH"));
  ArrayReader r(handle.get(), "BATCH");
  if (r.ok() && r.size() == 0) r.fail("", "expected at least one message");
  std::vector<BatchItem> items;
  items.reserve(r.ok() ? r.size() : 0);
  while (r.ok() && !r.at_end()) {
    ArrayReader item = r.nested("message");
    BatchItem decoded;
    decoded.type = item.integer<uint8_t>("type");
    std::string_view bytes = item.binary_view("body");
    r.adopt(item);
    decoded.body.assign(bytes.begin(), bytes.end());
    items.push_back(std::move(decoded));
  }
  if (!r.ok()) return r.status();
  return items;
}

}  // namespace shoal::protocol
