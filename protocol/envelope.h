// The signed envelope around every message:
//   wire = msgpack [signed: bin, signature: bin(64)]
//   signed = msgpack [version, type, from, to, boot, seq, sent_at_ms, body: bin,
//                     acked_boot, acked_sent_at_ms]   (the last two appended later)
// The signature is the sender's Ed25519 signature over the signed bytes.
//
// An envelope of type BATCH carries several messages to one peer under one
// signature and one (boot, seq): its body is [[type, body: bin], ...]. An
// agent seals everything one loop iteration sends to a peer into as few
// envelopes as kMaxBodyBytes and kMaxBatchItems allow
// (core::Context::seal_outgoing); a lone message goes as a plain envelope.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "crypto/identity.h"
#include "protocol/messages.h"

namespace shoal::protocol {

// The largest wire message a receiver accepts (ZeroMQ's maxmsgsize).
inline constexpr size_t kMaxWireBytes = 1 << 20;
// What the envelope adds around a body at most: keys, counters, signature
// and MessagePack headers. A body larger than kMaxWireBytes minus this can
// never be delivered.
inline constexpr size_t kEnvelopeOverheadBytes = 256;
inline constexpr size_t kMaxBodyBytes = kMaxWireBytes - kEnvelopeOverheadBytes;

struct Envelope {
  uint32_t version = kProtocolVersion;
  MessageType type = MessageType::kHello;
  crypto::PublicKey from{};
  crypto::PublicKey to{};
  uint64_t boot = 0;  // the sender's start counter
  uint64_t seq = 0;   // per sender boot, strictly increasing
  int64_t sent_at_ms = 0;
  std::vector<uint8_t> body;
  // Flow control: how far the sender has read the recipient's traffic — the
  // recipient's boot and the sent_at of the newest envelope of that boot the
  // sender accepted. 0 when it has read none (or is older than the field).
  uint64_t acked_boot = 0;
  int64_t acked_sent_at_ms = 0;
};

// Why a received message was dropped. Values index kDropReasonNames.
enum class DropReason : uint8_t {
  kMalformed = 0,
  kUnknownVersion,
  kUnknownType,
  kBadSignature,
  kWrongRecipient,
  kUnknownSender,
  kNotPermitted,
  kReplayed,
  kStale,
  kBadBody,
};
constexpr std::string_view kDropReasonNames[] = {
    "Malformed",   "UnknownVersion", "UnknownType", "BadSignature", "WrongRecipient",
    "UnknownSender", "NotPermitted", "Replayed",    "Stale",        "BadBody"};
inline constexpr size_t kDropReasonCount = std::size(kDropReasonNames);
inline std::string_view drop_reason_name(DropReason reason) {
  return kDropReasonNames[static_cast<size_t>(reason)];
}

std::vector<uint8_t> seal(const Envelope& envelope, const crypto::Identity& sender,
                          const crypto::SignatureScheme& signatures = crypto::ed25519_signatures());

// One message inside a BATCH. `type` is the raw wire number: a receiver
// drops an item of a type it does not know (or a nested BATCH) on its own,
// not the whole batch, so a newer sender can mix in newer messages.
struct BatchItem {
  uint8_t type = 0;
  std::vector<uint8_t> body;
};
// The most messages one BATCH carries: the receiver's decoder takes no
// longer array (kMaxArrayItems, common/msgpack_io.h).
inline constexpr size_t kMaxBatchItems = 4096;
// What each item adds to a BATCH body at most (array and bin headers).
inline constexpr size_t kBatchItemOverheadBytes = 16;
std::vector<uint8_t> encode_batch(std::span<const BatchItem> items);
// How many of `items` (at least one) the next envelope carries: as many as
// fit in kMaxBodyBytes and kMaxBatchItems.
size_t next_envelope_items(std::span<const BatchItem> items);
// At least one item; each [type: uint8, body: bin].
Result<std::vector<BatchItem>> decode_batch(std::span<const uint8_t> body);

// Decodes the envelope and checks the signature against its `from` key.
// Recipient, trust and replay checks are the receiver's. On failure `*reason`
// says which check failed.
Result<Envelope> open(std::span<const uint8_t> wire, DropReason* reason,
                      const crypto::SignatureScheme& signatures = crypto::ed25519_signatures());

}  // namespace shoal::protocol
