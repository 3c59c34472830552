#include "model/workload.h"

#include <nlohmann/json.hpp>

namespace shoal::model {

std::optional<Phase> phase_from_name(std::string_view name) {
  for (size_t i = 0; i < std::size(kPhaseNames); ++i) {
    if (kPhaseNames[i] == name) return static_cast<Phase>(i);
  }
  return std::nullopt;
}

nlohmann::json to_json(const WorkloadSpec& spec) {
  return {
      {"namespace", spec.namespace_name},
      {"name", spec.name},
      {"labels", spec.labels},
      {"queue", spec.queue},
      {"priority", spec.priority},
      {"preemptionPolicy",
       std::string(kPreemptionPolicyNames[static_cast<int>(spec.preemption_policy)])},
      {"replicas", spec.replicas},
      {"resources",
       {{"cpu", format_cpu(spec.resources.cpu_milli)},
        {"memory", format_memory(spec.resources.memory_bytes)},
        {"gpu", spec.resources.gpu}}},
      {"durationMs", spec.sim.duration.count()},
      {"exitCode", spec.sim.exit_code},
      {"command", spec.command},
      {"args", spec.args},
      {"env", spec.env},
      {"workingDir", spec.working_dir},
      {"image", spec.image},
      {"terminationGracePeriodMs", spec.termination_grace.count()},
      {"startTimeoutMs", spec.start_timeout.count()},
      // What the agent honors so far (see Agent::submit).
      {"placement",
       {{"clusters", spec.placement.clusters},
        {"dispatcher", spec.placement.dispatcher
                           ? std::string(kDispatcherNames[static_cast<int>(*spec.placement.dispatcher)])
                           : ""},
        {"incrementalBatch", spec.placement.incremental_batch},
        {"roundTimeoutMs", spec.placement.round_timeout.count()},
        {"sampleFactor", spec.placement.sample_factor},
        {"numberOfClusters", spec.placement.number_of_clusters},
        {"readyWindowMs", spec.placement.ready_window.count()},
        {"minReady", spec.placement.min_ready}}},
      {"restartPolicy", std::string(kRestartPolicyNames[static_cast<int>(spec.restart_policy)])},
      {"nodeSelector", spec.node_selector},
      {"minAvailable", spec.min_available},
      {"maxDisruptions", spec.max_disruptions},
      {"maxRestarts", spec.max_restarts},
  };
}

Status validate_image(std::string_view value, std::string_view field) {
  constexpr size_t kMaxImageLength = 512;
  if (value.empty() || value.size() > kMaxImageLength) {
    return invalid_argument(std::string(field) + ": expected an image reference of 1 to 512 characters");
  }
  for (size_t i = 0; i < value.size(); ++i) {
    char c = value[i];
    bool allowed = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   std::string_view("._-/:@").find(c) != std::string_view::npos;
    if (!allowed) {
      return invalid_argument(std::string(field) + ": expected letters, digits and \"._-/:@\" in an image reference; character " +
                              std::to_string(i + 1) + " is not one");
    }
  }
  return Status::ok();
}

Result<WorkloadSpec> workload_spec_from_json(const nlohmann::json& json) {
  try {
    WorkloadSpec spec;
    spec.namespace_name = json.at("namespace").get<std::string>();
    spec.name = json.at("name").get<std::string>();
    spec.labels = json.at("labels").get<Labels>();
    spec.queue = json.at("queue").get<std::string>();
    spec.priority = json.at("priority").get<int32_t>();
    spec.replicas = json.at("replicas").get<int32_t>();
    const auto& resources = json.at("resources");
    SHOAL_ASSIGN_OR_RETURN(spec.resources.cpu_milli,
                           parse_cpu_milli(resources.at("cpu").get<std::string>(), "cpu"));
    SHOAL_ASSIGN_OR_RETURN(
        spec.resources.memory_bytes,
        parse_memory_bytes(resources.at("memory").get<std::string>(), "memory"));
    spec.resources.gpu = resources.at("gpu").get<int64_t>();
    spec.sim.duration = Duration(json.at("durationMs").get<int64_t>());
    spec.sim.exit_code = json.at("exitCode").get<int32_t>();
    spec.command = json.value("command", std::vector<std::string>{});
    spec.args = json.value("args", std::vector<std::string>{});
    spec.env = json.value("env", Labels{});
    spec.working_dir = json.value("workingDir", std::string());
    spec.image = json.value("image", std::string());
    spec.termination_grace = Duration(
        json.value("terminationGracePeriodMs", int64_t{kDefaultTerminationGrace.count()}));
    spec.start_timeout = Duration(json.value("startTimeoutMs", int64_t{0}));
    spec.node_selector = json.value("nodeSelector", Labels{});
    spec.min_available = json.value("minAvailable", 0);
    spec.max_disruptions = json.value("maxDisruptions", -1);
    spec.max_restarts = json.value("maxRestarts", -1);
    if (json.contains("placement")) {
      const auto& placement = json.at("placement");
      spec.placement.clusters = placement.value("clusters", std::vector<std::string>{});
      spec.placement.dispatcher = dispatcher_named(placement.value("dispatcher", std::string()));
      spec.placement.incremental_batch = placement.value("incrementalBatch", 3);
      spec.placement.round_timeout = Duration(placement.value("roundTimeoutMs", int64_t{300000}));
      spec.placement.sample_factor = placement.value("sampleFactor", 2);
      spec.placement.number_of_clusters = placement.value("numberOfClusters", 1);
      spec.placement.ready_window = Duration(placement.value("readyWindowMs", int64_t{0}));
      spec.placement.min_ready = placement.value("minReady", 0);
    }
    if (json.value("preemptionPolicy", std::string()) == "Never") {
      spec.preemption_policy = PreemptionPolicy::kNever;
    }
    if (json.value("restartPolicy", std::string("Never")) == "OnFailure") {
      spec.restart_policy = RestartPolicy::kOnFailure;
    }
    return spec;
  } catch (const nlohmann::json::exception& e) {
    return corrupt(std::string("workload spec JSON: ") + e.what());
  }
}

}  // namespace shoal::model
