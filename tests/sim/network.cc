#include "tests/sim/network.h"

#include <algorithm>
#include <cmath>

namespace shoal::sim {

namespace {
// The jitter is drawn in microseconds (LAN delays are below the clock's
// millisecond), with its median at `median`.
std::lognormal_distribution<double> jitter_in_us(std::chrono::microseconds median, double sigma) {
  return std::lognormal_distribution<double>(
      std::log(std::max<double>(1.0, static_cast<double>(median.count()))), sigma);
}
}  // namespace

Network::Network(uint64_t seed, NetworkOptions options)
    : rng_(seed),
      options_(options),
      jitter_(jitter_in_us(options.jitter_median, options.jitter_sigma)) {}

void Network::place(uint32_t agent, uint32_t org) {
  if (org_of_.size() <= agent) org_of_.resize(agent + 1, 0);
  org_of_[agent] = org;
}

std::chrono::microseconds Network::base_latency(uint32_t from, uint32_t to) {
  uint32_t a = from < org_of_.size() ? org_of_[from] : 0;
  uint32_t b = to < org_of_.size() ? org_of_[to] : 0;
  if (a == b) return options_.lan_base;
  uint64_t key = link_key(std::min(a, b), std::max(a, b));
  auto it = wan_base_.find(key);
  if (it == wan_base_.end()) {
    int64_t lo = options_.wan_min.count(),
            hi = std::max(options_.wan_min, options_.wan_max).count();
    std::chrono::microseconds base(std::uniform_int_distribution<int64_t>(lo, hi)(rng_));
    it = wan_base_.emplace(key, base).first;
  }
  return it->second;
}

void Network::partition(uint32_t id, const std::vector<uint32_t>& side) {
  std::vector<bool>& members = partitions_[id];
  for (uint32_t agent : side) {
    if (members.size() <= agent) members.resize(agent + 1, false);
    members[agent] = true;
  }
}

void Network::heal_partition(uint32_t id) { partitions_.erase(id); }

bool Network::is_cut(uint32_t from, uint32_t to) const {
  if (cuts_.count({from, to})) return true;
  for (const auto& [id, members] : partitions_) {
    bool a = from < members.size() && members[from];
    bool b = to < members.size() && members[to];
    if (a != b) return true;
  }
  return false;
}

TimePoint& Network::last_arrival(uint32_t from, uint32_t to) {
  if (2 * (links_ + 1) > last_arrival_.size()) {
    std::vector<LastArrival> old(std::max<size_t>(64, 2 * last_arrival_.size()));
    old.swap(last_arrival_);
    links_ = 0;
    for (const LastArrival& entry : old) {
      if (entry.key == 0) continue;
      const uint64_t link = entry.key - 1;
      last_arrival(static_cast<uint32_t>(link >> 32), static_cast<uint32_t>(link)) = entry.at;
    }
  }
  const uint64_t key = link_key(from, to) + 1;
  const size_t mask = last_arrival_.size() - 1;
  for (size_t i = (key * 0x9E3779B97F4A7C15ull) >> 20 & mask;; i = (i + 1) & mask) {
    LastArrival& entry = last_arrival_[i];
    if (entry.key == key) return entry.at;
    if (entry.key == 0) {
      entry.key = key;
      ++links_;
      return entry.at;
    }
  }
}

Arrivals Network::route(uint32_t from, uint32_t to, TimePoint now) {
  ++stats_.sent;
  Arrivals out;
  if (is_cut(from, to)) {
    ++stats_.dropped_by_cut;
    return out;
  }
  auto chance = [&](double p) {
    return p > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < p;
  };
  if (chance(faults_.drop)) {
    ++stats_.dropped;
    return out;
  }
  int copies = chance(faults_.duplicate) ? 2 : 1;
  if (copies == 2) ++stats_.duplicated;
  std::chrono::microseconds base = base_latency(from, to);
  TimePoint& last = last_arrival(from, to);
  for (int i = 0; i < copies; ++i) {
    // Rounded up to the clock's millisecond: nothing arrives the instant
    // it is sent.
    int64_t us = base.count() + static_cast<int64_t>(jitter_(rng_));
    Duration delay((us + 999) / 1000);
    TimePoint at = now + delay;
    if (chance(faults_.reorder)) {
      ++stats_.reordered;  // may overtake: its own time, whatever went before
    } else {
      at = std::max(at, last);  // TCP order: never before the previous message
      last = at;
    }
    out.push_back(at);
  }
  stats_.delivered += out.size();
  return out;
}

}  // namespace shoal::sim
