// An agent's Ed25519 identity: its key pair, signing and verification, and the
// key file it lives in.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"

namespace shoal::crypto {

using PublicKey = std::array<uint8_t, 32>;
using Signature = std::array<uint8_t, 64>;

// Must be called once before anything else here; safe to call again.
Status initialize();

std::string base64url_encode(std::span<const uint8_t> bytes);
// Refuses anything but unpadded base64url; the error names `field`.
Result<std::string> base64url_decode(std::string_view text, std::string_view field);

// The base64url form of a public key: an agent's peer id.
std::string key_to_text(const PublicKey& key);
Result<PublicKey> key_from_text(std::string_view text, std::string_view field);

// X25519 keys for ZeroMQ CURVE, derived from the Ed25519 identity, so an
// agent has one key to guard and peers know each other's CURVE key from the
// id card alone.
using CurveKey = std::array<uint8_t, 32>;
struct CurveKeyPair {
  CurveKey public_key{};
  CurveKey secret_key{};
};
// Fails for a point that is not a valid Ed25519 public key.
Result<CurveKey> curve_public_key(const PublicKey& ed25519);

// Who else may read a key file for Identity::load to accept it.
enum class KeyFileAccess {
  kOwnerOnly,  // 0600 or tighter: the agent's own identity.key
  // Also readable (not writable) by the file's group: a key imported once
  // from a Kubernetes Secret, which fsGroup mounts 0440 for the pod's group.
  kOwnerOrGroupRead,
};

class Identity {
 public:
  static Identity generate();
  // The key pair `seed` determines: the same seed, the same identity. For
  // the simulator (identities from its seed) and tests; an agent's own key
  // comes from generate().
  static Identity from_seed(const std::array<uint8_t, 32>& seed);
  CurveKeyPair curve_keys() const;

  const PublicKey& public_key() const { return public_key_; }
  Signature sign(std::span<const uint8_t> message) const;

  // Writes the secret key to `path` with mode 0600; refuses to overwrite.
  Status save(const std::string& path) const;
  // Refuses a file that others (and, unless `access` allows group read, its
  // group) may read or write, with the fix in the error.
  static Result<Identity> load(const std::string& path, KeyFileAccess access = KeyFileAccess::kOwnerOnly);

 private:
  PublicKey public_key_{};
  std::array<uint8_t, 64> secret_key_{};
};

bool verify(const PublicKey& key, std::span<const uint8_t> message, const Signature& signature);

// How messages are signed and checked: Ed25519 (ed25519_signatures) for
// every agent. The federation simulator hands its agents a cheaper scheme
// of its own (tests/sim/simulated_signatures.h), which no agent can reach:
// nothing outside tests/sim constructs one.
class SignatureScheme {
 public:
  virtual ~SignatureScheme() = default;
  virtual Signature sign(const Identity& signer, std::span<const uint8_t> message) const = 0;
  virtual bool verify(const PublicKey& key, std::span<const uint8_t> message,
                      const Signature& signature) const = 0;
};
const SignatureScheme& ed25519_signatures();

}  // namespace shoal::crypto
