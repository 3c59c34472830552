#include "agent/runtime/control_handlers.h"

#include <optional>

#include "agent/control/commands.h"
#include "agent/control/inventory_json.h"
#include "agent/runtime/metrics.h"
#include "common/text.h"
#include "model/manifest.h"

namespace shoal::runtime {
namespace {

using nlohmann::json;
using namespace control;

// Each limit parsed under the name of the request field it came from.
Result<core::InvitationOptions> invitation_options(const InviteCreateRequest& request) {
  core::InvitationOptions options;
  options.namespaces = request.namespaces;
  if (!request.cpu.empty()) {
    SHOAL_ASSIGN_OR_RETURN(options.limits.cpu_milli, model::parse_cpu_milli(request.cpu, "cpu"));
  }
  if (!request.memory.empty()) {
    SHOAL_ASSIGN_OR_RETURN(options.limits.memory_bytes,
                           model::parse_memory_bytes(request.memory, "memory"));
  }
  if (!request.gpu.empty()) {
    SHOAL_ASSIGN_OR_RETURN(options.limits.gpu, model::parse_count(request.gpu, "gpu"));
  }
  if (!request.workloads.empty()) {
    SHOAL_ASSIGN_OR_RETURN(options.limits.workloads, model::parse_count(request.workloads, "workloads"));
  }
  options.limits.preemptible = request.preemptible;
  if (!request.max_priority.empty()) {
    int64_t ceiling = 0;
    size_t used = 0;
    try {
      ceiling = std::stoll(request.max_priority, &used);
    } catch (...) {
      used = 0;
    }
    if (used == 0 || used != request.max_priority.size() || ceiling < -model::kMaxPriority ||
        ceiling > model::kMaxPriority) {
      return invalid_argument("maxPriority: expected an integer in -1000000..1000000, got \"" +
                              request.max_priority + "\"");
    }
    options.limits.max_priority = static_cast<int32_t>(ceiling);
  }
  if (request.expires == "never") {
    options.never_expires = true;
  } else if (!request.expires.empty()) {
    SHOAL_ASSIGN_OR_RETURN(options.lifetime, parse_duration(request.expires, "expires"));
  }
  if (!request.not_before.empty()) {
    SHOAL_ASSIGN_OR_RETURN(options.not_before, parse_time(request.not_before, "notBefore"));
  }
  return options;
}

// A workload patch, as a merge patch of its manifest: {"spec": {"priority":
// N}}. Everything else was fixed at submit (where the work may already be
// bound or running), and is refused naming the field.
Result<int32_t> priority_from_patch(const json& patch) {
  if (!patch.is_object()) return invalid_argument("patch: expected an object like {\"spec\": {\"priority\": 10}}");
  std::optional<int32_t> priority;
  for (const auto& [key, value] : patch.items()) {
    if (key != "spec") {
      return invalid_argument("patch: " + key + " cannot change after submit (only spec.priority can)");
    }
    if (!value.is_object()) return invalid_argument("patch: spec: expected an object");
    for (const auto& [field, given] : value.items()) {
      if (field != "priority") {
        return invalid_argument("patch: spec." + field + " cannot change after submit (only spec.priority can)");
      }
      if (!given.is_number_integer() || given.get<int64_t>() < -model::kMaxPriority ||
          given.get<int64_t>() > model::kMaxPriority) {
        return invalid_argument("patch: spec.priority: expected a whole number from " +
                                std::to_string(-model::kMaxPriority) + " to " +
                                std::to_string(model::kMaxPriority));
      }
      priority = static_cast<int32_t>(given.get<int64_t>());
    }
  }
  if (!priority) return invalid_argument("patch: expected spec.priority, the one field that can change");
  return *priority;
}

Result<json> submit(core::Operations& agent, const SubmitRequest& request) {
  if (request.manifest.empty() == request.workloads.is_null()) {
    return invalid_argument(
        "control request: expected one of \"manifest\" (YAML) or \"workloads\" (a list of "
        "Workload documents)");
  }
  auto too_many = [](const char* field, size_t count) {
    return invalid_argument(std::string("control request field \"") + field + "\": expected at most " +
                            std::to_string(kMaxWorkloadsPerSubmit) + " workloads per request, got " +
                            std::to_string(count) + " (shoalctl submit sends a larger file in parts)");
  };
  std::vector<model::WorkloadSpec> specs;
  if (!request.workloads.is_null()) {
    // Counted before any document is checked.
    if (request.workloads.size() > kMaxWorkloadsPerSubmit) return too_many("workloads", request.workloads.size());
    SHOAL_ASSIGN_OR_RETURN(specs, model::parse_workload_list(request.workloads));
  } else {
    if (request.manifest.size() > kMaxSubmitBytes) {
      return invalid_argument("control request field \"manifest\": expected at most " +
                              std::to_string(kMaxSubmitBytes >> 10) + " KiB per request, got " +
                              std::to_string(request.manifest.size()) +
                              " bytes (shoalctl submit sends a larger file in parts)");
    }
    SHOAL_ASSIGN_OR_RETURN(specs, model::parse_workloads(request.manifest));
    if (specs.size() > kMaxWorkloadsPerSubmit) return too_many("manifest", specs.size());
  }
  SHOAL_ASSIGN_OR_RETURN(auto uids, agent.submit(specs));
  json items = json::array();
  for (size_t i = 0; i < specs.size(); ++i) {
    items.push_back({{"namespace", specs[i].namespace_name}, {"name", specs[i].name}, {"uid", uids[i]}});
  }
  return json{{"ok", true}, {"items", items}};
}

// A read filter's name: empty (everything), or one that can exist. A name
// that cannot is refused, not answered with an empty list.
Status valid_filter(const std::string& name, const char* field) {
  if (name.empty()) return Status::ok();
  return validate_name(name, std::string("control request field \"") + field + "\"");
}

// A page at a time, so that listing 100,000 workloads never holds the loop
// (peers, timers, other requests) for longer than a page takes.
json workloads_page(core::Operations& agent, const GetWorkloadsRequest& request) {
  core::WorkloadPage page =
      agent.workloads_page(request.namespace_name, request.after, static_cast<size_t>(request.limit));
  json items = json::array();
  for (const auto& record : page.items) items.push_back(workload_to_json(record));
  json out = json::object();  // not from an initializer list, which copies every item
  out["ok"] = true;
  out["items"] = std::move(items);
  if (!page.next.empty()) out["continue"] = page.next;
  return out;
}

json live_clusters(core::Operations& agent, const GetClustersRequest& request) {
  json items = json::array();
  for (const core::LiveCluster& live : agent.live_inventory(request.namespace_name, request.queue)) {
    json item = candidate_to_json(live.candidate, request.namespace_name);
    item["peerId"] = live.peer_id;
    item["org"] = live.org;
    item["state"] = live.state;
    item["unavailable"] = live.unavailable;
    items.push_back(std::move(item));
  }
  return json{{"ok", true}, {"namespace", request.namespace_name}, {"queue", request.queue}, {"items", items}};
}

Result<json> set_quota(core::Operations& agent, const QuotaSetRequest& request) {
  SHOAL_ASSIGN_OR_RETURN(model::QuotaSpec quota,
                         model::quota_from_text(request.namespace_name, request.cpu, request.memory,
                                                request.gpu, request.workloads));
  SHOAL_RETURN_IF_ERROR(agent.set_quota(quota));
  return json{{"ok", true}};
}

// The loop copies the database once no batch is open (kPendingBackup).
Result<json> backup(const BackupRequest& request) {
  if (request.path.empty() || request.path[0] != '/') {
    return invalid_argument("control request field \"path\": expected an absolute path, got " +
                            quoted_text(request.path));
  }
  return json{{"ok", true}, {kPendingBackup, request.path}};
}

// Our own workload unless `from` names a source: then (or when we have no
// such workload) the operator stops a copy this cluster runs for a peer.
Result<json> delete_workload(core::Operations& agent, const DeleteWorkloadRequest& request) {
  if (request.force) {
    if (!request.from.empty()) {
      return invalid_argument("force: only for a workload submitted here, not with from");
    }
    SHOAL_RETURN_IF_ERROR(agent.force_delete_workload(request.namespace_name, request.name));
    return json{{"ok", true}, {"hosted", false}, {"forced", true}};
  }
  if (request.from.empty() && agent.find_workload(request.namespace_name, request.name)) {
    SHOAL_RETURN_IF_ERROR(agent.delete_workload(request.namespace_name, request.name));
    return json{{"ok", true}, {"hosted", false}};
  }
  SHOAL_RETURN_IF_ERROR(agent.stop_hosted(request.namespace_name, request.name, request.from));
  return json{{"ok", true}, {"hosted", true}};
}

Result<json> read_logs(core::Operations& agent, const LogsRequest& request) {
  const int replica = static_cast<int>(request.replica);
  const size_t limit = static_cast<size_t>(request.limit);
  auto record = agent.find_workload(request.namespace_name, request.name);
  if (!record) {
    return log_reply(agent.read_hosted_log(request.namespace_name, request.name, replica,
                                           request.offset, limit));
  }
  // A group's copies are records of their own: `copy` picks one, and
  // without it the first.
  std::optional<store::WorkloadRecord> target = record;
  std::vector<store::WorkloadRecord> copies = agent.copies_of(record->uid);
  if (request.copy > 0 || !copies.empty()) {
    target.reset();
    for (auto& one : copies) {
      if (one.copy_index == std::max<int64_t>(request.copy, 1)) target = std::move(one);
    }
    if (!target) {
      return not_found("copy " + std::to_string(request.copy) + ": " + request.namespace_name + "/" +
                       request.name + " has no such copy");
    }
  }
  SHOAL_ASSIGN_OR_RETURN(core::Operations::LogRead read,
                         agent.read_log(*target, replica, request.offset, limit));
  // At a peer: the loop answers once its LOG_CHUNK arrives (log_reply).
  if (read.pending) return json{{"ok", true}, {kPendingPeerLog, read.pending}};
  return log_reply(read.chunk);
}

// Decodes the request as `Request` and hands it to `handler`.
template <class Request, class Handler>
Result<json> with(const json& body, Handler&& handler) {
  SHOAL_ASSIGN_OR_RETURN(Request request, decode<Request>(body));
  return handler(request);
}

Result<json> dispatch(const ControlContext& context, const json& body) {
  core::Operations& agent = context.agent;
  if (!body.is_object()) return invalid_argument("control request: expected a JSON object");
  auto name = body.find("command");
  if (name == body.end() || !name->is_string()) {
    return invalid_argument("control request field \"command\": expected a string naming a command");
  }
  std::optional<Command> command = command_named(name->get_ref<const std::string&>());
  if (!command) {
    return invalid_argument("control request field \"command\": unknown command " +
                            quoted_text(name->get_ref<const std::string&>()));
  }
  const json ok = {{"ok", true}};
  switch (*command) {
    case Command::kIdentity:
      return json{{"ok", true}, {"card", agent.id_card()}};
    case Command::kInviteCreate:
      return with<InviteCreateRequest>(body, [&](const InviteCreateRequest& request) -> Result<json> {
        SHOAL_ASSIGN_OR_RETURN(core::InvitationOptions options, invitation_options(request));
        SHOAL_ASSIGN_OR_RETURN(std::string token, agent.create_invitation(request.to, options));
        return json{{"ok", true}, {"token", token}};
      });
    case Command::kInviteAccept:
      return with<InviteAcceptRequest>(body, [&](const InviteAcceptRequest& request) -> Result<json> {
        SHOAL_ASSIGN_OR_RETURN(std::string cluster, agent.accept_invitation(request.token));
        return json{{"ok", true}, {"cluster", cluster}};
      });
    case Command::kInviteList:
      return invitations_json(agent);
    case Command::kInviteRevoke:
      return with<InviteRevokeRequest>(body, [&](const InviteRevokeRequest& request) -> Result<json> {
        SHOAL_RETURN_IF_ERROR(agent.revoke_invitation(request.id, request.evict));
        return ok;
      });
    case Command::kDescribePeer:
      return with<DescribePeerRequest>(
          body, [&](const DescribePeerRequest& request) { return describe_peer_json(agent, request.name); });
    case Command::kPeers:
      return peers_json(agent);
    case Command::kSubmit:
      return with<SubmitRequest>(body, [&](const SubmitRequest& request) { return submit(agent, request); });
    case Command::kGetWorkloads:
      return with<GetWorkloadsRequest>(body, [&](const GetWorkloadsRequest& request) -> Result<json> {
        SHOAL_RETURN_IF_ERROR(valid_filter(request.namespace_name, "namespace"));
        return workloads_page(agent, request);
      });
    case Command::kGetReservations:
      return reservations_json(agent);
    case Command::kGetClusters:
      return with<GetClustersRequest>(body, [&](const GetClustersRequest& request) -> Result<json> {
        SHOAL_RETURN_IF_ERROR(valid_filter(request.namespace_name, "namespace"));
        SHOAL_RETURN_IF_ERROR(valid_filter(request.queue, "queue"));
        return live_clusters(agent, request);
      });
    case Command::kNominate:
      return with<NominateRequest>(body, [&](const NominateRequest& request) -> Result<json> {
        SHOAL_RETURN_IF_ERROR(agent.nominate(request.namespace_name, request.name, request.clusters));
        return ok;
      });
    case Command::kPatchWorkload:
      return with<PatchWorkloadRequest>(body, [&](const PatchWorkloadRequest& request) -> Result<json> {
        SHOAL_ASSIGN_OR_RETURN(int32_t priority, priority_from_patch(request.patch));
        SHOAL_RETURN_IF_ERROR(agent.set_priority(request.namespace_name, request.name, priority));
        return json{{"ok", true}, {"priority", priority}};
      });
    case Command::kDeleteWorkload:
      return with<DeleteWorkloadRequest>(
          body, [&](const DeleteWorkloadRequest& request) { return delete_workload(agent, request); });
    case Command::kLogs:
      return with<LogsRequest>(body, [&](const LogsRequest& request) { return read_logs(agent, request); });
    case Command::kDescribeWorkload:
      return with<DescribeWorkloadRequest>(body, [&](const DescribeWorkloadRequest& request) {
        return describe_workload_json(agent, request.namespace_name, request.name);
      });
    case Command::kStatus:
      return status_json(context);
    case Command::kWatchWorkloads:
      return with<WatchWorkloadsRequest>(body, [&](const WatchWorkloadsRequest& request) -> Result<json> {
        SHOAL_RETURN_IF_ERROR(valid_filter(request.namespace_name, "namespace"));
        return json{{"ok", true}, {kStartWatch, request.namespace_name}};
      });
    case Command::kBackup:
      return with<BackupRequest>(body, backup);
    case Command::kMetrics:
      return json{{"ok", true}, {"text", render_metrics(context)}};
    case Command::kRoutingMetrics:
      return with<RoutingMetricsRequest>(body, [&](const RoutingMetricsRequest& request) -> Result<json> {
        SHOAL_ASSIGN_OR_RETURN(json out, routing_metric(context, request.domain, request.metric));
        out["ok"] = true;
        return out;
      });
    case Command::kQuotaSet:
      return with<QuotaSetRequest>(
          body, [&](const QuotaSetRequest& request) { return set_quota(agent, request); });
    case Command::kQuotaDelete:
      return with<QuotaDeleteRequest>(body, [&](const QuotaDeleteRequest& request) -> Result<json> {
        SHOAL_RETURN_IF_ERROR(agent.delete_quota(request.namespace_name));
        return ok;
      });
    case Command::kGetQuotas:
      return quotas_json(agent);
    case Command::kPeerForget:
      return with<PeerForgetRequest>(body, [&](const PeerForgetRequest& request) -> Result<json> {
        SHOAL_ASSIGN_OR_RETURN(core::PeerForgotten forgotten, agent.forget_peer(request.name));
        return peer_forgotten_json(forgotten);
      });
  }
  return internal_error("control command " + quoted_text(info(*command).name) + " has no handler");
}

}  // namespace

json handle_control(const ControlContext& context, const json& request) {
  try {
    auto response = dispatch(context, request);
    if (!response.is_ok()) return error_response(response.status());
    return std::move(response).value();
  } catch (const json::exception& e) {
    // Every field is read through the typed requests; reaching here is a bug of ours.
    return error_response(internal_error(std::string("control request: ") + e.what()));
  }
}

}  // namespace shoal::runtime
