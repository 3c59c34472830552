#include "agent/cli/schedule_command.h"

#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "agent/cli/read_file.h"
#include "agent/cli/table.h"
#include "agent/cluster/fair_share.h"
#include "model/manifest.h"

namespace shoal::cli {
namespace {

using nlohmann::json;


json resources(const model::Resources& r) {
  json out = {{"cpu", model::format_cpu(r.cpu_milli)}, {"memory", model::format_memory(r.memory_bytes)}};
  if (r.gpu) out["gpu"] = std::to_string(r.gpu);
  return out;
}

}  // namespace

int run_schedule(const ScheduleArguments& arguments) {
  auto cluster_text = read_input_file(arguments.cluster_path, "--cluster");
  auto workloads_text = read_input_file(arguments.workloads_path, "-f");
  for (const auto* text : {&cluster_text, &workloads_text}) {
    if (!text->is_ok()) {
      std::cerr << "shoalctl: " << text->status().message() << "\n";
      return 2;
    }
  }
  auto cluster = model::parse_cluster(*cluster_text);
  if (!cluster.is_ok()) {
    std::cerr << "shoalctl: " << cluster.status().message() << "\n";
    return 2;
  }
  auto workloads = model::parse_workloads(*workloads_text);
  if (!workloads.is_ok()) {
    std::cerr << "shoalctl: " << workloads.status().message() << "\n";
    return 2;
  }
  auto scheduler = cluster::FairShareScheduler::create(*cluster);
  if (!scheduler.is_ok()) {
    std::cerr << "shoalctl: " << scheduler.status().message() << "\n";
    return 2;
  }
  std::vector<cluster::ScheduleRequest> requests;
  for (const auto& spec : *workloads) requests.push_back({spec.key(), spec});
  cluster::ScheduleResult result = scheduler->allocate(requests);

  if (arguments.output == "json") {
    json queues = json::array();
    for (const auto& q : result.queues) {
      json namespaces = json::array();
      for (const auto& ns : q.namespaces) {
        namespaces.push_back({{"name", ns.name}, {"weight", ns.weight}, {"allocated", resources(ns.allocated)}});
      }
      queues.push_back({{"name", q.name}, {"weight", q.weight}, {"deserved", resources(q.deserved)},
                        {"allocated", resources(q.allocated)}, {"namespaces", namespaces}});
    }
    json items = json::array();
    for (size_t i = 0; i < result.workloads.size(); ++i) {
      const auto& d = result.workloads[i];
      items.push_back({{"namespace", (*workloads)[i].namespace_name}, {"name", (*workloads)[i].name},
                       {"admitted", d.admitted}, {"nodes", d.nodes}, {"reason", d.reason}});
    }
    std::cout << json{{"queues", queues}, {"workloads", items}}.dump(2) << "\n";
    return 0;
  }
  Table queues({"QUEUE", "WEIGHT", "DESERVED CPU", "ALLOCATED CPU", "NAMESPACE", "NS WEIGHT", "NS CPU"});
  for (const auto& q : result.queues) {
    if (q.namespaces.empty()) {
      queues.add({q.name, std::to_string(q.weight), model::format_cpu(q.deserved.cpu_milli),
                  model::format_cpu(q.allocated.cpu_milli), "-", "-", "-"});
    }
    for (size_t n = 0; n < q.namespaces.size(); ++n) {
      const auto& ns = q.namespaces[n];
      queues.add({n ? "" : q.name, n ? "" : std::to_string(q.weight),
                  n ? "" : model::format_cpu(q.deserved.cpu_milli),
                  n ? "" : model::format_cpu(q.allocated.cpu_milli), ns.name, std::to_string(ns.weight),
                  model::format_cpu(ns.allocated.cpu_milli)});
    }
  }
  queues.print(std::cout);
  int admitted = 0;
  for (const auto& d : result.workloads) admitted += d.admitted;
  std::cout << "\n" << admitted << " of " << result.workloads.size() << " workloads admitted\n";
  return 0;
}

}  // namespace shoal::cli
