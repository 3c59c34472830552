// What a user asks to run, and the phases it goes through.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/status.h"
#include "common/text.h"
#include "common/time.h"
#include "model/placement_spec.h"
#include "model/resources.h"


namespace shoal::model {

// What the source does when a placed copy fails (a non-zero exit, or an
// operator deleting it at the target). A copy lost with its cluster (worker
// lost, lease expired) is re-placed under either policy: it never finished.
enum class RestartPolicy : uint8_t { kNever = 0, kOnFailure };
constexpr std::string_view kRestartPolicyNames[] = {"Never", "OnFailure"};

// Settings only the `sim` backend reads (spec.sim in a manifest): how long a
// simulated workload "runs" and how it ends. Real backends ignore them.
struct SimSpec {
  Duration duration{0};
  int32_t exit_code = 0;
  friend bool operator==(const SimSpec&, const SimSpec&) = default;
};

// How long a stopped workload has between SIGTERM (or its backend's
// equivalent) and SIGKILL, unless the workload says otherwise.
inline constexpr Duration kDefaultTerminationGrace = std::chrono::seconds(30);

// Whether a workload may take room from running work of lower priority
// when its cluster's spec.preemption allows it (Kubernetes' PriorityClass
// preemptionPolicy): PreemptLowerPriority by default, Never to only wait.
enum class PreemptionPolicy : uint8_t { kPreemptLowerPriority = 0, kNever };
constexpr std::string_view kPreemptionPolicyNames[] = {"PreemptLowerPriority", "Never"};

// A workload's priority lies in [-kMaxPriority, kMaxPriority]; higher runs first.
inline constexpr int32_t kMaxPriority = 1000000;
// spec.maxDisruptions and spec.maxRestarts lie in [0, kMaxBudget].
inline constexpr int32_t kMaxBudget = 1000000;

struct WorkloadSpec {
  std::string namespace_name = "default";
  std::string name;
  Labels labels;
  std::string queue = "default";
  int32_t priority = 0;
  PreemptionPolicy preemption_policy = PreemptionPolicy::kPreemptLowerPriority;
  int32_t replicas = 1;           // pods, all placed in the same cluster
  Resources resources;            // per replica
  SimSpec sim;                    // sim backend only
  // What real backends run, per replica (exec: a process; see docs/backends.md).
  std::vector<std::string> command;  // argv[0] and on; empty: nothing to run
  std::vector<std::string> args;     // appended to command
  Labels env;                        // extra environment variables
  std::string working_dir;           // relative to the replica's own directory
  // The container image a replica runs in (the kubernetes backend; empty:
  // the cluster's spec.kubernetes.image). A backend that runs no images
  // (exec, slurm, sim) never takes a workload that names one.
  std::string image;
  Duration termination_grace = kDefaultTerminationGrace;  // SIGTERM → SIGKILL
  // A copy bound but not started within this (its cluster keeps it
  // pending) is given up by its target and placed again elsewhere; 0: it
  // waits as long as it takes. The source fills in its agent.yaml
  // `startTimeout` when the manifest does not say.
  Duration start_timeout{0};
  PlacementSpec placement;        // cross-cluster policy (spec.placement)
  Labels node_selector;           // target-side: nodes must carry these labels
  int32_t min_available = 0;      // gang: bind when this many tasks fit; 0 = all replicas
  RestartPolicy restart_policy = RestartPolicy::kNever;  // source-side; not on the wire
  // Budgets, source-side and not on the wire (-1: none). Past
  // max_disruptions ends not the job's own (evicted, node or target lost,
  // start timed out), or past max_restarts own failures placed again
  // (OnFailure, or a copy its cluster could not start), the source ends
  // the workload Failed (TooManyDisruptions, TooManyRestarts) instead of
  // placing it again. The source fills in its agent.yaml `maxDisruptions`
  // when the manifest does not say.
  int32_t max_disruptions = -1;
  int32_t max_restarts = -1;

  Resources total() const { return resources * replicas; }
  int32_t gang_size() const { return min_available > 0 ? min_available : replicas; }
  std::string key() const { return namespace_name + "/" + name; }
  friend bool operator==(const WorkloadSpec&, const WorkloadSpec&) = default;
};

// Source-side lifecycle: Pending → Placing → Bound → Running → Succeeded | Failed.
enum class Phase : uint8_t { kPending = 0, kPlacing, kBound, kRunning, kSucceeded, kFailed };

constexpr std::string_view kPhaseNames[] = {"Pending", "Placing",   "Bound",
                                            "Running", "Succeeded", "Failed"};
inline std::string_view phase_name(Phase phase) { return kPhaseNames[static_cast<int>(phase)]; }
std::optional<Phase> phase_from_name(std::string_view name);
inline bool is_finished(Phase phase) {
  return phase == Phase::kSucceeded || phase == Phase::kFailed;
}

// Names follow the one rule in common/text.h.
using shoal::validate_name;

// A container image reference ("busybox:1.36", "ghcr.io/org/app@sha256:...")
// as the kubernetes backend passes it on: 1 to 512 letters, digits and
// "._-/:@". Kubernetes itself resolves it; this only keeps what travels
// and is stored to text that can be nothing else.
Status validate_image(std::string_view value, std::string_view field);

// Lossless JSON form, used by the store and the control API.
nlohmann::json to_json(const WorkloadSpec& spec);
Result<WorkloadSpec> workload_spec_from_json(const nlohmann::json& json);

}  // namespace shoal::model
