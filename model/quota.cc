#include "model/quota.h"

#include <nlohmann/json.hpp>

#include "common/text.h"
#include "model/quantity.h"

namespace shoal::model {

std::string quota_refusal(const QuotaSpec& quota, const QuotaUsage& used, const Resources& more) {
  auto over = [&](const char* resource, const std::string& held, const std::string& limit) {
    return std::string("QuotaExceeded:") + resource + ": namespace " + quota.namespace_name + " holds " +
           held + " of " + limit + " across the federation";
  };
  Resources after = used.resources + more;
  if (quota.cpu_milli && after.cpu_milli > *quota.cpu_milli) {
    return over("cpu", format_cpu(used.resources.cpu_milli), format_cpu(*quota.cpu_milli));
  }
  if (quota.memory_bytes && after.memory_bytes > *quota.memory_bytes) {
    return over("memory", format_memory(used.resources.memory_bytes), format_memory(*quota.memory_bytes));
  }
  if (quota.gpu && after.gpu > *quota.gpu) {
    return over("gpu", std::to_string(used.resources.gpu), std::to_string(*quota.gpu));
  }
  if (quota.workloads && used.workloads + 1 > *quota.workloads) {
    return over("workloads", std::to_string(used.workloads), std::to_string(*quota.workloads));
  }
  return "";
}

Result<QuotaSpec> quota_from_text(std::string_view namespace_name, std::string_view cpu,
                                  std::string_view memory, std::string_view gpu,
                                  std::string_view workloads) {
  QuotaSpec quota;
  SHOAL_RETURN_IF_ERROR(validate_name(namespace_name, "namespace"));
  quota.namespace_name = std::string(namespace_name);
  if (!cpu.empty()) {
    SHOAL_ASSIGN_OR_RETURN(quota.cpu_milli, parse_cpu_milli(cpu, "cpu"));
  }
  if (!memory.empty()) {
    SHOAL_ASSIGN_OR_RETURN(quota.memory_bytes, parse_memory_bytes(memory, "memory"));
  }
  if (!gpu.empty()) {
    SHOAL_ASSIGN_OR_RETURN(quota.gpu, parse_count(gpu, "gpu"));
  }
  if (!workloads.empty()) {
    SHOAL_ASSIGN_OR_RETURN(quota.workloads, parse_count(workloads, "workloads"));
  }
  if (!quota.cpu_milli && !quota.memory_bytes && !quota.gpu && !quota.workloads) {
    return invalid_argument("quota for namespace " + quota.namespace_name +
                            ": expected at least one of cpu, memory, gpu, workloads");
  }
  return quota;
}

std::string limits_text(const QuotaSpec& quota) {
  std::string out;
  auto add = [&](const char* key, const std::string& value) {
    out += (out.empty() ? "" : ",") + std::string(key) + "=" + value;
  };
  if (quota.cpu_milli) add("cpu", format_cpu(*quota.cpu_milli));
  if (quota.memory_bytes) add("memory", format_memory(*quota.memory_bytes));
  if (quota.gpu) add("gpu", std::to_string(*quota.gpu));
  if (quota.workloads) add("workloads", std::to_string(*quota.workloads));
  return out;
}

nlohmann::json to_json(const QuotaSpec& quota) {
  nlohmann::json hard = nlohmann::json::object();
  if (quota.cpu_milli) hard["cpu"] = format_cpu(*quota.cpu_milli);
  if (quota.memory_bytes) hard["memory"] = format_memory(*quota.memory_bytes);
  if (quota.gpu) hard["gpu"] = std::to_string(*quota.gpu);
  if (quota.workloads) hard["workloads"] = std::to_string(*quota.workloads);
  return {{"namespace", quota.namespace_name}, {"hard", hard}};
}

Result<QuotaSpec> quota_spec_from_json(const nlohmann::json& json) {
  try {
    const nlohmann::json& hard = json.at("hard");
    auto text = [&](const char* key) { return hard.contains(key) ? hard.at(key).get<std::string>() : ""; };
    return quota_from_text(json.at("namespace").get<std::string>(), text("cpu"), text("memory"),
                           text("gpu"), text("workloads"));
  } catch (const nlohmann::json::exception& e) {
    return corrupt(std::string("quota JSON: ") + e.what());
  }
}

}  // namespace shoal::model
