// The simulator's stand-in for Ed25519 (docs/simulation.md, "Signatures"):
// a keyed, non-cryptographic hash of the message under the signer's public
// key, verified by recomputing it. A signature stays bound to its key and
// to every byte of its message, so the core accepts and drops exactly what
// it would, at a small fraction of the cost, but anyone can forge one: it
// lives here, where only the simulator's agents are handed it
// (FederationOptions::real_signatures off).
#pragma once

#include "crypto/identity.h"

namespace shoal::sim {

class SimulatedSignatures final : public crypto::SignatureScheme {
 public:
  crypto::Signature sign(const crypto::Identity& signer,
                         std::span<const uint8_t> message) const override;
  bool verify(const crypto::PublicKey& key, std::span<const uint8_t> message,
              const crypto::Signature& signature) const override;
};

}  // namespace shoal::sim
