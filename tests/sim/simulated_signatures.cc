#include "tests/sim/simulated_signatures.h"

#include <sodium.h>

#include <cstring>

namespace shoal::sim {

namespace {

using crypto::PublicKey;
using crypto::Signature;

uint64_t mix64(uint64_t x) {  // splitmix64's finalizer: every input bit moves every output bit
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t load64(const uint8_t* bytes, size_t size) {
  uint64_t word = 0;
  if (size > 0) std::memcpy(&word, bytes, size);  // an empty message's data() may be null
  return word;
}

// Four lanes seeded by the key's four words take the message 8 bytes at a
// time, each word mixed in; the length closes it. Not cryptographic (no
// adversary lives in a simulation), but bound to every byte and to the key:
// a changed byte or another key gives another signature. A tenth of a
// keyed BLAKE2b's cost at an envelope's size, which the simulator pays
// twice per delivery.
Signature simulated_signature(const PublicKey& key, std::span<const uint8_t> message) {
  uint64_t lane[4];
  for (size_t i = 0; i < 4; ++i) lane[i] = load64(key.data() + 8 * i, 8);
  size_t whole = message.size() / 8;
  for (size_t i = 0; i < whole; ++i) {
    uint64_t& h = lane[i % 4];
    h = mix64(h ^ load64(message.data() + 8 * i, 8)) + i;
  }
  size_t tail = message.size() % 8;
  lane[whole % 4] = mix64(lane[whole % 4] ^ load64(message.data() + 8 * whole, tail) ^
                          (uint64_t{tail} << 56));
  Signature out;
  uint64_t state = mix64(message.size());
  for (size_t i = 0; i < out.size() / 8; ++i) {
    state = mix64(state ^ lane[i % 4] ^ (uint64_t{i} << 32));
    std::memcpy(out.data() + 8 * i, &state, 8);
  }
  return out;
}

}  // namespace

Signature SimulatedSignatures::sign(const crypto::Identity& signer,
                                    std::span<const uint8_t> message) const {
  return simulated_signature(signer.public_key(), message);
}

bool SimulatedSignatures::verify(const PublicKey& key, std::span<const uint8_t> message,
                                 const Signature& signature) const {
  Signature expected = simulated_signature(key, message);
  return sodium_memcmp(expected.data(), signature.data(), expected.size()) == 0;
}

}  // namespace shoal::sim
