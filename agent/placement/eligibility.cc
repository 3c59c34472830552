#include "agent/placement/eligibility.h"

#include <algorithm>

namespace shoal::placement {

Eligibility filter_and_rank(const model::WorkloadSpec& spec,
                            const std::vector<ClusterView>& clusters) {
  Eligibility out;
  const auto& allow = spec.placement.clusters;
  for (const auto& view : clusters) {
    if (!allow.empty() && std::find(allow.begin(), allow.end(), view.cluster) == allow.end()) {
      out.filtered.emplace_back(view.cluster, "NotInAllowList");
    } else if (!view.invited) {
      out.filtered.emplace_back(view.cluster, "NotInvited");
    } else if (!view.has_capacity) {
      out.filtered.emplace_back(view.cluster, "NoCapacityAdvertised");
    } else if (!view.largest_free_node.fits(spec.resources) || !view.free.fits(spec.total())) {
      out.filtered.emplace_back(view.cluster, "DoesNotFit");
    } else {
      out.eligible.push_back(view);
    }
  }
  std::stable_sort(out.eligible.begin(), out.eligible.end(),
                   [](const ClusterView& a, const ClusterView& b) {
                     if (a.free.cpu_milli != b.free.cpu_milli) {
                       return a.free.cpu_milli > b.free.cpu_milli;
                     }
                     return a.cluster < b.cluster;
                   });
  return out;
}

}  // namespace shoal::placement
