// Parsing of the YAML documents users write: Workload manifests and the
// Cluster manifest. Every error is one line that names the document, the
// field and what was expected; nothing here throws.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/status.h"
#include "model/resources.h"
#include "model/workload.h"

namespace shoal::model {

// Parses a multi-document YAML stream in which every document is
// `kind: Workload`. All documents are checked; the first error wins.
Result<std::vector<WorkloadSpec>> parse_workloads(std::string_view yaml);

// The same documents in JSON form, as shoalctl sends them to the agent
// (read in half the time: JSON parses three times faster): a list of Workload
// documents, each checked exactly as parse_workloads checks a YAML one
// (json_to_yaml, then the same walk). Errors name "manifest document N",
// counted from 1 in the list.
Result<std::vector<WorkloadSpec>> parse_workload_list(const nlohmann::json& documents);

// shoalctl's half: each Workload document of a YAML stream, checked as
// parse_workloads checks it, in the JSON form parse_workload_list reads.
Result<std::vector<nlohmann::json>> workload_documents_as_json(std::string_view yaml);

struct NodeSpec {
  std::string name;
  Resources capacity;
  Labels labels;
};

struct QueueSpec {
  std::string name;
  int64_t weight = 1;
};

// One Kubernetes-style ResourceQuota: hard limits for a namespace, and
// possibly its fair-share weight (shoal.dev/namespace.weight or
// volcano.sh/namespace.weight).
struct ResourceQuotaSpec {
  std::string namespace_name;
  std::map<std::string, std::string> hard;
};

enum class NodeOrder { kLeastAllocated, kMostAllocated };

// `spec.preemption` of a cluster: when the local scheduler may stop running
// work to make room for waiting work (docs/scheduling.md). Off unless said.
struct PreemptionSpec {
  // withinQueue: LowerPriority lets waiting work stop work of lower
  // priority in its own queue (Kueue's withinClusterQueue).
  enum class WithinQueue : uint8_t { kNever = 0, kLowerPriority };
  // reclaim: a queue below its deserved share takes back room from queues
  // borrowing above theirs: their work of lower priority, or any of it
  // (Volcano's reclaim, Kueue's reclaimWithinCohort).
  enum class Reclaim : uint8_t { kNever = 0, kLowerPriority, kAny };
  WithinQueue within_queue = WithinQueue::kNever;
  Reclaim reclaim = Reclaim::kNever;
  bool enabled() const { return within_queue != WithinQueue::kNever || reclaim != Reclaim::kNever; }
};

// `spec.slurm` of a cluster whose work a Slurm cluster runs (backend: slurm,
// docs/backends.md). Its nodes come from Slurm, not from spec.nodes.
struct SlurmSpec {
  std::string endpoint;    // unix:///path/rest.sock or http://host:port
  std::string token_file;  // a JWT (scontrol token) for http://; "" on a unix socket
  std::string user_name;   // the user the JWT is for (X-SLURM-USER-NAME)
  std::string partition;   // "" : Slurm's default partition, every node
  std::string account;
  std::string api_version = "v0.0.38";
  // Where jobs write their output; the jobs' user must be able to write it
  // and the agent to read it, on every node of the partition. "":
  // /var/tmp/shoal-<cluster>-slurm-output (enough for a one-host Slurm).
  std::string output_dir;
  // jobcomp/filetxt's file, when the agent can read it: how a job ended
  // that Slurm forgot while the agent was down. "": such a job is Lost.
  std::string completion_log;
  std::chrono::milliseconds timeout{2000};  // per REST call
};

// `spec.kubernetes` of a cluster whose work a Kubernetes cluster runs
// (backend: kubernetes, docs/backends.md). Its nodes come from the API
// server, not from spec.nodes.
// A Kubernetes toleration, as the agent's pods carry it: the taints it
// lets them, and so the agent, use a node despite.
struct Toleration {
  std::string key;                // "" (with Exists): every key
  bool exists = false;            // operator Exists (any value), else Equal
  std::string value;
  std::string effect;             // "" (every effect), NoSchedule, PreferNoSchedule, NoExecute
  std::optional<int64_t> seconds; // tolerationSeconds (NoExecute)
  // As kube-scheduler matches one: the key (or any), the value (Equal), the effect (or any).
  bool tolerates(const std::string& taint_key, const std::string& taint_value,
                 const std::string& taint_effect) const;
};

struct KubernetesSpec {
  std::string kubeconfig;  // a kubeconfig's path, or "" with in_cluster
  std::string context;     // "" : the kubeconfig's current-context
  bool in_cluster = false; // the agent's pod's own service account
  Labels node_selector;    // only nodes with these labels are the cluster's
  // What a pod runs when the workload names no image: its command and
  // args run in this image.
  std::string image = "busybox:1.36";
  std::chrono::milliseconds timeout{5000};  // per API call
  // How many pod creates, deletes and log reads may be out at once, each
  // on a connection of its own (one pod's calls go one after the other).
  int parallel_calls = 16;
  // Tainted nodes the agent may lend: its pods carry these, and a node
  // whose NoSchedule and NoExecute taints they all tolerate is usable.
  std::vector<Toleration> tolerations;
  std::string priority_class_name;              // "" : none
  std::vector<std::string> image_pull_secrets;  // Secrets' names in the workload's namespace
  Labels annotations;                           // added to every pod (the agent's own win)
  // Who the pods' processes run as. Not root by default, with the
  // runtime's seccomp profile and no capabilities: the pods pass Pod
  // Security "restricted". 0 runs the image's own user (root, often): then
  // only what "baseline" allows.
  int64_t run_as_user = 65534;
  int64_t run_as_group = 65534;
};

struct ClusterSpec {
  std::string name;
  Labels labels;
  Labels claims;
  std::string backend = "sim";
  std::vector<NodeSpec> nodes;  // expanded: a group with count 4 gives n-0 .. n-3
  std::vector<QueueSpec> queues;  // none given: one queue "default" of weight 1
  std::vector<ResourceQuotaSpec> resource_quotas;
  bool borrowing = false;  // fairShare.borrowing
  NodeOrder node_order = NodeOrder::kLeastAllocated;
  PreemptionSpec preemption;
  std::optional<SlurmSpec> slurm;  // backend: slurm only
  std::optional<KubernetesSpec> kubernetes;  // backend: kubernetes only
};

// The cluster a sim backend runs when no manifest is given: 4 nodes × 8 cpu × 32Gi.
ClusterSpec default_cluster_spec(const std::string& name);

Result<ClusterSpec> parse_cluster(std::string_view yaml);

}  // namespace shoal::model
