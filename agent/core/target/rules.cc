#include "agent/core/target/rules.h"

namespace shoal::core::target {

double free_cpu_score(const cluster::Cluster& cluster) {
  cluster::CapacitySummary summary = cluster.capacity();
  int64_t total_cpu = 0;
  for (const auto& node : cluster.nodes()) total_cpu += node.capacity.cpu_milli;
  return total_cpu > 0
             ? 100.0 * static_cast<double>(summary.free.cpu_milli) / static_cast<double>(total_cpu)
             : 0.0;
}

}  // namespace shoal::core::target
