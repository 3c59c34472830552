// Per-peer token buckets for inbound peer messages (abusive
// peers): a peer may send `rate` messages a second on average and `burst`
// at once; what it sends beyond that is dropped before any signature is
// checked or any state touched, so a flooding peer costs the agent little
// more than reading its bytes, and other peers keep their share of the loop.
// The protocol retries whatever a limit dropped from an honest peer.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>

namespace shoal::runtime {

class PeerRateLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  // rate > 0 messages a second; burst >= 1.
  PeerRateLimiter(double rate, double burst) : rate_(rate), burst_(burst) {}

  // Takes one token from `peer`'s bucket if it has one.
  bool admit(const std::string& peer, Clock::time_point now);

  uint64_t limited() const { return limited_; }

 private:
  struct Bucket {
    double tokens = 0;
    Clock::time_point refilled{};
  };
  // Keys are authenticated peer ids (CURVE) or, without CURVE, connection
  // ids, which a stranger can mint; past this many buckets the full ones
  // (idle long enough to have refilled) are forgotten.
  static constexpr size_t kMaxBuckets = 4096;

  double rate_;
  double burst_;
  std::unordered_map<std::string, Bucket> buckets_;
  uint64_t limited_ = 0;
};

}  // namespace shoal::runtime
