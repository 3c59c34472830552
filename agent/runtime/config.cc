#include "agent/runtime/config.h"

#include <fstream>
#include <optional>

#include <yaml-cpp/yaml.h>

#include "agent/runtime/http_endpoint.h"
#include "model/quantity.h"
#include "model/workload.h"
#include "model/yaml_document.h"

namespace shoal::runtime {

namespace {

Status read_duration(const YAML::Node& node, const char* key, Duration* out) {
  if (!node[key]) return Status::ok();
  if (!node[key].IsScalar()) return invalid_argument(std::string("agent.yaml ") + key + ": expected a duration");
  SHOAL_ASSIGN_OR_RETURN(*out, parse_duration(node[key].Scalar(), std::string("agent.yaml ") + key));
  return Status::ok();
}

Result<core::Disclosure> read_disclosure(const YAML::Node& node) {
  if (!node.IsMap()) {
    return invalid_argument("agent.yaml disclose: expected a mapping with labels, claims, clusterCounts");
  }
  core::Disclosure out;
  for (const auto& item : node) {
    std::string key = item.first.as<std::string>();
    if (key == "labels" || key == "claims") {
      if (!item.second.IsSequence()) {
        return invalid_argument("agent.yaml disclose." + key + ": expected a list of keys (\"*\": all, []: none)");
      }
      std::vector<std::string> keys;
      for (const auto& entry : item.second) {
        if (!entry.IsScalar()) return invalid_argument("agent.yaml disclose." + key + ": expected a list of keys");
        keys.push_back(entry.Scalar());
      }
      (key == "labels" ? out.labels : out.claims) = std::move(keys);
    } else if (key == "clusterCounts") {
      bool value = false;
      if (!item.second.IsScalar() || !YAML::convert<bool>::decode(item.second, value)) {
        return invalid_argument("agent.yaml disclose.clusterCounts: expected true or false");
      }
      out.cluster_counts = value;
    } else {
      return invalid_argument("agent.yaml disclose." + key + ": unknown field (expected labels, claims, clusterCounts)");
    }
  }
  return out;
}

Status read_exec(const YAML::Node& node, AgentFile* file) {
  if (!node.IsMap()) return invalid_argument("agent.yaml exec: expected a mapping with logCap, keepFinished");
  for (const auto& item : node) {
    std::string key = item.first.as<std::string>();
    std::string field = "agent.yaml exec." + key;
    if (!item.second.IsScalar()) return invalid_argument(field + ": expected a single value");
    if (key == "logCap") {
      SHOAL_ASSIGN_OR_RETURN(file->exec_log_cap_bytes, model::parse_memory_bytes(item.second.Scalar(), field));
      if (file->exec_log_cap_bytes < 4096) return invalid_argument(field + ": expected at least 4Ki");
    } else if (key == "keepFinished") {
      SHOAL_ASSIGN_OR_RETURN(file->exec_keep_finished, parse_duration(item.second.Scalar(), field));
    } else {
      return invalid_argument(field + ": unknown field (expected logCap, keepFinished)");
    }
  }
  return Status::ok();
}

}  // namespace

Result<AgentFile> load_agent_file(const std::string& data_dir) {
  AgentFile file;
  SHOAL_ASSIGN_OR_RETURN(YAML::Node node, control::load_agent_yaml(data_dir));
  try {
    SHOAL_ASSIGN_OR_RETURN(control::AgentName agent_name, control::agent_name_of(node));
    file.cluster = agent_name.cluster;
    file.org = agent_name.org;
    file.listen = agent_name.listen;
    file.advertise = agent_name.advertise;
    if (node["clusterConfig"]) file.cluster_config = node["clusterConfig"].as<std::string>();
    if (node["logFormat"]) {
      file.log_format = node["logFormat"].as<std::string>();
      if (file.log_format != "text" && file.log_format != "json") {
        return invalid_argument("agent.yaml logFormat: expected \"text\" or \"json\", got \"" +
                                file.log_format + "\"");
      }
    }
    if (node["wireEncryption"]) {
      file.wire_encryption = node["wireEncryption"].as<std::string>();
      if (file.wire_encryption != "curve" && file.wire_encryption != "none") {
        return invalid_argument("agent.yaml wireEncryption: expected \"curve\" or \"none\", got \"" +
                                file.wire_encryption + "\"");
      }
    }
    if (node["defaultDispatcher"]) {
      std::string name = node["defaultDispatcher"].as<std::string>();
      // External waits for an operator's nominations: never a default.
      std::optional<model::Dispatcher> dispatcher = model::dispatcher_named(name);
      if (dispatcher && *dispatcher != model::Dispatcher::kExternal) {
        file.timing.default_dispatcher = *dispatcher;
      } else {
        return invalid_argument("agent.yaml defaultDispatcher: expected Preferred, AllAtOnce, Incremental or Sample, got \"" +
                                name + "\"");
      }
    }
    for (auto [key, out] : {std::pair{"peerMessageRate", &file.peer_message_rate},
                            std::pair{"peerMessageBurst", &file.peer_message_burst}}) {
      if (!node[key]) continue;
      int64_t value = 0;
      if (!node[key].IsScalar() || !YAML::convert<int64_t>::decode(node[key], value) || value < 1 ||
          value > 10'000'000) {
        return invalid_argument(std::string("agent.yaml ") + key +
                                ": expected a whole number of messages from 1 to 10000000");
      }
      *out = value;
    }
    if (node["placementWindow"]) {
      int64_t value = 0;
      if (!node["placementWindow"].IsScalar() ||
          !YAML::convert<int64_t>::decode(node["placementWindow"], value) || value < 1 ||
          value > 1'000'000) {
        return invalid_argument(
            "agent.yaml placementWindow: expected a whole number of workloads from 1 to 1000000");
      }
      file.timing.placement_window = value;
    }
    if (const YAML::Node budget = node["maxDisruptions"]) {
      int64_t value = 0;
      bool unlimited = budget.IsScalar() && budget.Scalar() == "unlimited";
      if (!unlimited && (!budget.IsScalar() || !YAML::convert<int64_t>::decode(budget, value) || value < 0 ||
                         value > model::kMaxBudget)) {
        return invalid_argument("agent.yaml maxDisruptions: expected unlimited or a whole number from 0 to " +
                                std::to_string(model::kMaxBudget));
      }
      file.timing.max_disruptions = unlimited ? -1 : static_cast<int32_t>(value);
    }
    if (node["metricsListen"]) {
      if (!node["metricsListen"].IsScalar()) return invalid_argument("agent.yaml metricsListen: expected HOST:PORT");
      file.metrics_listen = node["metricsListen"].Scalar();
      if (!file.metrics_listen.empty()) SHOAL_RETURN_IF_ERROR(validate_metrics_listen(file.metrics_listen));
    }
    if (const YAML::Node exec = node["exec"]) {
      SHOAL_RETURN_IF_ERROR(read_exec(exec, &file));
    }
    if (const YAML::Node disclose = node["disclose"]) {
      SHOAL_ASSIGN_OR_RETURN(file.timing.disclose, read_disclosure(disclose));
    }
    SHOAL_RETURN_IF_ERROR(read_duration(node, "preferredWait", &file.timing.preferred_wait));
    SHOAL_RETURN_IF_ERROR(read_duration(node, "reservationTTL", &file.timing.reservation_ttl));
    SHOAL_RETURN_IF_ERROR(read_duration(node, "pendingRetryMax", &file.timing.pending_retry_max));
    SHOAL_RETURN_IF_ERROR(read_duration(node, "queueHold", &file.timing.queue_hold));
    SHOAL_RETURN_IF_ERROR(read_duration(node, "heartbeatInterval", &file.timing.heartbeat_interval));
    SHOAL_RETURN_IF_ERROR(read_duration(node, "retryInterval", &file.timing.retry_interval));
    SHOAL_RETURN_IF_ERROR(read_duration(node, "pendingRetry", &file.timing.pending_retry));
    SHOAL_RETURN_IF_ERROR(read_duration(node, "replayWindow", &file.timing.replay_window));
    SHOAL_RETURN_IF_ERROR(read_duration(node, "lease", &file.timing.lease));
    SHOAL_RETURN_IF_ERROR(read_duration(node, "maxClockSkew", &file.timing.max_clock_skew));
    SHOAL_RETURN_IF_ERROR(read_duration(node, "workerLostTimeout", &file.timing.worker_lost_timeout));
    SHOAL_RETURN_IF_ERROR(read_duration(node, "gcInterval", &file.timing.gc_interval));
    SHOAL_RETURN_IF_ERROR(read_duration(node, "startTimeout", &file.timing.start_timeout));
  } catch (const YAML::Exception& e) {
    return invalid_argument("agent.yaml: " + e.msg);
  }
  if (file.timing.queue_hold <= file.timing.pending_retry_max) {
    return invalid_argument("agent.yaml queueHold: expected more than pendingRetryMax (" +
                            format_duration(file.timing.pending_retry_max) +
                            "), or queued candidates are forgotten between a source's retries");
  }
  if (std::string problem = core::check_fencing_timers(file.timing); !problem.empty()) {
    return invalid_argument("agent.yaml " + problem);
  }
  if (file.timing.gc_interval.count() <= 0) {
    return invalid_argument("agent.yaml gcInterval: expected more than 0s");
  }
  if (file.timing.retry_interval.count() <= 0 || file.timing.heartbeat_interval.count() <= 0) {
    return invalid_argument("agent.yaml retryInterval/heartbeatInterval: expected more than 0s");
  }
  file.timing.cluster = file.cluster;
  file.timing.org = file.org;
  file.timing.endpoint = file.advertise;
  return file;
}

Status write_agent_file(const std::string& data_dir, const AgentFile& file) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "cluster" << YAML::Value << file.cluster;
  out << YAML::Key << "org" << YAML::Value << file.org;
  out << YAML::Key << "listen" << YAML::Value << file.listen;
  // Absent, peers dial `listen` itself.
  if (!file.advertise.empty() && file.advertise != file.listen) {
    out << YAML::Key << "advertise" << YAML::Value << file.advertise;
  }
  if (!file.cluster_config.empty()) {
    out << YAML::Key << "clusterConfig" << YAML::Value << file.cluster_config;
  }
  out << YAML::Key << "logFormat" << YAML::Value << file.log_format;
  out << YAML::Key << "wireEncryption" << YAML::Value << file.wire_encryption;
  out << YAML::Key << "peerMessageRate" << YAML::Value << file.peer_message_rate;
  out << YAML::Key << "peerMessageBurst" << YAML::Value << file.peer_message_burst;
  out << YAML::Key << "defaultDispatcher" << YAML::Value
      << std::string(model::kDispatcherNames[static_cast<int>(file.timing.default_dispatcher)]);
  out << YAML::Key << "reservationTTL" << YAML::Value
      << format_duration(file.timing.reservation_ttl);
  out << YAML::Key << "heartbeatInterval" << YAML::Value
      << format_duration(file.timing.heartbeat_interval);
  out << YAML::Key << "retryInterval" << YAML::Value << format_duration(file.timing.retry_interval);
  out << YAML::Key << "pendingRetry" << YAML::Value << format_duration(file.timing.pending_retry);
  out << YAML::Key << "pendingRetryMax" << YAML::Value << format_duration(file.timing.pending_retry_max);
  out << YAML::Key << "queueHold" << YAML::Value << format_duration(file.timing.queue_hold);
  out << YAML::Key << "replayWindow" << YAML::Value << format_duration(file.timing.replay_window);
  out << YAML::Key << "lease" << YAML::Value << format_duration(file.timing.lease);
  out << YAML::Key << "maxClockSkew" << YAML::Value << format_duration(file.timing.max_clock_skew);
  out << YAML::Key << "workerLostTimeout" << YAML::Value
      << format_duration(file.timing.worker_lost_timeout);
  out << YAML::Key << "gcInterval" << YAML::Value << format_duration(file.timing.gc_interval);
  out << YAML::Key << "startTimeout" << YAML::Value << format_duration(file.timing.start_timeout);
  out << YAML::Key << "placementWindow" << YAML::Value << file.timing.placement_window;
  out << YAML::Key << "maxDisruptions" << YAML::Value;
  if (file.timing.max_disruptions < 0) {
    out << "unlimited";
  } else {
    out << file.timing.max_disruptions;
  }
  out << YAML::Key << "preferredWait" << YAML::Value << format_duration(file.timing.preferred_wait);
  out << YAML::Key << "metricsListen" << YAML::Value << file.metrics_listen;
  out << YAML::Key << "exec" << YAML::Value << YAML::Flow << YAML::BeginMap;
  out << YAML::Key << "logCap" << YAML::Value << model::format_memory(file.exec_log_cap_bytes);
  out << YAML::Key << "keepFinished" << YAML::Value << format_duration(file.exec_keep_finished);
  out << YAML::EndMap;
  out << YAML::Key << "disclose" << YAML::Value << YAML::Flow << YAML::BeginMap;
  out << YAML::Key << "labels" << YAML::Value << YAML::Flow << file.timing.disclose.labels;
  out << YAML::Key << "claims" << YAML::Value << YAML::Flow << file.timing.disclose.claims;
  out << YAML::Key << "clusterCounts" << YAML::Value << file.timing.disclose.cluster_counts;
  out << YAML::EndMap;
  out << YAML::EndMap;
  std::ofstream stream(config_path(data_dir));
  stream << "# shoal agent configuration, written by `shoald init`.\n" << out.c_str() << "\n";
  if (!stream) return internal_error("cannot write " + config_path(data_dir));
  return Status::ok();
}

}  // namespace shoal::runtime
