// Parsing of the YAML documents users write: Workload manifests and the
// Cluster manifest. Every error is one line that names the document, the
// field and what was expected; nothing here throws.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/resources.h"
#include "model/workload.h"

namespace shoal::model {

// Parses a multi-document YAML stream in which every document is
// `kind: Workload`. All documents are checked; the first error wins.
Result<std::vector<WorkloadSpec>> parse_workloads(std::string_view yaml);

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
};

// The cluster a sim backend runs when no manifest is given: 4 nodes × 8 cpu × 32Gi.
ClusterSpec default_cluster_spec(const std::string& name);

Result<ClusterSpec> parse_cluster(std::string_view yaml);

}  // namespace shoal::model
