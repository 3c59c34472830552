// A workload's cross-cluster placement policy (spec.placement) and the view
// of one candidate cluster the placement engine decides over.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "common/time.h"
#include "model/resources.h"

namespace shoal::model {

using Labels = std::map<std::string, std::string>;

struct LabelRequirement {
  enum class Operator { kIn, kNotIn, kExists, kDoesNotExist };
  std::string key;
  Operator op = Operator::kIn;
  std::vector<std::string> values;
  friend bool operator==(const LabelRequirement&, const LabelRequirement&) = default;
};

// Kubernetes label selector semantics: every matchLabels pair and every
// expression must hold. An empty selector matches everything.
struct LabelSelector {
  Labels match_labels;
  std::vector<LabelRequirement> match_expressions;
  bool matches(const Labels& labels) const;
  bool empty() const { return match_labels.empty() && match_expressions.empty(); }
  friend bool operator==(const LabelSelector&, const LabelSelector&) = default;
};

enum class RoutingMetric { kRandom, kWorkloads, kCpu, kMemory, kQueue };  // kRandom is metric ""
enum class RoutingDomain { kNamespace, kCluster };

struct RoutingPolicy {
  std::unordered_map<std::string, int64_t> weights;  // by cluster name
  RoutingMetric metric = RoutingMetric::kRandom;
  RoutingDomain domain = RoutingDomain::kNamespace;
  friend bool operator==(const RoutingPolicy&, const RoutingPolicy&) = default;
};

enum class WhenUnsatisfiable { kScheduleAnyway, kDoNotSchedule };

struct SpreadConstraint {
  std::string topology_key;
  bool key_is_claim = false;  // topologyKeyType Claim; Label otherwise
  int32_t max_skew = 1;
  WhenUnsatisfiable when_unsatisfiable = WhenUnsatisfiable::kScheduleAnyway;
  friend bool operator==(const SpreadConstraint&, const SpreadConstraint&) = default;
};

struct PrioritizerConfig {
  // Spread, Balance, Steady, ResourceAllocatableCPU/Memory, ResourceFreeCPU/Memory, or a named score
  std::string name;
  int64_t weight = 1;
  friend bool operator==(const PrioritizerConfig&, const PrioritizerConfig&) = default;
};

// How a source hands out candidates. Unset: the agent's default
// (Preferred). Preferred asks the round's first-ranked target alone while
// it has room to offer, and the rest only when it refuses or stays silent
// for preferredWait: the winner AllAtOnce would choose, without every other
// target reserving, answering and releasing for nothing.
enum class Dispatcher { kAllAtOnce, kIncremental, kSample, kExternal, kPreferred };
inline constexpr std::string_view kDispatcherNames[] = {"AllAtOnce", "Incremental", "Sample", "External",
                                                        "Preferred"};
// The dispatcher spelled `name` (as kDispatcherNames spells it), or none.
inline std::optional<Dispatcher> dispatcher_named(std::string_view name) {
  for (size_t i = 0; i < std::size(kDispatcherNames); ++i) {
    if (name == kDispatcherNames[i]) return static_cast<Dispatcher>(i);
  }
  return std::nullopt;
}

struct PlacementSpec {
  int32_t number_of_clusters = 1;
  std::optional<Dispatcher> dispatcher;
  int32_t incremental_batch = 3;             // Incremental: clusters asked per round
  Duration round_timeout = std::chrono::minutes(5);  // Incremental: wait before asking more
  int32_t sample_factor = 2;                 // Sample: ask the d*N best-ranked
  Duration ready_window{0};  // collect READYs this long, then approve the best score; 0: first wins
  int32_t min_ready = 0;     // ... or stop collecting once this many arrived; 0: wait the window out
  std::vector<std::string> clusters;  // allow list; empty = any
  LabelSelector cluster_selector;
  LabelSelector claim_selector;
  std::optional<RoutingPolicy> routing;
  std::vector<SpreadConstraint> spread_constraints;  // at most 8
  bool exact_mode = false;                           // prioritizerPolicy.mode Exact
  std::vector<PrioritizerConfig> prioritizers;
  // Fields read in another system's spelling (OCM, the Spark gateway), each
  // as "theirs -> ours", for `shoalctl place --explain`. Not persisted.
  std::vector<std::string> spellings;

  bool is_default() const {
    return number_of_clusters == 1 && !dispatcher && ready_window.count() == 0 && min_ready == 0 &&
           clusters.empty() && cluster_selector.empty() &&
           claim_selector.empty() && !routing && spread_constraints.empty() &&
           prioritizers.empty() && !exact_mode;
  }
  friend bool operator==(const PlacementSpec& a, const PlacementSpec& b) {
    auto key = [](const PlacementSpec& p) {
      return std::tie(p.number_of_clusters, p.dispatcher, p.incremental_batch, p.round_timeout, p.sample_factor,
                      p.ready_window, p.min_ready, p.clusters, p.cluster_selector, p.claim_selector, p.routing,
                      p.spread_constraints, p.exact_mode, p.prioritizers);
    };
    return key(a) == key(b);  // how a policy was spelled does not change it
  }
};

// What the engine knows about one cluster: advertised aggregates and counts,
// never nodes.
struct UsageCounts {
  int64_t workloads = 0;     // bound or running
  int64_t cpu_milli = 0;     // what those hold
  int64_t memory_bytes = 0;
  int64_t queued = 0;        // waiting in the cluster's queue
  UsageCounts& operator+=(const UsageCounts& o) {
    workloads += o.workloads;
    cpu_milli += o.cpu_milli;
    memory_bytes += o.memory_bytes;
    queued += o.queued;
    return *this;
  }
  friend bool operator==(const UsageCounts&, const UsageCounts&) = default;
};

struct ClusterCandidate {
  std::string name;
  Labels labels;
  Labels claims;
  std::optional<std::vector<std::string>> namespaces;  // invited namespaces; nullopt = all
  Resources allocatable;  // the whole cluster's; zero when not known (ranks by free instead)
  Resources free;
  Resources largest_free_node;
  UsageCounts cluster_counts;
  std::map<std::string, UsageCounts> namespace_counts;
  std::map<std::string, int64_t> queue_counts;  // workloads per queue
  int64_t source_workloads = 0;                 // workloads of the deciding source there (Balance)
  bool previously_selected = false;             // Steady
  // Another copy of this workload is (or is being) placed here: not
  // selectable, but it counts as selected in the spread (a group's copies
  // are placed one at a time, each seeing where its siblings went).
  bool placed = false;
  std::map<std::string, double> scores;         // named prioritizer scores
};

}  // namespace shoal::model
