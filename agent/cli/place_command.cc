#include "agent/cli/place_command.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "agent/cli/read_file.h"
#include "agent/cli/table.h"
#include "agent/control/client.h"
#include "agent/control/inventory_json.h"
#include "agent/placement/engine.h"
#include "model/manifest.h"
#include "model/placement_parse.h"

namespace shoal::cli {
namespace {

using nlohmann::json;


std::string number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.4f", value);
  return buffer;
}

json to_json(const placement::PlacementOutcome& outcome, bool explain,
             const std::vector<std::string>& spellings) {
  json decisions = json::array();
  for (const auto& name : outcome.decisions) decisions.push_back({{"cluster", name}});
  json filtered = json::array();
  for (const auto& f : outcome.filtered) filtered.push_back({{"cluster", f.cluster}, {"reason", f.reason}});
  json out = {{"decisions", decisions}, {"filtered", filtered}};
  if (!outcome.routing.empty()) {
    json rows = json::array();
    for (const auto& r : outcome.routing) {
      rows.push_back({{"cluster", r.cluster}, {"weightRatio", r.weight_ratio},
                      {"currentRatio", r.current_ratio}, {"difference", r.difference}});
    }
    out["routing"] = rows;
  }
  if (outcome.draw) out["draw"] = *outcome.draw;
  if (explain && !outcome.steps.empty()) {
    json steps = json::array();
    for (const auto& step : outcome.steps) {
      json excluded = json::array(), candidates = json::array();
      for (const auto& e : step.excluded) excluded.push_back({{"cluster", e.cluster}, {"reason", e.reason}});
      for (const auto& c : step.candidates) {
        candidates.push_back({{"cluster", c.cluster}, {"spread", c.spread},
                              {"prioritizers", c.prioritizers}, {"final", c.final_score}});
      }
      steps.push_back({{"pick", step.pick}, {"excluded", excluded}, {"candidates", candidates}});
    }
    out["steps"] = steps;
  }
  if (!outcome.reason.empty()) out["reason"] = outcome.reason;
  if (explain && !spellings.empty()) out["spellings"] = spellings;
  return out;
}

void print_text(const placement::PlacementOutcome& outcome, bool explain,
                const std::vector<std::string>& spellings) {
  std::string picks;
  for (const auto& name : outcome.decisions) picks += (picks.empty() ? "" : ", ") + name;
  std::cout << "decisions: " << (picks.empty() ? "(none)" : picks) << "\n";
  if (!outcome.reason.empty()) std::cout << "reason: " << outcome.reason << "\n";
  if (!explain) return;
  for (const auto& spelling : spellings) std::cout << "read spec.placement" << spelling << "\n";
  if (!outcome.filtered.empty()) {
    std::cout << "\nfiltered:\n";
    Table table({"CLUSTER", "REASON"});
    for (const auto& f : outcome.filtered) table.add({f.cluster, f.reason});
    table.print(std::cout);
  }
  if (outcome.draw) std::cout << "\nrandom draw: " << number(*outcome.draw) << "\n";
  if (!outcome.routing.empty()) {
    std::cout << "\nrouting:\n";
    Table table({"CLUSTER", "WEIGHT RATIO", "CURRENT RATIO", "DIFFERENCE"});
    for (const auto& r : outcome.routing) {
      table.add({r.cluster, number(r.weight_ratio), number(r.current_ratio), number(r.difference)});
    }
    table.print(std::cout);
  }
  for (size_t i = 0; i < outcome.steps.size(); ++i) {
    const auto& step = outcome.steps[i];
    std::cout << "\nstep " << i + 1 << ": pick " << (step.pick.empty() ? "(none)" : step.pick) << "\n";
    for (const auto& e : step.excluded) std::cout << "  excluded " << e.cluster << ": " << e.reason << "\n";
    Table table({"  CLUSTER", "SPREAD", "PRIORITIZERS", "FINAL"});
    for (const auto& c : step.candidates) {
      table.add({"  " + c.cluster, number(c.spread), number(c.prioritizers), number(c.final_score)});
    }
    table.print(std::cout);
  }
}

// The clusters a running agent would place `workload` on now, as its own
// engine reads them: those it cannot use now are listed as filtered.
Result<std::vector<model::ClusterCandidate>> live_inventory(const std::string& data_dir,
                                                            const model::WorkloadSpec& workload,
                                                            std::vector<placement::FilteredCluster>* unavailable) {
  if (data_dir.empty()) return invalid_argument("--live: expected the agent's data directory (--data or SHOAL_DATA)");
  SHOAL_ASSIGN_OR_RETURN(json reply, control::call(data_dir, control::GetClustersRequest{
                                                               .namespace_name = workload.namespace_name,
                                                               .queue = workload.queue}));
  std::vector<model::ClusterCandidate> out;
  for (const auto& item : reply["items"]) {
    SHOAL_ASSIGN_OR_RETURN(model::ClusterCandidate candidate, control::candidate_from_json(item));
    std::string why = item.value("unavailable", "");
    if (!why.empty()) {
      unavailable->push_back({candidate.name, why, false});
      continue;
    }
    out.push_back(std::move(candidate));
  }
  return out;
}

Result<std::vector<model::ClusterCandidate>> offline_inventory(const PlaceArguments& arguments) {
  SHOAL_ASSIGN_OR_RETURN(std::string text, read_input_file(arguments.inventory_path, "--inventory"));
  return model::parse_inventory(text);
}

}  // namespace

int run_place(const PlaceArguments& arguments) {
  if (arguments.live == !arguments.inventory_path.empty()) {
    std::cerr << "shoalctl: place: expected --inventory FILE or --live\n";
    return 2;
  }
  auto workload_text = read_input_file(arguments.workload_path, "-f");
  if (!workload_text.is_ok()) {
    std::cerr << "shoalctl: " << workload_text.status().message() << "\n";
    return 2;
  }
  auto workloads = model::parse_workloads(*workload_text);
  if (!workloads.is_ok()) {
    std::cerr << "shoalctl: " << workloads.status().message() << "\n";
    return 2;
  }
  if (workloads->size() != 1) {
    std::cerr << "shoalctl: -f: expected exactly one Workload document, got " << workloads->size() << "\n";
    return 2;
  }
  const model::WorkloadSpec& workload = workloads->front();
  std::vector<placement::FilteredCluster> unavailable;
  Result<std::vector<model::ClusterCandidate>> clusters =
      arguments.live ? live_inventory(arguments.data_dir, workload, &unavailable) : offline_inventory(arguments);
  if (!clusters.is_ok()) {
    std::cerr << "shoalctl: " << clusters.status().message() << "\n";
    return clusters.status().code() == ErrorCode::kInvalidArgument ? 2 : 1;
  }
  // Live: the policy the agent decides by (its default ranking included).
  model::PlacementSpec policy = arguments.live ? placement::live_policy(workload.placement) : workload.placement;
  if (arguments.live) policy.number_of_clusters = workload.placement.number_of_clusters;
  placement::PlaceOptions options;
  options.explain = arguments.explain || arguments.output == "json";
  options.draw = arguments.draw;
  if (policy.routing && policy.routing->metric == model::RoutingMetric::kRandom && !options.draw) {
    double sum = placement::routing_weight_sum(workload, policy, *clusters);
    std::random_device device;
    std::uniform_real_distribution<double> uniform(0, sum > 0 ? sum : 1);
    options.draw = uniform(device);
  }
  placement::PlacementOutcome outcome = placement::place(workload, policy, *clusters, options);
  outcome.filtered.insert(outcome.filtered.end(), unavailable.begin(), unavailable.end());
  if (arguments.output == "json") {
    std::cout << to_json(outcome, arguments.explain, workload.placement.spellings).dump(2) << "\n";
  } else {
    print_text(outcome, arguments.explain, workload.placement.spellings);
  }
  return 0;
}

}  // namespace shoal::cli
