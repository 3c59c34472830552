#include "agent/runtime/control.h"

#include <map>
#include <optional>

#include "agent/control/commands.h"
#include "agent/control/inventory_json.h"
#include "agent/runtime/metrics.h"
#include "common/text.h"
#include "model/manifest.h"

namespace shoal::runtime {
namespace {

// get-workloads pages: the default matches kubectl's --chunk-size; the
// largest keeps one answer (and the loop iteration that builds it) short.
constexpr int64_t kDefaultPageSize = 500;
constexpr int64_t kLargestPageSize = 5000;

using nlohmann::json;

// Typed access to a control request's fields. shoalctl always sends the
// right types, but the socket is an API: a wrong or missing field gets an
// error that names it, never the JSON library's text.
class Request {
 public:
  explicit Request(const json& body) : body_(body) {}

  Result<std::string> text(const char* key) const {
    if (!body_.contains(key)) return invalid_argument(field(key) + ": expected a string, and it is missing");
    return text_or(key, "");
  }
  Result<std::string> text_or(const char* key, std::string fallback) const {
    auto it = body_.find(key);
    if (it == body_.end() || it->is_null()) return fallback;
    if (!it->is_string()) return invalid_argument(field(key) + ": expected a string");
    return it->get<std::string>();
  }
  Result<std::vector<std::string>> texts(const char* key) const {
    auto it = body_.find(key);
    if (it == body_.end() || !it->is_array()) return invalid_argument(field(key) + ": expected a list of strings");
    std::vector<std::string> out;
    for (const auto& item : *it) {
      if (!item.is_string()) return invalid_argument(field(key) + ": expected a list of strings");
      out.push_back(item.get<std::string>());
    }
    return out;
  }
  // A whole number in [low, high]; `fallback` when absent.
  Result<int64_t> count_or(const char* key, int64_t fallback, int64_t low, int64_t high) const {
    auto it = body_.find(key);
    if (it == body_.end() || it->is_null()) return fallback;
    if (!it->is_number_integer() || it->get<int64_t>() < low || it->get<int64_t>() > high) {
      return invalid_argument(field(key) + ": expected a whole number from " +
                              std::to_string(low) + " to " + std::to_string(high));
    }
    return it->get<int64_t>();
  }
  Result<bool> flag(const char* key) const {
    auto it = body_.find(key);
    if (it == body_.end() || it->is_null()) return false;
    if (!it->is_boolean()) return invalid_argument(field(key) + ": expected true or false");
    return it->get<bool>();
  }

 private:
  static std::string field(const char* key) { return std::string("control request field \"") + key + "\""; }
  const json& body_;
};

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

json error_response(const Status& status) {
  return {{"ok", false}, {"code", error_code_name(status.code())}, {"error", status.message()}};
}

json resources_json(const model::Resources& r) {
  return {{"cpu", model::format_cpu(r.cpu_milli)},
          {"memory", model::format_memory(r.memory_bytes)},
          {"gpu", r.gpu}};
}

std::string optional_time(int64_t ms) { return ms ? format_time(from_millis(ms)) : ""; }

json peers_json(const core::Agent& agent) {
  json items = json::array();
  for (const auto& peer : agent.peers()) {
    json capacity = json::object();
    for (const auto& ns : peer.capacity) {
      capacity[ns.namespace_name] = {{"free", resources_json(ns.free)},
                                     {"largestFreeNode", resources_json(ns.largest_free_node)}};
    }
    items.push_back({{"id", peer.id},
                     {"cluster", peer.cluster},
                     {"org", peer.org},
                     {"endpoint", peer.endpoint},
                     {"state", core::peer_state_name(peer.state)},
                     {"reason", peer.reason},
                     {"lastSeen", peer.last_seen ? format_time(*peer.last_seen) : ""},
                     {"leaseUntil", peer.lease_until ? format_time(*peer.lease_until) : ""},
                     {"namespacesOffered", peer.namespaces_offered},
                     {"namespacesAccepted", peer.namespaces_accepted},
                     {"capacity", capacity},
                     {"workloads", peer.workloads_placed}});
  }
  return {{"ok", true}, {"items", items}};
}

json reservations_json(const core::Agent& agent) {
  std::map<std::string, std::string> cluster_of = {{agent.self_id(), "(local)"}};
  for (const auto& peer : agent.peers()) cluster_of[peer.id] = peer.cluster;
  json items = json::array();
  for (const auto& r : agent.reservations()) {
    items.push_back({{"source", r.source},
                     {"sourceCluster", cluster_of.count(r.source) ? cluster_of[r.source] : r.source.substr(0, 8)},
                     {"uid", r.uid},
                     {"namespace", r.spec.namespace_name},
                     {"name", r.spec.name},
                     {"epoch", r.epoch},
                     {"phase", store::kReservationPhaseNames[static_cast<int>(r.phase)]},
                     {"nodes", r.nodes},
                     {"expiresAt", r.phase == store::ReservationPhase::kReserved
                                       ? format_time(r.expires_at) : ""},
                     {"startedAt", optional_time(r.started_at_ms)},
                     {"finishedAt", optional_time(r.finished_at_ms)},
                     {"exitCode", r.exit_code},
                     {"message", r.message}});
  }
  return {{"ok", true}, {"items", items}};
}

json status_json(const ControlContext& context) {
  const core::AgentStats& stats = context.agent.stats();
  json dropped = json::object();
  for (size_t i = 0; i < protocol::kDropReasonCount; ++i) {
    dropped[std::string(protocol::kDropReasonNames[i])] = stats.dropped[i];
  }
  dropped["RateLimited"] = context.rate_limited;
  json nodes = json::array();
  for (const auto& node : context.cluster.nodes()) {
    nodes.push_back({{"name", node.name},
                     {"capacity", resources_json(node.capacity)},
                     {"allocated", resources_json(node.allocated)},
                     {"peakAllocated", resources_json(node.peak_allocated)},
                     {"takenByOthers", resources_json(node.taken_by_others)},
                     {"overCommitted", !node.capacity.fits(node.peak_allocated)}});
  }
  Status backend_health = context.cluster.health();
  json sent_by_type = json::object(), received_by_type = json::object();
  for (uint8_t type = 1; type <= protocol::kMaxMessageType; ++type) {
    std::string name(protocol::kMessageTypeNames[type]);
    if (stats.sent_by_type[type]) sent_by_type[name] = stats.sent_by_type[type];
    if (stats.received_by_type[type]) received_by_type[name] = stats.received_by_type[type];
  }
  json rejected = json::object();
  for (const auto& [reason, count] : stats.rejected) rejected[reason] = count;
  core::WorkloadCounts counts = context.agent.workload_counts();
  json by_phase = json::object();
  for (size_t phase = 0; phase < counts.by_phase.size(); ++phase) {
    if (counts.by_phase[phase])
      by_phase[std::string(model::kPhaseNames[phase])] = counts.by_phase[phase];
  }
  return {
      {"ok", true},
      {"cluster", context.cluster.spec().name},
      // Whether the cluster's manager (a slurm backend's slurmrestd)
      // answers; while it does not, candidates are refused BackendUnavailable.
      {"backend",
       {{"name", context.cluster.spec().backend},
        {"healthy", backend_health.is_ok()},
        {"error", backend_health.message()},
        // Work of others waiting in the backend's own queue (Slurm's
        // pending jobs): counted in every queue of the CAPACITY advertised.
        {"backlog", context.cluster.backlog()}}},
      {"candidatesRejected", rejected},
      {"id", context.agent.self_id()},
      {"messages",
       {{"received", stats.received},
        {"sent", stats.sent},
        // One signature each: a BATCH envelope carries many messages.
        {"envelopesReceived", stats.envelopes_received},
        {"envelopesSent", stats.envelopes_sent},
        {"sentByType", sent_by_type},
        {"receivedByType", received_by_type},
        {"dropped", dropped},
        {"undeliverable", context.transport_drops},
        {"handshakesRefused", context.handshakes_refused}}},
      {"nodes", nodes},
      {"watches", context.watches},
      {"workloads", {{"total", counts.total}, {"started", counts.started}, {"byPhase", by_phase},
                     {"awake", counts.awake}, {"parked", counts.parked}}},
      {"storage",
       {{"writable", context.storage_fault.empty()},
        {"error", context.storage_fault},
        // Each written batch is one synchronous WAL append (an fsync).
        {"commits", context.commits.written},
        {"emptyBatches", context.commits.empty},
        {"commitSeconds", context.commits.written_seconds}}}};
}

Result<core::InvitationOptions> invitation_options(const Request& request) {
  core::InvitationOptions options;
  SHOAL_ASSIGN_OR_RETURN(options.namespaces, request.texts("namespaces"));
  std::map<std::string, std::string> given;
  for (const char* key : {"cpu", "memory", "gpu", "workloads", "expires", "notBefore"}) {
    SHOAL_ASSIGN_OR_RETURN(given[key], request.text_or(key, ""));
  }
  auto text = [&](const char* key) { return given[key]; };
  if (!text("cpu").empty()) {
    SHOAL_ASSIGN_OR_RETURN(options.limits.cpu_milli, model::parse_cpu_milli(text("cpu"), "--cpu"));
  }
  if (!text("memory").empty()) {
    SHOAL_ASSIGN_OR_RETURN(options.limits.memory_bytes,
                           model::parse_memory_bytes(text("memory"), "--memory"));
  }
  if (!text("gpu").empty()) {
    SHOAL_ASSIGN_OR_RETURN(options.limits.gpu, model::parse_count(text("gpu"), "--gpu"));
  }
  if (!text("workloads").empty()) {
    SHOAL_ASSIGN_OR_RETURN(options.limits.workloads, model::parse_count(text("workloads"), "--workloads"));
  }
  if (text("expires") == "never") {
    options.never_expires = true;
  } else if (!text("expires").empty()) {
    SHOAL_ASSIGN_OR_RETURN(options.lifetime, parse_duration(text("expires"), "--expires"));
  }
  if (!text("notBefore").empty()) {
    SHOAL_ASSIGN_OR_RETURN(options.not_before, parse_time(text("notBefore"), "--not-before"));
  }
  return options;
}

json limits_json(const crypto::InvitationLimits& limits) {
  json out = json::object();
  if (limits.cpu_milli) out["cpu"] = model::format_cpu(*limits.cpu_milli);
  if (limits.memory_bytes) out["memory"] = model::format_memory(*limits.memory_bytes);
  if (limits.gpu) out["gpu"] = *limits.gpu;
  if (limits.workloads) out["workloads"] = *limits.workloads;
  return out;
}

json invitation_json(const core::InvitationView& view) {
  return {{"id", view.id},
          {"direction", view.direction},
          {"peer", view.peer},
          {"peerId", view.peer_id},
          {"namespaces", view.namespaces},
          {"state", core::invitation_state_name(view.state)},
          {"limits", limits_json(view.limits)},
          {"usage",
           {{"cpu", model::format_cpu(view.usage.resources.cpu_milli)},
            {"memory", model::format_memory(view.usage.resources.memory_bytes)},
            {"gpu", view.usage.resources.gpu},
            {"workloads", view.usage.workloads}}},
          {"notBefore", format_time(view.not_before)},
          {"expires", view.expires ? format_time(*view.expires) : "never"}};
}

json invitations_json(const core::Agent& agent) {
  json items = json::array();
  for (const auto& view : agent.invitations()) items.push_back(invitation_json(view));
  return {{"ok", true}, {"items", items}};
}

Result<json> describe_peer_json(core::Agent& agent, const std::string& name) {
  json peers = peers_json(agent)["items"];
  for (const auto& peer : peers) {
    if (peer["cluster"] != name && peer["id"] != name) continue;
    const std::string id = peer["id"];
    json out = peer;
    json invitations = json::array();
    for (const auto& view : agent.invitations()) {
      if (view.peer_id == id) invitations.push_back(invitation_json(view));
    }
    out["invitations"] = invitations;
    SHOAL_ASSIGN_OR_RETURN(auto events, agent.events("peer/" + id));
    json history = json::array();
    for (const auto& event : events) history.push_back({{"at", format_time(event.at)}, {"text", event.text}});
    out["events"] = history;
    out["ok"] = true;
    return out;
  }
  return not_found("peer " + name + ": no such peer (see `shoalctl peers`)");
}

Result<json> dispatch(const ControlContext& context, const json& body) {
  core::Agent& agent = context.agent;
  if (!body.is_object()) return invalid_argument("control request: expected a JSON object");
  Request request(body);
  SHOAL_ASSIGN_OR_RETURN(const std::string command, request.text("command"));
  if (command == "identity") return json{{"ok", true}, {"card", agent.id_card()}};
  if (command == "invite-create") {
    SHOAL_ASSIGN_OR_RETURN(core::InvitationOptions options, invitation_options(request));
    SHOAL_ASSIGN_OR_RETURN(std::string to, request.text("to"));
    SHOAL_ASSIGN_OR_RETURN(std::string token, agent.create_invitation(to, options));
    return json{{"ok", true}, {"token", token}};
  }
  if (command == "invite-list") return invitations_json(agent);
  if (command == "invite-revoke") {
    SHOAL_ASSIGN_OR_RETURN(std::string id, request.text("id"));
    SHOAL_ASSIGN_OR_RETURN(bool evict, request.flag("evict"));
    SHOAL_RETURN_IF_ERROR(agent.revoke_invitation(id, evict));
    return json{{"ok", true}};
  }
  if (command == "describe-peer") {
    SHOAL_ASSIGN_OR_RETURN(std::string name, request.text("name"));
    return describe_peer_json(agent, name);
  }
  if (command == "invite-accept") {
    SHOAL_ASSIGN_OR_RETURN(std::string token, request.text("token"));
    SHOAL_ASSIGN_OR_RETURN(std::string cluster, agent.accept_invitation(token));
    return json{{"ok", true}, {"cluster", cluster}};
  }
  if (command == "peers") return peers_json(agent);
  if (command == "submit") {
    SHOAL_ASSIGN_OR_RETURN(std::string manifest, request.text("manifest"));
    if (manifest.size() > control::kMaxSubmitBytes) {
      return invalid_argument("control request field \"manifest\": expected at most " +
                              std::to_string(control::kMaxSubmitBytes >> 10) + " KiB per request, got " +
                              std::to_string(manifest.size()) + " bytes (shoalctl submit sends a larger "
                              "file in parts)");
    }
    SHOAL_ASSIGN_OR_RETURN(auto specs, model::parse_workloads(manifest));
    if (specs.size() > control::kMaxWorkloadsPerSubmit) {
      return invalid_argument("control request field \"manifest\": expected at most " +
                              std::to_string(control::kMaxWorkloadsPerSubmit) + " workloads per request, got " +
                              std::to_string(specs.size()) + " (shoalctl submit sends a larger file in parts)");
    }
    SHOAL_ASSIGN_OR_RETURN(auto uids, agent.submit(specs));
    json items = json::array();
    for (size_t i = 0; i < specs.size(); ++i) {
      items.push_back({{"namespace", specs[i].namespace_name},
                       {"name", specs[i].name},
                       {"uid", uids[i]}});
    }
    return json{{"ok", true}, {"items", items}};
  }
  if (command == "get-workloads") {
    // A page at a time, so that listing 100,000 workloads never holds the
    // loop (peers, timers, other requests) for longer than a page takes.
    SHOAL_ASSIGN_OR_RETURN(std::string ns, request.text_or("namespace", ""));
    SHOAL_ASSIGN_OR_RETURN(std::string after, request.text_or("continue", ""));
    SHOAL_ASSIGN_OR_RETURN(int64_t limit,
                           request.count_or("limit", kDefaultPageSize, 1, kLargestPageSize));
    core::WorkloadPage page = agent.workloads_page(ns, after, static_cast<size_t>(limit));
    json items = json::array();
    for (const auto& record : page.items) items.push_back(workload_to_json(record));
    json out = json::object();  // not from an initializer list, which copies every item
    out["ok"] = true;
    out["items"] = std::move(items);
    if (!page.next.empty()) out["continue"] = page.next;
    return out;
  }
  if (command == "get-reservations") return reservations_json(agent);
  if (command == "get-clusters") {
    SHOAL_ASSIGN_OR_RETURN(std::string ns, request.text_or("namespace", "default"));
    SHOAL_ASSIGN_OR_RETURN(std::string queue, request.text_or("queue", "default"));
    json items = json::array();
    for (const core::LiveCluster& live : agent.live_inventory(ns, queue)) {
      json item = control::candidate_to_json(live.candidate, ns);
      item["peerId"] = live.peer_id;
      item["org"] = live.org;
      item["state"] = live.state;
      item["unavailable"] = live.unavailable;
      items.push_back(std::move(item));
    }
    return json{{"ok", true}, {"namespace", ns}, {"queue", queue}, {"items", items}};
  }
  if (command == "nominate") {
    SHOAL_ASSIGN_OR_RETURN(std::string ns, request.text("namespace"));
    SHOAL_ASSIGN_OR_RETURN(std::string name, request.text("name"));
    SHOAL_ASSIGN_OR_RETURN(std::vector<std::string> clusters, request.texts("clusters"));
    SHOAL_RETURN_IF_ERROR(agent.nominate(ns, name, clusters));
    return json{{"ok", true}};
  }
  if (command == "patch-workload") {
    SHOAL_ASSIGN_OR_RETURN(std::string ns, request.text("namespace"));
    SHOAL_ASSIGN_OR_RETURN(std::string name, request.text("name"));
    SHOAL_ASSIGN_OR_RETURN(int32_t priority, priority_from_patch(body.value("patch", json())));
    SHOAL_RETURN_IF_ERROR(agent.set_priority(ns, name, priority));
    return json{{"ok", true}, {"priority", priority}};
  }
  if (command == "delete-workload") {
    SHOAL_ASSIGN_OR_RETURN(std::string ns, request.text("namespace"));
    SHOAL_ASSIGN_OR_RETURN(std::string name, request.text("name"));
    SHOAL_ASSIGN_OR_RETURN(std::string from, request.text_or("from", ""));
    // Our own workload unless --from names a source: then (or when we have
    // no such workload) the operator stops a copy this cluster runs for a peer.
    if (from.empty() && agent.find_workload(ns, name)) {
      SHOAL_RETURN_IF_ERROR(agent.delete_workload(ns, name));
      return json{{"ok", true}, {"hosted", false}};
    }
    SHOAL_RETURN_IF_ERROR(agent.stop_hosted(ns, name, from));
    return json{{"ok", true}, {"hosted", true}};
  }
  if (command == "logs") {
    SHOAL_ASSIGN_OR_RETURN(std::string ns, request.text("namespace"));
    SHOAL_ASSIGN_OR_RETURN(std::string name, request.text("name"));
    SHOAL_ASSIGN_OR_RETURN(int64_t copy, request.count_or("copy", 0, 0, 1000));
    SHOAL_ASSIGN_OR_RETURN(int64_t replica, request.count_or("replica", 0, 0, 10000));
    SHOAL_ASSIGN_OR_RETURN(int64_t offset, request.count_or("offset", -(int64_t{1} << 40), -(int64_t{1} << 40),
                                                            int64_t{1} << 50));
    SHOAL_ASSIGN_OR_RETURN(int64_t limit, request.count_or("limit", 256 << 10, 1, 1 << 20));
    if (auto record = agent.find_workload(ns, name)) {
      // A group's copies are records of their own; --copy N picks one, and
      // without it the first.
      std::optional<store::WorkloadRecord> target = record;
      std::vector<store::WorkloadRecord> copies = agent.copies_of(record->uid);
      if (copy > 0 || !copies.empty()) {
        target.reset();
        for (auto& one : copies) {
          if (one.copy_index == std::max<int64_t>(copy, 1)) target = std::move(one);
        }
        if (!target) return not_found("--copy " + std::to_string(copy) + ": " + ns + "/" + name + " has no such copy");
      }
      SHOAL_ASSIGN_OR_RETURN(core::Agent::LogRead read,
                             agent.read_log(*target, static_cast<int>(replica), offset,
                                            static_cast<size_t>(limit)));
      // At a peer: the loop answers once its LOG_CHUNK arrives (log_reply).
      if (read.pending) return json{{"ok", true}, {kPendingPeerLog, read.pending}};
      return log_reply(read.chunk);
    }
    return log_reply(agent.read_hosted_log(ns, name, static_cast<int>(replica), offset,
                                           static_cast<size_t>(limit)));
  }
  if (command == "describe-workload") {
    SHOAL_ASSIGN_OR_RETURN(std::string ns, request.text("namespace"));
    SHOAL_ASSIGN_OR_RETURN(std::string name, request.text("name"));
    auto record = agent.find_workload(ns, name);
    if (!record) return not_found("workload " + ns + "/" + name + " not found");
    SHOAL_ASSIGN_OR_RETURN(auto events, agent.events(record->uid));
    json copies = json::array();
    for (const auto& copy : agent.copies_of(record->uid)) {
      json entry = workload_to_json(copy)["status"];
      entry["copy"] = copy.copy_index;
      copies.push_back(std::move(entry));
    }
    json history = json::array();
    for (const auto& event : events) {
      history.push_back({{"at", format_time(event.at)}, {"text", event.text}});
    }
    json out = workload_to_json(*record);
    if (!copies.empty()) out["status"]["copies"] = copies;
    out["events"] = history;
    out["ok"] = true;
    return out;
  }
  if (command == "status") return status_json(context);
  if (command == "watch-workloads") {
    SHOAL_ASSIGN_OR_RETURN(std::string ns, request.text_or("namespace", ""));
    return json{{"ok", true}, {kStartWatch, ns}};
  }
  if (command == "backup") {
    SHOAL_ASSIGN_OR_RETURN(std::string path, request.text("path"));
    if (path.empty() || path[0] != '/') {
      return invalid_argument("control request field \"path\": expected an absolute path, got " + quoted_text(path));
    }
    return json{{"ok", true}, {kPendingBackup, path}};
  }
  if (command == "metrics") return json{{"ok", true}, {"text", render_metrics(context)}};
  if (command == "routing-metrics") {
    SHOAL_ASSIGN_OR_RETURN(std::string domain, request.text("domain"));
    SHOAL_ASSIGN_OR_RETURN(std::string metric, request.text("metric"));
    SHOAL_ASSIGN_OR_RETURN(json out, routing_metric(context, domain, metric));
    out["ok"] = true;
    return out;
  }
  return invalid_argument("control request field \"command\": unknown command " + quoted_text(command));
}

}  // namespace

json workload_to_json(const store::WorkloadRecord& record) {
  json spec = model::to_json(record.spec);
  spec.erase("namespace");
  spec.erase("name");
  spec.erase("labels");
  return {{"metadata",
           {{"namespace", record.spec.namespace_name},
            {"name", record.spec.name},
            {"uid", record.uid},
            {"labels", record.spec.labels},
            {"creationTimestamp", format_time(record.created_at)}}},
          {"spec", spec},
          {"status",
           {{"phase", model::phase_name(record.phase)},
            {"cluster", record.cluster},
            {"nodes", record.nodes},
            {"epoch", record.epoch},
            {"reason", record.reason},
            {"startedAt", optional_time(record.started_at_ms)},
            {"finishedAt", optional_time(record.finished_at_ms)},
            {"exitCode", record.exit_code},
            {"restarts", record.restarts},
            {"disruptions", record.disruptions}}}};
}

json log_reply(const Result<cluster::LogChunk>& chunk) {
  if (!chunk.is_ok()) return error_response(chunk.status());
  return json{{"ok", true},
              {"data", chunk->data},
              {"offset", chunk->offset},
              {"nextOffset", chunk->next_offset},
              {"finished", chunk->finished},
              {"pending", chunk->pending}};
}

json handle_control(const ControlContext& context, const json& request) {
  try {
    auto response = dispatch(context, request);
    if (!response.is_ok()) return error_response(response.status());
    return std::move(response).value();
  } catch (const json::exception& e) {
    // Every field is read through Request; reaching here is a bug of ours.
    return error_response(internal_error(std::string("control request: ") + e.what()));
  }
}

}  // namespace shoal::runtime
