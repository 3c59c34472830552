#include "agent/runtime/rate_limiter.h"

#include <algorithm>

namespace shoal::runtime {

bool PeerRateLimiter::admit(const std::string& peer, Clock::time_point now) {
  auto it = buckets_.find(peer);
  if (it == buckets_.end()) {
    if (buckets_.size() >= kMaxBuckets) {
      std::erase_if(buckets_, [&](const auto& entry) {
        double seconds = std::chrono::duration<double>(now - entry.second.refilled).count();
        return entry.second.tokens + seconds * rate_ >= burst_;
      });
    }
    it = buckets_.emplace(peer, Bucket{burst_, now}).first;
  }
  Bucket& bucket = it->second;
  double seconds = std::chrono::duration<double>(now - bucket.refilled).count();
  if (seconds > 0) {
    bucket.tokens = std::min(burst_, bucket.tokens + seconds * rate_);
    bucket.refilled = now;
  }
  if (bucket.tokens < 1) {
    ++limited_;
    return false;
  }
  bucket.tokens -= 1;
  return true;
}

}  // namespace shoal::runtime
