#include "crypto/invitation.h"

#include <algorithm>
#include <cstring>

#include "common/msgpack_io.h"
#include "common/text.h"

namespace shoal::crypto {
namespace {

constexpr std::string_view kPrefix = "shoal-invite:v1:";
constexpr int64_t kAbsent = -1;

int64_t or_absent(const std::optional<int64_t>& value) { return value.value_or(kAbsent); }
std::optional<int64_t> from_absent(int64_t value) {
  return value < 0 ? std::nullopt : std::optional<int64_t>(value);
}

// Field order is the token format; never reorder, only append.
std::vector<uint8_t> encode_payload(const Invitation& invitation) {
  ByteWriter buffer;
  msgpack::packer<ByteWriter> packer(buffer);
  // Fields 12 and 13 (preemptible, maxPriority) were appended: a token
  // that needs neither leaves them out, and older agents read it as before.
  bool preemption_terms = invitation.limits.preemptible || invitation.limits.max_priority;
  packer.pack_array(preemption_terms ? 13 : 11);
  packer.pack(invitation.id);
  packer.pack(invitation.issuer.to_string());
  pack_binary(packer, std::string_view(reinterpret_cast<const char*>(invitation.subject.data()),
                                       invitation.subject.size()));
  packer.pack(invitation.namespaces);
  packer.pack(or_absent(invitation.limits.cpu_milli));
  packer.pack(or_absent(invitation.limits.memory_bytes));
  packer.pack(or_absent(invitation.limits.gpu));
  packer.pack(or_absent(invitation.limits.workloads));
  packer.pack(to_millis(invitation.not_before));
  packer.pack(invitation.expires ? to_millis(*invitation.expires) : int64_t{0});
  packer.pack(to_millis(invitation.created));
  if (preemption_terms) {
    packer.pack(invitation.limits.preemptible);
    if (invitation.limits.max_priority) packer.pack(*invitation.limits.max_priority);
    else packer.pack_nil();
  }
  return std::move(buffer.bytes);
}

}  // namespace

bool Invitation::covers(std::string_view namespace_name) const {
  return std::find(namespaces.begin(), namespaces.end(), namespace_name) != namespaces.end();
}

std::string issue_token(const Invitation& invitation, const Identity& issuer,
                        const SignatureScheme& signatures) {
  std::vector<uint8_t> payload = encode_payload(invitation);
  Signature signature = signatures.sign(issuer, payload);
  payload.insert(payload.end(), signature.begin(), signature.end());
  return std::string(kPrefix) + base64url_encode(payload);
}

Result<Invitation> open_token(std::string_view token, const SignatureScheme& signatures) {
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) {
    token.remove_suffix(1);
  }
  if (token.substr(0, kPrefix.size()) != kPrefix) {
    return invalid_argument("invitation token: expected text starting with \"shoal-invite:v1:\"");
  }
  SHOAL_ASSIGN_OR_RETURN(std::string raw,
                         base64url_decode(token.substr(kPrefix.size()), "invitation token"));
  if (raw.size() <= sizeof(Signature)) {
    return invalid_argument("invitation token: too short to hold a signature");
  }
  std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(raw.data()), raw.size());
  auto payload = bytes.first(bytes.size() - sizeof(Signature));
  Signature signature;
  std::memcpy(signature.data(), bytes.data() + payload.size(), signature.size());

  auto handle = unpack_one(payload, "invitation token");
  if (!handle.is_ok()) return invalid_argument(handle.status().message());
  ArrayReader reader(handle->get(), "invitation token");
  Invitation invitation;
  invitation.id = reader.string("id");
  std::string issuer_card = reader.string("issuer");
  std::string subject = reader.binary("subject", 32);
  invitation.namespaces = reader.strings("namespaces");
  invitation.limits.cpu_milli = from_absent(reader.integer<int64_t>("limits.cpu"));
  invitation.limits.memory_bytes = from_absent(reader.integer<int64_t>("limits.memory"));
  invitation.limits.gpu = from_absent(reader.integer<int64_t>("limits.gpu"));
  invitation.limits.workloads = from_absent(reader.integer<int64_t>("limits.workloads"));
  invitation.not_before = from_millis(reader.integer<int64_t>("notBefore"));
  int64_t expires = reader.integer<int64_t>("expires");
  invitation.created = from_millis(reader.integer<int64_t>("created"));
  if (reader.has_more()) {
    invitation.limits.preemptible = reader.boolean("limits.preemptible");
    if (!reader.skip_nil()) {
      invitation.limits.max_priority = reader.integer<int32_t>("limits.maxPriority");
    }
  }
  if (!reader.ok()) return invalid_argument(reader.status().message());
  SHOAL_RETURN_IF_ERROR(validate_name(invitation.id, "invitation token id"));
  for (const auto& ns : invitation.namespaces) {
    SHOAL_RETURN_IF_ERROR(validate_name(ns, "invitation token namespaces"));
  }
  if (invitation.namespaces.empty()) {
    return invalid_argument("invitation token namespaces: expected at least one namespace");
  }
  if (expires != 0) invitation.expires = from_millis(expires);
  std::memcpy(invitation.subject.data(), subject.data(), invitation.subject.size());
  auto card = parse_id_card(issuer_card);
  if (!card.is_ok()) return card.status().with_context("invitation token issuer");
  invitation.issuer = std::move(card).value();
  if (!signatures.verify(invitation.issuer.public_key, payload, signature)) {
    return invalid_argument(
        "invitation token: signature does not match the issuer's key (altered or forged)");
  }
  return invitation;
}

Status check_acceptable(const Invitation& invitation, const PublicKey& own_key, TimePoint now) {
  if (invitation.subject != own_key) {
    return invalid_argument("invitation token subject: issued to key " +
                            key_to_text(invitation.subject) + ", not to this agent (" +
                            key_to_text(own_key) + ")");
  }
  if (invitation.expires && *invitation.expires <= now) {
    return invalid_argument("invitation token expires: expired at " +
                            format_time(*invitation.expires));
  }
  return Status::ok();
}

}  // namespace shoal::crypto
