// `shoalctl place`: the placement engine offline, on an Inventory file.
#pragma once

#include <optional>
#include <string>

namespace shoal::cli {

struct PlaceArguments {
  std::string inventory_path;  // offline, or:
  bool live = false;           // the agent's live inventory (get-clusters)
  std::string data_dir;        // with live
  std::string workload_path;
  std::optional<double> draw;
  std::string output;  // "" or "json"
  bool explain = false;
};

// Prints the decision; returns the process exit code (2 for bad input).
int run_place(const PlaceArguments& arguments);

}  // namespace shoal::cli
