#include "agent/cli/schedule_command.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "agent/cli/read_file.h"
#include "agent/cli/table.h"
#include "agent/cluster/fair_share.h"
#include "common/check.h"
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
  // What already runs, admitted whole in file order (started in that order).
  std::vector<model::WorkloadSpec> running_specs;
  if (!arguments.running_path.empty()) {
    auto text = read_input_file(arguments.running_path, "--running");
    auto parsed = text.is_ok() ? model::parse_workloads(*text) : Result<std::vector<model::WorkloadSpec>>(text.status());
    if (!parsed.is_ok()) {
      std::cerr << "shoalctl: " << parsed.status().message() << "\n";
      return 2;
    }
    running_specs = std::move(*parsed);
  }
  std::vector<cluster::RunningWork> running;
  for (size_t i = 0; i < running_specs.size(); ++i) {
    auto nodes = scheduler->admit(running_specs[i].key(), running_specs[i]);
    if (!nodes.is_ok()) {
      std::cerr << "shoalctl: --running " << running_specs[i].key() << " does not fit the cluster: "
                << nodes.status().message() << "\n";
      return 2;
    }
    running.push_back({running_specs[i].key(), &running_specs[i], std::move(*nodes), i + 1});
  }
  std::vector<cluster::ScheduleRequest> requests;
  for (const auto& spec : *workloads) requests.push_back({spec.key(), spec});
  cluster::ScheduleResult result = scheduler->allocate(requests);
  // What waits may stop running work of lower priority, highest priority first.
  std::map<size_t, std::vector<std::string>> preempts;  // by workload index
  std::vector<size_t> waiting;
  for (size_t i = 0; i < result.workloads.size(); ++i) {
    if (!result.workloads[i].admitted) waiting.push_back(i);
  }
  std::stable_sort(waiting.begin(), waiting.end(), [&](size_t a, size_t b) {
    return (*workloads)[a].priority > (*workloads)[b].priority;
  });
  for (size_t i : waiting) {
    const model::WorkloadSpec& spec = (*workloads)[i];
    auto plan = scheduler->plan_preemption(spec, running, [](const cluster::RunningWork&) { return true; });
    if (!plan) continue;
    for (const std::string& victim : plan->victims) {
      auto it = std::find_if(running.begin(), running.end(),
                             [&](const cluster::RunningWork& work) { return work.key == victim; });
      scheduler->release(*it->spec, it->nodes);
      running.erase(it);
    }
    Status placed = scheduler->restore(spec, plan->nodes);
    SHOAL_CHECK(placed.is_ok(), "a preemption plan's nodes hold its workload once its victims are gone");
    result.workloads[i].admitted = true;
    result.workloads[i].nodes = plan->nodes;
    result.workloads[i].reason.clear();
    preempts[i] = plan->victims;
  }

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
      json item = {{"namespace", (*workloads)[i].namespace_name}, {"name", (*workloads)[i].name},
                   {"admitted", d.admitted}, {"nodes", d.nodes}, {"reason", d.reason}};
      if (preempts.count(i)) item["preempts"] = preempts[i];
      items.push_back(std::move(item));
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
  for (const auto& [i, victims] : preempts) {
    std::cout << (*workloads)[i].key() << " (priority " << (*workloads)[i].priority << ") preempts";
    for (const std::string& victim : victims) std::cout << " " << victim;
    std::cout << "\n";
  }
  return 0;
}

}  // namespace shoal::cli
