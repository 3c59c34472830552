// The simulator's network: every envelope an agent sends takes a
// link from its sender to its receiver, and the link decides — from the
// simulator's seed alone — when it arrives, or whether it arrives at all.
//
// A link's one-way latency is a base (by where the two agents sit: the same
// organization is a LAN, two organizations a WAN whose distance is drawn
// once per pair) plus lognormal jitter, so delays are spread as real ones
// are rather than fixed. Links keep order (TCP, as ZeroMQ's are) unless a
// fault lets one message overtake another. Faults, all per link and all
// seeded: drop, duplicate, reorder, and cuts (partitions, possibly one-way).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <random>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/time.h"

namespace shoal::sim {

// What goes wrong on links while faults are on (each per message).
struct LinkFaults {
  double drop = 0;       // the message is lost
  double duplicate = 0;  // it arrives twice (the second copy later)
  double reorder = 0;    // it may overtake messages sent before it
  friend bool operator==(const LinkFaults&, const LinkFaults&) = default;
};

struct NetworkOptions {
  // Microseconds: a LAN is faster than the agents' millisecond clock, so
  // the sum is rounded up to the next millisecond at the end.
  std::chrono::microseconds lan_base{300};    // one way, same organization
  std::chrono::microseconds wan_min{5'000};   // one way, between organizations:
  std::chrono::microseconds wan_max{60'000};  // drawn per pair in [min, max]
  std::chrono::microseconds jitter_median{200};
  double jitter_sigma = 0.8;  // lognormal shape of the jitter
};

// When the copies of one message arrive: none (lost), one, or two
// (duplicated). A value, not a vector: every envelope of a run is routed,
// on the one thread that applies steps, and an allocation each showed.
class Arrivals {
 public:
  void push_back(TimePoint at) { at_[count_++] = at; }
  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  TimePoint operator[](size_t i) const { return at_[i]; }
  const TimePoint* begin() const { return at_.data(); }
  const TimePoint* end() const { return at_.data() + count_; }

 private:
  std::array<TimePoint, 2> at_{};
  uint8_t count_ = 0;
};

class Network {
 public:
  Network(uint64_t seed, NetworkOptions options);

  // Agent `agent` belongs to `org` (links inside one org are LAN links).
  void place(uint32_t agent, uint32_t org);

  // When a message `from` → `to` sent at `now` arrives: none when it is
  // lost, two times when it is duplicated. Draws from the seeded stream, so
  // the n-th call of a run always answers the same.
  Arrivals route(uint32_t from, uint32_t to, TimePoint now);

  // Faults. A cut link loses every message until it heals.
  void cut(uint32_t from, uint32_t to) { cuts_.insert({from, to}); }
  void heal(uint32_t from, uint32_t to) { cuts_.erase({from, to}); }
  // `side` against everyone else, both ways, under one partition id.
  void partition(uint32_t id, const std::vector<uint32_t>& side);
  void heal_partition(uint32_t id);
  void set_faults(LinkFaults faults) { faults_ = faults; }
  const LinkFaults& faults() const { return faults_; }
  bool is_cut(uint32_t from, uint32_t to) const;
  // Nothing cut, no partition, no link faults.
  bool healed() const { return cuts_.empty() && partitions_.empty() && faults_ == LinkFaults{}; }

  struct Stats {
    uint64_t sent = 0, delivered = 0, dropped_by_cut = 0, dropped = 0, duplicated = 0,
             reordered = 0;
  };
  const Stats& stats() const { return stats_; }

 private:
  std::chrono::microseconds base_latency(uint32_t from, uint32_t to);
  static uint64_t link_key(uint32_t from, uint32_t to) { return uint64_t{from} << 32 | to; }
  // The last arrival on link `from` → `to` (TimePoint{} before any).
  TimePoint& last_arrival(uint32_t from, uint32_t to);

  std::mt19937_64 rng_;
  NetworkOptions options_;
  std::lognormal_distribution<double> jitter_;
  std::vector<uint32_t> org_of_;
  std::unordered_map<uint64_t, std::chrono::microseconds>
      wan_base_;                                          // (org, org) -> base, drawn once
  // Per link, so that order is kept: an open-addressing table (linear
  // probing, at most half full) of link_key + 1, 0 marking a free slot. It
  // is probed for every envelope, and std::unordered_map's node per link
  // cost a cache miss more per probe in a 1,000-agent run.
  struct LastArrival {
    uint64_t key = 0;
    TimePoint at{};
  };
  std::vector<LastArrival> last_arrival_;
  size_t links_ = 0;
  std::set<std::pair<uint32_t, uint32_t>> cuts_;
  // partition id -> which agents are on its side
  std::unordered_map<uint32_t, std::vector<bool>> partitions_;
  LinkFaults faults_;
  Stats stats_;
};

}  // namespace shoal::sim
