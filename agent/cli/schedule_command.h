// `shoalctl schedule`: one full allocation of pending workloads, offline
// (the local scheduler's dry-run): on an empty cluster, or on one already
// running the workloads of --running, where the cluster's spec.preemption
// may stop some of them for pending work of higher priority.
#pragma once

#include <string>

namespace shoal::cli {

struct ScheduleArguments {
  std::string cluster_path;
  std::string workloads_path;
  std::string running_path;  // "" : the cluster runs nothing
  std::string output;  // "" or "json"
};

int run_schedule(const ScheduleArguments& arguments);

}  // namespace shoal::cli
