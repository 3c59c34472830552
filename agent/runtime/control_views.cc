#include "agent/runtime/control_views.h"

#include <map>

#include "agent/control/inventory_json.h"
#include "common/text.h"
#include "model/manifest.h"

namespace shoal::runtime {

using nlohmann::json;

namespace {


std::string optional_time(int64_t ms) { return ms ? format_time(from_millis(ms)) : ""; }

json limits_json(const crypto::InvitationLimits& limits) {
  json out = json::object();
  if (limits.cpu_milli) out["cpu"] = model::format_cpu(*limits.cpu_milli);
  if (limits.memory_bytes) out["memory"] = model::format_memory(*limits.memory_bytes);
  if (limits.gpu) out["gpu"] = *limits.gpu;
  if (limits.workloads) out["workloads"] = *limits.workloads;
  if (limits.preemptible) out["preemptible"] = true;
  if (limits.max_priority) out["maxPriority"] = *limits.max_priority;
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

}  // namespace

json error_response(const Status& status) {
  return {{"ok", false}, {"code", error_code_name(status.code())}, {"error", status.message()}};
}

json peers_json(const core::Operations& agent) {
  json items = json::array();
  for (const auto& peer : agent.peers()) {
    json capacity = json::object();
    for (const auto& ns : peer.capacity) {
      capacity[ns.namespace_name] = {{"free", control::resources_to_json(ns.free)},
                                     {"largestFreeNode", control::resources_to_json(ns.largest_free_node)}};
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

json reservations_json(const core::Operations& agent) {
  std::map<std::string, std::string> cluster_of = {{agent.self_id(), "(local)"}};
  for (const auto& peer : agent.peers()) cluster_of[peer.id] = peer.cluster;
  json items = json::array();
  for (const auto& r : agent.reservations()) {
    items.push_back({{"source", r.source},
                     {"sourceCluster", cluster_of.count(r.source) ? cluster_of[r.source] : r.source.substr(0, 8)},
                     {"uid", r.uid},
                     {"namespace", r.spec.namespace_name},
                     {"name", r.spec.name},
                     {"priority", r.spec.priority},  // as granted here (an invitation's ceiling)
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
                     {"capacity", control::resources_to_json(node.capacity)},
                     {"allocated", control::resources_to_json(node.allocated)},
                     {"peakAllocated", control::resources_to_json(node.peak_allocated)},
                     {"takenByOthers", control::resources_to_json(node.taken_by_others)},
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
        {"warnings", context.cluster.warnings()},
        // Work of others waiting in the backend's own queue (Slurm's
        // pending jobs): counted in every queue of the CAPACITY advertised.
        {"backlog", context.cluster.backlog()}}},
      {"candidatesRejected", rejected},
      // Approved offers that stopped running work here, and the workloads stopped.
      {"preemptions", {{"offersCarriedOut", stats.preemptions}, {"workloadsStopped", stats.preempted_victims}}},
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

json peer_forgotten_json(const core::PeerForgotten& forgotten) {
  return json{{"ok", true},
              {"id", forgotten.id},
              {"cluster", forgotten.cluster},
              {"invitationsRevoked", forgotten.invitations_revoked},
              {"hostedStopped", forgotten.hosted_stopped},
              {"copiesLost", forgotten.copies_lost},
              {"placedAgainAt", format_time(forgotten.placed_again_at)}};
}

json quotas_json(const core::Operations& agent) {
  json items = json::array();
  for (const core::QuotaView& view : agent.quotas()) {
    json used = {{"cpu", model::format_cpu(view.held.resources.cpu_milli)},
                 {"memory", model::format_memory(view.held.resources.memory_bytes)},
                 {"gpu", std::to_string(view.held.resources.gpu)},
                 {"workloads", std::to_string(view.held.workloads)}};
    items.push_back({{"namespace", view.quota.namespace_name},
                     {"hard", model::to_json(view.quota)["hard"]},
                     {"used", used},
                     {"waiting", view.waiting}});
  }
  return {{"ok", true}, {"items", items}};
}

json invitations_json(const core::Operations& agent) {
  json items = json::array();
  for (const auto& view : agent.invitations()) items.push_back(invitation_json(view));
  return {{"ok", true}, {"items", items}};
}

Result<json> describe_peer_json(core::Operations& agent, const std::string& name) {
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

Result<json> describe_workload_json(core::Operations& agent, const std::string& namespace_name,
                                    const std::string& name) {
  auto record = agent.find_workload(namespace_name, name);
  if (!record) return not_found("workload " + namespace_name + "/" + name + " not found");
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

}  // namespace shoal::runtime
