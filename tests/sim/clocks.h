// Clocks for simulated worlds (the federation simulator and the core's unit
// tests): a world clock that moves only when told, and one agent's view of
// it, off by a fixed skew as real hosts are (within maxClockSkew).
#pragma once

#include "common/time.h"

namespace shoal::sim {

class VirtualClock final : public Clock {
 public:
  TimePoint now() const override { return now_; }
  void set(TimePoint t) { now_ = t; }
  void advance(Duration d) { now_ += d; }

 private:
  TimePoint now_ = from_millis(1'800'000'000'000);
};

class SkewedClock final : public Clock {
 public:
  SkewedClock(const Clock& world, Duration skew) : world_(world), skew_(skew) {}
  TimePoint now() const override { return world_.now() + skew_; }
  Duration skew() const { return skew_; }

 private:
  const Clock& world_;
  Duration skew_;
};

}  // namespace shoal::sim
