// Nodes, pods, their lists and watch events as the API server writes them
// (kube_api.h): pure decoders, fuzzed.
#include <algorithm>
#include <climits>

#include <nlohmann/json.hpp>

#include "agent/cluster/kubernetes/kube_api.h"
#include "model/quantity.h"

namespace shoal::cluster::kubernetes {

using json = nlohmann::json;

namespace {

Result<json> parse_json_object(std::string_view body, const char* what) {
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return invalid_argument(std::string(what) + ": expected a JSON object from the API server");
  }
  return parsed;
}

// The object at `name` of `object`; an empty one when absent.
Result<const json*> object_at(const json& object, const char* name, const std::string& where) {
  static const json kEmpty = json::object();
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return &kEmpty;
  if (!it->is_object()) return invalid_argument(where + "." + name + ": expected an object");
  return &*it;
}

Result<std::string> string_at(const json& object, const char* name, const std::string& where) {
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return std::string();
  if (!it->is_string()) return invalid_argument(where + "." + name + ": expected a string");
  return it->get<std::string>();
}

Result<std::map<std::string, std::string>> string_map_at(const json& object, const char* name,
                                                        const std::string& where) {
  SHOAL_ASSIGN_OR_RETURN(const json* map, object_at(object, name, where));
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : map->items()) {
    if (!value.is_string()) return invalid_argument(where + "." + name + "." + key + ": expected a string");
    out[key] = value.get<std::string>();
  }
  return out;
}

// cpu, memory and nvidia.com/gpu of a resource list ("allocatable",
// "requests"); anything else in it is not ours to count.
Result<model::Resources> resources_at(const json& object, const char* name, const std::string& where) {
  SHOAL_ASSIGN_OR_RETURN(auto quantities, string_map_at(object, name, where));
  model::Resources out;
  std::string prefix = where + "." + name + ".";
  if (auto it = quantities.find("cpu"); it != quantities.end()) {
    SHOAL_ASSIGN_OR_RETURN(out.cpu_milli, model::parse_cpu_milli(it->second, prefix + "cpu", model::Rounding::kUp));
  }
  if (auto it = quantities.find("memory"); it != quantities.end()) {
    SHOAL_ASSIGN_OR_RETURN(out.memory_bytes, model::parse_memory_bytes(it->second, prefix + "memory", model::Rounding::kUp));
  }
  if (auto it = quantities.find("nvidia.com/gpu"); it != quantities.end()) {
    SHOAL_ASSIGN_OR_RETURN(out.gpu, model::parse_count(it->second, prefix + "nvidia.com/gpu", model::Rounding::kUp));
  }
  return out;
}

Result<const json*> array_at(const json& object, const char* name, const std::string& where) {
  static const json kEmpty = json::array();
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return &kEmpty;
  if (!it->is_array()) return invalid_argument(where + "." + name + ": expected a list");
  return &*it;
}

Result<KubeNode> node_from(const json& object, const std::string& where) {
  if (!object.is_object()) return invalid_argument(where + ": expected a Node object");
  KubeNode node;
  SHOAL_ASSIGN_OR_RETURN(const json* metadata, object_at(object, "metadata", where));
  SHOAL_ASSIGN_OR_RETURN(node.name, string_at(*metadata, "name", where + ".metadata"));
  if (node.name.empty()) return invalid_argument(where + ".metadata.name: expected a node's name");
  SHOAL_ASSIGN_OR_RETURN(node.labels, string_map_at(*metadata, "labels", where + ".metadata"));
  SHOAL_ASSIGN_OR_RETURN(const json* spec, object_at(object, "spec", where));
  if (auto it = spec->find("unschedulable"); it != spec->end() && !it->is_null()) {
    if (!it->is_boolean()) return invalid_argument(where + ".spec.unschedulable: expected true or false");
    node.unschedulable = it->get<bool>();
  }
  SHOAL_ASSIGN_OR_RETURN(const json* taints, array_at(*spec, "taints", where + ".spec"));
  for (const json& taint : *taints) {
    if (!taint.is_object()) return invalid_argument(where + ".spec.taints[]: expected an object");
    KubeNode::Taint read;
    SHOAL_ASSIGN_OR_RETURN(read.effect, string_at(taint, "effect", where + ".spec.taints[]"));
    SHOAL_ASSIGN_OR_RETURN(read.key, string_at(taint, "key", where + ".spec.taints[]"));
    SHOAL_ASSIGN_OR_RETURN(read.value, string_at(taint, "value", where + ".spec.taints[]"));
    if (read.effect == "NoSchedule" || read.effect == "NoExecute") node.taints.push_back(std::move(read));
  }
  SHOAL_ASSIGN_OR_RETURN(const json* status, object_at(object, "status", where));
  SHOAL_ASSIGN_OR_RETURN(node.allocatable, resources_at(*status, "allocatable", where + ".status"));
  SHOAL_ASSIGN_OR_RETURN(auto allocatable, string_map_at(*status, "allocatable", where + ".status"));
  if (auto pods = allocatable.find("pods"); pods != allocatable.end()) {
    SHOAL_ASSIGN_OR_RETURN(node.allocatable_pods,
                           model::parse_count(pods->second, where + ".status.allocatable.pods"));
  }
  SHOAL_ASSIGN_OR_RETURN(const json* conditions, array_at(*status, "conditions", where + ".status"));
  for (const json& condition : *conditions) {
    if (!condition.is_object()) return invalid_argument(where + ".status.conditions[]: expected an object");
    SHOAL_ASSIGN_OR_RETURN(std::string type, string_at(condition, "type", where + ".status.conditions[]"));
    SHOAL_ASSIGN_OR_RETURN(std::string value, string_at(condition, "status", where + ".status.conditions[]"));
    if (type == "Ready") node.ready = value == "True";
  }
  return node;
}

Result<KubePod> pod_from(const json& object, const std::string& where) {
  if (!object.is_object()) return invalid_argument(where + ": expected a Pod object");
  KubePod pod;
  SHOAL_ASSIGN_OR_RETURN(const json* metadata, object_at(object, "metadata", where));
  SHOAL_ASSIGN_OR_RETURN(pod.name, string_at(*metadata, "name", where + ".metadata"));
  if (pod.name.empty()) return invalid_argument(where + ".metadata.name: expected a pod's name");
  SHOAL_ASSIGN_OR_RETURN(pod.namespace_name, string_at(*metadata, "namespace", where + ".metadata"));
  SHOAL_ASSIGN_OR_RETURN(pod.uid, string_at(*metadata, "uid", where + ".metadata"));
  SHOAL_ASSIGN_OR_RETURN(pod.labels, string_map_at(*metadata, "labels", where + ".metadata"));
  SHOAL_ASSIGN_OR_RETURN(std::string deletion, string_at(*metadata, "deletionTimestamp", where + ".metadata"));
  pod.deleting = !deletion.empty();
  // Only to tell when a pod of ours nobody holds may go, as finishedAt below.
  if (auto created = metadata->find("creationTimestamp"); created != metadata->end() && created->is_string()) {
    if (Result<TimePoint> at = parse_time(created->get<std::string>(), "creationTimestamp"); at.is_ok()) {
      pod.created_at = *at;
    }
  }
  SHOAL_ASSIGN_OR_RETURN(const json* spec, object_at(object, "spec", where));
  SHOAL_ASSIGN_OR_RETURN(pod.node_name, string_at(*spec, "nodeName", where + ".spec"));
  if (auto grace = spec->find("terminationGracePeriodSeconds");
      grace != spec->end() && grace->is_number_integer() && grace->get<int64_t>() >= 0) {
    pod.grace_seconds = grace->get<int64_t>();
  }
  // As the scheduler counts it (the pod's effective request): init
  // containers run one at a time before the others, each beside the
  // sidecars (restartPolicy: Always) started before it; the containers
  // then run beside every sidecar; the pod's overhead comes on top.
  SHOAL_ASSIGN_OR_RETURN(const json* containers, array_at(*spec, "containers", where + ".spec"));
  model::Resources running;
  for (const json& container : *containers) {
    if (!container.is_object()) return invalid_argument(where + ".spec.containers[]: expected an object");
    SHOAL_ASSIGN_OR_RETURN(const json* resources,
                           object_at(container, "resources", where + ".spec.containers[]"));
    SHOAL_ASSIGN_OR_RETURN(model::Resources requests,
                           resources_at(*resources, "requests", where + ".spec.containers[].resources"));
    running += requests;
  }
  SHOAL_ASSIGN_OR_RETURN(const json* inits, array_at(*spec, "initContainers", where + ".spec"));
  model::Resources sidecars;  // those started so far
  model::Resources starting;  // the most any init step needs
  for (const json& container : *inits) {
    if (!container.is_object()) return invalid_argument(where + ".spec.initContainers[]: expected an object");
    SHOAL_ASSIGN_OR_RETURN(const json* resources,
                           object_at(container, "resources", where + ".spec.initContainers[]"));
    SHOAL_ASSIGN_OR_RETURN(model::Resources requests,
                           resources_at(*resources, "requests", where + ".spec.initContainers[].resources"));
    SHOAL_ASSIGN_OR_RETURN(std::string restart, string_at(container, "restartPolicy", where + ".spec.initContainers[]"));
    model::Resources step = sidecars;
    step += requests;
    starting = model::Resources::max(starting, step);
    if (restart == "Always") sidecars += requests;
  }
  running += sidecars;
  pod.requests = model::Resources::max(running, starting);
  SHOAL_ASSIGN_OR_RETURN(model::Resources overhead, resources_at(*spec, "overhead", where + ".spec"));
  pod.requests += overhead;
  SHOAL_ASSIGN_OR_RETURN(const json* status, object_at(object, "status", where));
  SHOAL_ASSIGN_OR_RETURN(pod.phase, string_at(*status, "phase", where + ".status"));
  SHOAL_ASSIGN_OR_RETURN(pod.reason, string_at(*status, "reason", where + ".status"));
  SHOAL_ASSIGN_OR_RETURN(pod.message, string_at(*status, "message", where + ".status"));
  SHOAL_ASSIGN_OR_RETURN(const json* conditions, array_at(*status, "conditions", where + ".status"));
  for (const json& condition : *conditions) {
    if (!condition.is_object()) return invalid_argument(where + ".status.conditions[]: expected an object");
    SHOAL_ASSIGN_OR_RETURN(std::string type, string_at(condition, "type", where + ".status.conditions[]"));
    SHOAL_ASSIGN_OR_RETURN(std::string value, string_at(condition, "status", where + ".status.conditions[]"));
    if (type != "DisruptionTarget" || value != "True") continue;
    SHOAL_ASSIGN_OR_RETURN(pod.disruption, string_at(condition, "reason", where + ".status.conditions[]"));
    if (pod.disruption.empty()) pod.disruption = "DisruptionTarget";
  }
  SHOAL_ASSIGN_OR_RETURN(const json* statuses, array_at(*status, "containerStatuses", where + ".status"));
  for (const json& container : *statuses) {
    if (!container.is_object()) return invalid_argument(where + ".status.containerStatuses[]: expected an object");
    SHOAL_ASSIGN_OR_RETURN(const json* state, object_at(container, "state", where + ".status.containerStatuses[]"));
    SHOAL_ASSIGN_OR_RETURN(const json* waiting,
                           object_at(*state, "waiting", where + ".status.containerStatuses[].state"));
    if (!waiting->empty() && pod.waiting.empty()) {
      SHOAL_ASSIGN_OR_RETURN(pod.waiting,
                             string_at(*waiting, "reason", where + ".status.containerStatuses[].state.waiting"));
      SHOAL_ASSIGN_OR_RETURN(std::string message,
                             string_at(*waiting, "message", where + ".status.containerStatuses[].state.waiting"));
      if (!pod.waiting.empty() && !message.empty()) pod.waiting += ": " + message;
    }
    SHOAL_ASSIGN_OR_RETURN(const json* terminated,
                           object_at(*state, "terminated", where + ".status.containerStatuses[].state"));
    if (terminated->empty()) continue;
    auto code = terminated->find("exitCode");
    if (code == terminated->end() || !code->is_number_integer() || code->get<int64_t>() < INT32_MIN ||
        code->get<int64_t>() > INT32_MAX) {
      return invalid_argument(where + ".status.containerStatuses[].state.terminated.exitCode: expected a whole number");
    }
    pod.exit_code = static_cast<int32_t>(code->get<int64_t>());
    // Only to tell when a finished pod of ours nobody holds may go: a time
    // it cannot read is no reason to refuse the pod.
    if (auto finished = terminated->find("finishedAt"); finished != terminated->end() && finished->is_string()) {
      if (Result<TimePoint> at = parse_time(finished->get<std::string>(), "finishedAt"); at.is_ok()) pod.finished_at = *at;
    }
    SHOAL_ASSIGN_OR_RETURN(std::string reason,
                           string_at(*terminated, "reason", where + ".status.containerStatuses[].state.terminated"));
    // The pod's own reason (Evicted, NodeShutdown) says who ended it; the
    // container's (OOMKilled, Error) only when the pod gives none.
    if (pod.reason.empty()) pod.reason = reason;
    break;
  }
  return pod;
}

// What an object that could not be read says of itself.
Unreadable unreadable_of(const json& object, const Status& why) {
  Unreadable out;
  out.error = why.message();
  if (!object.is_object()) return out;
  auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return out;
  auto text = [&](const char* name) {
    auto it = metadata->find(name);
    return it != metadata->end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  out.namespace_name = text("namespace");
  out.name = text("name");
  return out;
}

template <typename T, typename From>
Result<KubeList<T>> list_from(std::string_view body, const char* what, From from) {
  SHOAL_ASSIGN_OR_RETURN(json answer, parse_json_object(body, what));
  KubeList<T> list;
  SHOAL_ASSIGN_OR_RETURN(const json* metadata, object_at(answer, "metadata", what));
  SHOAL_ASSIGN_OR_RETURN(list.resource_version,
                         string_at(*metadata, "resourceVersion", std::string(what) + ".metadata"));
  if (auto token = metadata->find("continue"); token != metadata->end() && !token->is_null()) {
    if (!token->is_string()) return invalid_argument(std::string(what) + ".metadata.continue: expected a string");
    list.continue_token = token->get<std::string>();
  }
  auto items = answer.find("items");
  if (items == answer.end() || !(items->is_array() || items->is_null())) {
    return invalid_argument(std::string(what) + ".items: expected a list");
  }
  if (items->is_null()) return list;
  list.items.reserve(items->size());
  for (size_t i = 0; i < items->size(); ++i) {
    Result<T> item = from((*items)[i], std::string(what) + ".items[" + std::to_string(i) + "]");
    if (item.is_ok()) {
      list.items.push_back(std::move(*item));
    } else {
      list.unreadable.push_back(unreadable_of((*items)[i], item.status()));
    }
  }
  return list;
}

template <typename From>
Result<KubeEvent> event_from(std::string_view line, const char* what, From from) {
  SHOAL_ASSIGN_OR_RETURN(json event, parse_json_object(line, what));
  SHOAL_ASSIGN_OR_RETURN(std::string type, string_at(event, "type", what));
  SHOAL_ASSIGN_OR_RETURN(const json* object, object_at(event, "object", what));
  KubeEvent out;
  std::string where = std::string(what) + ".object";
  if (type == "ERROR") {
    out.type = KubeEvent::Type::kError;
    if (auto code = object->find("code"); code != object->end() && code->is_number_integer()) {
      out.error_code = static_cast<int32_t>(std::clamp<int64_t>(code->get<int64_t>(), 0, 999));
    }
    SHOAL_ASSIGN_OR_RETURN(out.error, string_at(*object, "message", where));
    return out;
  }
  SHOAL_ASSIGN_OR_RETURN(const json* metadata, object_at(*object, "metadata", where));
  SHOAL_ASSIGN_OR_RETURN(out.resource_version, string_at(*metadata, "resourceVersion", where + ".metadata"));
  if (type == "BOOKMARK") {
    out.type = KubeEvent::Type::kBookmark;
    return out;
  }
  if (type == "ADDED") out.type = KubeEvent::Type::kAdded;
  else if (type == "MODIFIED") out.type = KubeEvent::Type::kModified;
  else if (type == "DELETED") out.type = KubeEvent::Type::kDeleted;
  else return invalid_argument(std::string(what) + ".type: expected ADDED, MODIFIED, DELETED, BOOKMARK or ERROR, got \"" + type + "\"");
  if (Status read = from(*object, where, out); !read.is_ok()) out.unreadable = unreadable_of(*object, read);
  return out;
}

}  // namespace

Result<KubeList<KubeNode>> parse_node_list(std::string_view body) {
  return list_from<KubeNode>(body, "NodeList", node_from);
}

Result<KubeList<KubePod>> parse_pod_list(std::string_view body) {
  return list_from<KubePod>(body, "PodList", pod_from);
}

Result<KubeEvent> parse_node_event(std::string_view line) {
  return event_from(line, "node watch event", [](const json& object, const std::string& where, KubeEvent& out) -> Status {
    SHOAL_ASSIGN_OR_RETURN(out.node, node_from(object, where));
    return Status::ok();
  });
}

Result<KubeEvent> parse_pod_event(std::string_view line) {
  return event_from(line, "pod watch event", [](const json& object, const std::string& where, KubeEvent& out) -> Status {
    SHOAL_ASSIGN_OR_RETURN(out.pod, pod_from(object, where));
    return Status::ok();
  });
}

std::string kube_status_message(std::string_view body) {
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object() && parsed.contains("kind") && parsed["kind"] == "Status" &&
      parsed.contains("message") && parsed["message"].is_string()) {
    return parsed["message"].get<std::string>();
  }
  std::string start(body.substr(0, 200));
  std::replace(start.begin(), start.end(), '\n', ' ');
  return start;
}

bool KubeNode::usable(const std::vector<model::Toleration>& tolerations) const {
  if (!ready || unschedulable) return false;
  return std::all_of(taints.begin(), taints.end(), [&](const Taint& taint) {
    return std::any_of(tolerations.begin(), tolerations.end(), [&](const model::Toleration& toleration) {
      return toleration.tolerates(taint.key, taint.value, taint.effect);
    });
  });
}

}  // namespace shoal::cluster::kubernetes
