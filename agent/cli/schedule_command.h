// `shoalctl schedule`: one full allocation of pending workloads on an empty
// cluster, offline (the local scheduler's dry-run).
#pragma once

#include <string>

namespace shoal::cli {

struct ScheduleArguments {
  std::string cluster_path;
  std::string workloads_path;
  std::string output;  // "" or "json"
};

int run_schedule(const ScheduleArguments& arguments);

}  // namespace shoal::cli
