// Small federations for the lifecycle and fault tests: one source that
// cannot run anything itself, and targets it is invited into.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tests/unit/core/world.h"

namespace shoal::core::testing {

using namespace std::chrono_literals;

// Copies of `uid` that hold resources at `node` (Bound or Running).
inline int running_copies(Node& node, const std::string& uid) {
  int count = 0;
  for (const auto& r : node.agent->operations().reservations()) {
    if (r.uid == uid && (r.phase == store::ReservationPhase::kBound ||
                         r.phase == store::ReservationPhase::kRunning)) {
      ++count;
    }
  }
  return count;
}

inline std::optional<store::ReservationRecord> copy_at(Node& node, const std::string& uid) {
  for (const auto& r : node.agent->operations().reservations()) {
    if (r.uid == uid) return r;
  }
  return std::nullopt;
}

inline bool event_contains(Node& node, const std::string& uid, const std::string& text) {
  auto events = node.agent->operations().events(uid);
  if (!events.is_ok()) return false;
  return std::any_of(events->begin(), events->end(),
                     [&](const auto& e) { return e.text.find(text) != std::string::npos; });
}

struct Federation {
  World world;
  Node* source;
  Node* east;
  Node* west;
  // `more` changes every agent's config further.
  explicit Federation(Duration lease, std::function<void(AgentConfig&)> more = nullptr) {
    world.configure = [lease, more](AgentConfig& config) {
      fast_lifecycle_timers(config);
      config.lease = lease;
      if (more) more(config);
    };
    source = &world.add("source", 1, 500);  // too small to run anything itself
    east = &world.add("east");
    west = &world.add("west", 2);           // less room: east ranks first
    world.invite(*east, *source);
    world.invite(*west, *source);
    world.run_for(2s);
  }
  // Submits `spec` and lets it bind; it lands at east, which ranks first.
  // Returns its uid.
  std::string bind_at_east(const model::WorkloadSpec& spec, Duration wait = Duration(500)) {
    EXPECT_TRUE(source->agent->operations().submit({spec}).is_ok());
    world.run_for(wait);
    auto record = source->agent->operations().find_workload(spec.namespace_name, spec.name);
    EXPECT_TRUE(record.has_value());
    if (!record) return "";
    EXPECT_EQ(record->cluster, "east");
    return record->uid;
  }
  std::string submit_long_job(model::RestartPolicy policy = model::RestartPolicy::kNever) {
    model::WorkloadSpec spec = workload("job", 4000, 3600s);
    spec.restart_policy = policy;
    std::string uid = bind_at_east(spec, 1s);
    EXPECT_EQ(source->agent->operations().find_workload("default", "job")->phase,
              model::Phase::kRunning);
    return uid;
  }
  // Drops every message to or from east while cut_east is set.
  bool cut_east = false;
  std::function<bool(const Wire&)> network() {
    return [this](const Wire& w) { return !cut_east || (w.to != east->id && w.from != east->id); };
  }
};

// numberOfClusters > 1: one copy on each of N distinct clusters.
struct ThreeTargets {
  World world;
  Node* source;
  std::vector<Node*> targets;
  ThreeTargets() {
    world.configure = fast_lifecycle_timers;
    source = &world.add("source", 1, 500);
    for (const char* name : {"east", "north", "west"}) {
      targets.push_back(&world.add(name, 1));  // one 8-cpu node each
      world.invite(*targets.back(), *source);
    }
    world.run_for(2s);
  }
  model::WorkloadSpec job(int copies, int64_t cpu = 4000, Duration duration = 3600s) {
    model::WorkloadSpec spec = workload("job", cpu, duration);
    spec.placement.number_of_clusters = copies;
    return spec;
  }
  // Clusters running a copy of the group's copies (by copy uid).
  std::map<std::string, std::string> running() {
    std::map<std::string, std::string> out;
    for (Node* target : targets) {
      for (const auto& r : target->agent->operations().reservations()) {
        if (r.phase == store::ReservationPhase::kRunning) out[r.uid] = target->name;
      }
    }
    return out;
  }
};

}  // namespace shoal::core::testing
