// Which peer clusters may get a candidate for a workload, in what order.
// A pure function over plain structs: no clock, no I/O. The full placement
// engine (routing, spread, prioritizers) grows here.
#pragma once

#include <string>
#include <vector>

#include "model/resources.h"
#include "model/workload.h"

namespace shoal::placement {

// What a source knows about one possible target.
struct ClusterView {
  std::string peer_id;
  std::string cluster;
  bool invited = false;            // an accepted invitation covers the namespace
  bool has_capacity = false;       // a CAPACITY for the namespace has arrived
  model::Resources free;           // advertised for the workload's namespace
  model::Resources largest_free_node;
};

struct Eligibility {
  std::vector<ClusterView> eligible;  // ranked: best first
  // Clusters left out, with why ("NotInvited", "NoCapacityAdvertised", "DoesNotFit").
  std::vector<std::pair<std::string, std::string>> filtered;
};

// Keeps clusters that are in spec.placement.clusters (when given), invited, have advertised capacity, whose largest
// free node fits one replica and whose free sum fits all replicas; ranks the
// survivors by most free cpu, then cluster name.
Eligibility filter_and_rank(const model::WorkloadSpec& spec,
                            const std::vector<ClusterView>& clusters);

}  // namespace shoal::placement
