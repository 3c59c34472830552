// A histogram of the Prometheus kind: fixed upper bounds, counts per bucket,
// a sum and a count. Cheap enough to observe on every placement and commit.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace shoal {

class Histogram {
 public:
  // `upper_bounds` ascending; an implicit +Inf bucket follows the last.
  explicit Histogram(std::vector<double> upper_bounds)
      : upper_bounds_(std::move(upper_bounds)), counts_(upper_bounds_.size() + 1, 0) {}

  void observe(double value) {
    auto bucket = std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value);
    ++counts_[static_cast<size_t>(bucket - upper_bounds_.begin())];
    sum_ += value;
    ++count_;
  }

  const std::vector<double>& upper_bounds() const { return upper_bounds_; }
  // Per bucket (not cumulative); the last is the +Inf bucket.
  const std::vector<uint64_t>& counts() const { return counts_; }
  double sum() const { return sum_; }
  uint64_t count() const { return count_; }

 private:
  std::vector<double> upper_bounds_;
  std::vector<uint64_t> counts_;
  double sum_ = 0;
  uint64_t count_ = 0;
};

// Seconds, from a fast commit (100 µs) to a placement that waited minutes.
inline std::vector<double> latency_buckets_seconds() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
          0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30,    60,   300};
}

}  // namespace shoal
