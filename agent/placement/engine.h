// The cross-cluster placement engine: (workload, placement policy, candidate
// clusters) -> ranked decisions plus an explanation. A pure function: no
// clock, no I/O; the only randomness (routing metric "") comes from the
// caller. The rules are in docs/placement.md.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/placement_spec.h"
#include "model/workload.h"

namespace shoal::placement {

struct FilteredCluster {
  std::string cluster;
  std::string reason;            // for people, e.g. "ClusterSelectorMismatch"
  bool lacks_only_room = false;  // it passed every rule but free room, which may come back
};

struct RoutingRow {
  std::string cluster;
  double weight_ratio = 0;
  double current_ratio = 0;
  double difference = 0;
};

struct StepCandidate {
  std::string cluster;
  double spread = 0;        // normalized to [-100, 100]
  double prioritizers = 0;  // weighted sum of the other prioritizers
  double final_score = 0;   // spread weight x spread + prioritizers
};

struct Step {
  std::string pick;
  std::vector<FilteredCluster> excluded;   // by a DoNotSchedule term in this step
  std::vector<StepCandidate> candidates;   // every cluster still in the running
};

struct PlacementOutcome {
  std::vector<std::string> decisions;  // in pick order; distinct
  std::vector<FilteredCluster> filtered;
  std::vector<RoutingRow> routing;     // routing with a metric only
  std::optional<double> draw;          // routing metric "" only
  std::vector<Step> steps;             // selectOne, when explaining
  std::string reason;                  // why there are fewer decisions than asked
};

struct PlaceOptions {
  bool explain = false;
  // Routing metric "": the draw in [0, sum of weights). Required for that
  // metric; callers pass a random one, `shoalctl place --draw` a fixed one.
  std::optional<double> draw;
};

PlacementOutcome place(const model::WorkloadSpec& workload, const model::PlacementSpec& policy,
                       const std::vector<model::ClusterCandidate>& clusters,
                       const PlaceOptions& options);

// One copy's choice in a running federation: every cluster it may go to
// now, best first, by the rules of place() for one copy: the predicates,
// then routing (the routed cluster, then the next-best by the same policy
// with the ones before it left out), or one selectOne step of the spread
// with clusters marked `placed` counted as selected (so no cluster in the
// list breaks a DoNotSchedule term). `score` orders the list: the step's
// final score, or for routing 1000 per place from the end.
struct RankedCluster {
  std::string cluster;
  double score = 0;
};
struct Ranking {
  std::vector<RankedCluster> ranked;
  PlacementOutcome outcome;  // place() for one copy, with its steps
};
Ranking rank(const model::WorkloadSpec& workload, const model::PlacementSpec& policy,
             const std::vector<model::ClusterCandidate>& clusters, const PlaceOptions& options);

// The policy a running agent decides by: `spec.placement` as written, for
// one copy, with the default ranking when it names no prioritizer:
// ResourceFreeCPU (the least loaded) plus Balance (where this source has
// the least of its own work, counting what it just sent). `shoalctl place
// --live` uses it too.
model::PlacementSpec live_policy(const model::PlacementSpec& placement);

// Sum of the routing weights of the clusters that pass the predicates: the
// upper bound for a random draw.
double routing_weight_sum(const model::WorkloadSpec& workload, const model::PlacementSpec& policy,
                          const std::vector<model::ClusterCandidate>& clusters);

}  // namespace shoal::placement
