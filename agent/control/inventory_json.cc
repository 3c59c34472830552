#include "agent/control/inventory_json.h"

#include "model/quantity.h"

namespace shoal::control {

using nlohmann::json;

namespace {


json counts_json(const model::UsageCounts& c) {
  return {{"workloads", c.workloads},
          {"cpu", model::format_cpu(c.cpu_milli)},
          {"memory", model::format_memory(c.memory_bytes)},
          {"queued", c.queued}};
}

Status wrong(const std::string& field, const std::string& expected) {
  return invalid_argument("live inventory item field \"" + field + "\": expected " + expected);
}

// `cpu` and `memory` of `value` as quantity strings ("1500m", "4Gi"), each
// left as it is when absent.
Status read_cpu_and_memory(const json& value, const std::string& field, int64_t* cpu_milli,
                           int64_t* memory_bytes) {
  if (value.contains("cpu")) {
    if (!value["cpu"].is_string()) return wrong(field + ".cpu", "a quantity string");
    SHOAL_ASSIGN_OR_RETURN(*cpu_milli, model::parse_cpu_milli(value["cpu"].get<std::string>(), field + ".cpu"));
  }
  if (value.contains("memory")) {
    if (!value["memory"].is_string()) return wrong(field + ".memory", "a quantity string");
    SHOAL_ASSIGN_OR_RETURN(*memory_bytes,
                           model::parse_memory_bytes(value["memory"].get<std::string>(), field + ".memory"));
  }
  return Status::ok();
}

Result<model::Resources> read_resources(const json& item, const std::string& field) {
  model::Resources r;
  if (!item.contains(field)) return r;
  const json& value = item.at(field);
  if (!value.is_object()) return wrong(field, "an object with cpu, memory, gpu");
  SHOAL_RETURN_IF_ERROR(read_cpu_and_memory(value, field, &r.cpu_milli, &r.memory_bytes));
  if (value.contains("gpu")) {
    if (!value["gpu"].is_number_integer()) return wrong(field + ".gpu", "a whole number");
    r.gpu = value["gpu"].get<int64_t>();
  }
  return r;
}

Result<model::UsageCounts> read_counts(const json& value, const std::string& field) {
  model::UsageCounts c;
  if (!value.is_object()) return wrong(field, "an object with workloads, cpu, memory, queued");
  for (auto [key, out] : {std::pair{"workloads", &c.workloads}, std::pair{"queued", &c.queued}}) {
    if (!value.contains(key)) continue;
    if (!value[key].is_number_integer()) return wrong(field + "." + key, "a whole number");
    *out = value[key].get<int64_t>();
  }
  SHOAL_RETURN_IF_ERROR(read_cpu_and_memory(value, field, &c.cpu_milli, &c.memory_bytes));
  return c;
}

Result<model::Labels> read_labels(const json& item, const std::string& field) {
  model::Labels out;
  if (!item.contains(field)) return out;
  const json& value = item.at(field);
  if (!value.is_object()) return wrong(field, "an object of strings");
  for (const auto& [key, text] : value.items()) {
    if (!text.is_string()) return wrong(field + "." + key, "a string");
    out[key] = text.get<std::string>();
  }
  return out;
}

}  // namespace

json resources_to_json(const model::Resources& r) {
  return {{"cpu", model::format_cpu(r.cpu_milli)},
          {"memory", model::format_memory(r.memory_bytes)},
          {"gpu", r.gpu}};
}

json candidate_to_json(const model::ClusterCandidate& c, const std::string& namespace_name) {
  json namespaces = json::object();
  for (const auto& [ns, counts] : c.namespace_counts) namespaces[ns] = counts_json(counts);
  json queues = json::object();
  for (const auto& [queue, workloads] : c.queue_counts) queues[queue] = workloads;
  auto in_namespace = c.namespace_counts.find(namespace_name);
  json out = {{"cluster", c.name},
              {"labels", c.labels},
              {"claims", c.claims},
              {"allocatable", resources_to_json(c.allocatable)},
              {"free", resources_to_json(c.free)},
              {"largestFreeNode", resources_to_json(c.largest_free_node)},
              {"counts",
               {{"namespace", counts_json(in_namespace == c.namespace_counts.end() ? model::UsageCounts{}
                                                                                     : in_namespace->second)},
                {"cluster", counts_json(c.cluster_counts)},
                {"namespaces", namespaces},
                {"queues", queues}}},
              {"sourceWorkloads", c.source_workloads}};
  out["namespaces"] = c.namespaces ? json(*c.namespaces) : json(nullptr);
  return out;
}

Result<model::ClusterCandidate> candidate_from_json(const json& item) {
  model::ClusterCandidate c;
  if (!item.is_object()) return wrong("(item)", "an object");
  if (!item.contains("cluster") || !item["cluster"].is_string()) return wrong("cluster", "a cluster name");
  c.name = item["cluster"].get<std::string>();
  SHOAL_ASSIGN_OR_RETURN(c.labels, read_labels(item, "labels"));
  SHOAL_ASSIGN_OR_RETURN(c.claims, read_labels(item, "claims"));
  SHOAL_ASSIGN_OR_RETURN(c.allocatable, read_resources(item, "allocatable"));
  SHOAL_ASSIGN_OR_RETURN(c.free, read_resources(item, "free"));
  SHOAL_ASSIGN_OR_RETURN(c.largest_free_node, read_resources(item, "largestFreeNode"));
  if (item.contains("namespaces") && !item["namespaces"].is_null()) {
    if (!item["namespaces"].is_array()) return wrong("namespaces", "a list of namespaces or null");
    std::vector<std::string> namespaces;
    for (const auto& ns : item["namespaces"]) {
      if (!ns.is_string()) return wrong("namespaces", "a list of namespaces");
      namespaces.push_back(ns.get<std::string>());
    }
    c.namespaces = std::move(namespaces);
  }
  if (item.contains("counts")) {
    const json& counts = item["counts"];
    if (!counts.is_object()) return wrong("counts", "an object");
    if (counts.contains("cluster")) {
      SHOAL_ASSIGN_OR_RETURN(c.cluster_counts, read_counts(counts["cluster"], "counts.cluster"));
    }
    if (counts.contains("namespaces")) {
      if (!counts["namespaces"].is_object()) return wrong("counts.namespaces", "an object");
      for (const auto& [ns, value] : counts["namespaces"].items()) {
        SHOAL_ASSIGN_OR_RETURN(c.namespace_counts[ns], read_counts(value, "counts.namespaces." + ns));
      }
    }
    if (counts.contains("queues")) {
      if (!counts["queues"].is_object()) return wrong("counts.queues", "an object");
      for (const auto& [queue, value] : counts["queues"].items()) {
        if (!value.is_number_integer()) return wrong("counts.queues." + queue, "a whole number");
        c.queue_counts[queue] = value.get<int64_t>();
      }
    }
  }
  if (item.contains("sourceWorkloads")) {
    if (!item["sourceWorkloads"].is_number_integer()) return wrong("sourceWorkloads", "a whole number");
    c.source_workloads = item["sourceWorkloads"].get<int64_t>();
  }
  return c;
}

}  // namespace shoal::control
