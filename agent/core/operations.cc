// What an operator asks of the agent (shoalctl, through the runtime's
// control handlers): invitations, submits and deletes, and the views of
// peers, workloads and reservations. Errors name the request's field
// (agent/control/commands.h), never a command-line flag.
#include <algorithm>

#include "agent/core/router.h"

namespace shoal::core {

std::string Router::id_card() const {
  const AgentConfig& config = context_.config();
  return crypto::IdCard{config.cluster, config.org, context_.identity().public_key(),
                        config.endpoint}
      .to_string();
}

Result<std::string> Router::create_invitation(std::string_view to_card,
                                              const InvitationOptions& options) {
  SHOAL_ASSIGN_OR_RETURN(crypto::IdCard card, crypto::parse_id_card(to_card));
  const AgentConfig& config_ = context_.config();
  const crypto::Identity& identity_ = context_.identity();
  if (card.public_key == identity_.public_key()) {
    return invalid_argument("to: that is this agent's own id card; invite another agent");
  }
  if (options.namespaces.empty()) {
    return invalid_argument("namespaces: expected at least one namespace");
  }
  for (const auto& ns : options.namespaces) {
    SHOAL_RETURN_IF_ERROR(model::validate_name(ns, "namespaces"));
  }
  const crypto::InvitationLimits& limits = options.limits;
  for (auto [value, field] : {std::pair{limits.cpu_milli, "cpu"}, {limits.memory_bytes, "memory"},
                             {limits.gpu, "gpu"}, {limits.workloads, "workloads"}}) {
    if (value && *value < 0) return invalid_argument(std::string(field) + ": expected a quantity >= 0");
  }
  TimePoint now = context_.now();
  crypto::Invitation invitation;
  invitation.id = context_.new_uid().substr(0, 16);
  invitation.issuer = {config_.cluster, config_.org, identity_.public_key(), config_.endpoint};
  invitation.subject = card.public_key;
  invitation.namespaces = options.namespaces;
  invitation.limits = limits;
  invitation.created = now;
  invitation.not_before = options.not_before.value_or(now);
  if (!options.never_expires) {
    Duration lifetime = options.lifetime.value_or(config_.invitation_lifetime);
    if (lifetime <= Duration::zero()) return invalid_argument("expires: expected a duration > 0 or never");
    invitation.expires = invitation.not_before + lifetime;
  }
  std::string token = crypto::issue_token(invitation, identity_, context_.signatures());
  std::string subject = crypto::key_to_text(card.public_key);
  store::InvitationRecord record{
      invitation.id, store::InvitationDirection::kIssued, subject, token, false, false};
  // Renewal: one invitation per source. The old one stops counting at once;
  // work admitted under it keeps running and counts against the new limits.
  // A failed write latches (store_health), so the batch is rolled back,
  // never committed with half of this request in it.
  auto added = invitations_.add({invitation, record}, context_.store());
  if (!added.is_ok()) context_.note_store(added.status());
  SHOAL_ASSIGN_OR_RETURN(std::vector<std::string> replaced, std::move(added));
  for (const auto& id : replaced) {
    context_.record_event("peer/" + subject, "invitation " + id + " replaced by " + invitation.id);
  }
  remember_peer(card);
  std::string list;
  for (const auto& ns : options.namespaces) list += (list.empty() ? "" : ",") + ns;
  context_.record_event("peer/" + subject, "issued invitation " + invitation.id + " to " +
                                               card.cluster + " for " + list);
  target_.note_capacity_changed();
  SHOAL_RETURN_IF_ERROR(end_control());
  return token;
}

Result<std::string> Router::accept_invitation(std::string_view token) {
  SHOAL_ASSIGN_OR_RETURN(crypto::Invitation invitation, crypto::open_token(token, context_.signatures()));
  const crypto::Identity& identity = context_.identity();
  SHOAL_RETURN_IF_ERROR(
      crypto::check_acceptable(invitation, identity.public_key(), context_.now()));
  if (invitation.issuer.public_key == identity.public_key()) {
    return invalid_argument("invitation token issuer: this agent issued it; it is for the source");
  }
  std::string peer_id = crypto::key_to_text(invitation.issuer.public_key);
  store::InvitationRecord record{invitation.id, store::InvitationDirection::kAccepted, peer_id,
                                 std::string(token), false, false};
  while (!record.token.empty() && (record.token.back() == '\n' || record.token.back() == ' ')) {
    record.token.pop_back();
  }
  if (const InvitationBook::Owned* existing = invitations_.find_accepted(invitation.id)) {
    if (existing->record.revoked) {
      return invalid_argument("invitation token: invitation " + invitation.id +
                              " was revoked by its issuer");
    }
    return existing->invitation.issuer.cluster;  // accepting twice changes nothing
  }
  std::string cluster = invitation.issuer.cluster;
  std::string id = invitation.id;
  remember_peer(invitation.issuer);
  auto added = invitations_.add({std::move(invitation), record}, context_.store());
  if (!added.is_ok()) context_.note_store(added.status());  // latched: see create_invitation
  SHOAL_ASSIGN_OR_RETURN(std::vector<std::string> replaced, std::move(added));
  for (const auto& old : replaced) {
    context_.record_event("peer/" + peer_id, "invitation " + old + " replaced by " + id);
  }
  context_.record_event("peer/" + peer_id, "accepted invitation " + id + " from " + cluster);
  const AgentConfig& config = context_.config();
  context_.send(peer_id, protocol::Hello{config.cluster, config.org, config.endpoint});
  SHOAL_RETURN_IF_ERROR(end_control());
  return cluster;
}

std::vector<InvitationView> Router::invitations() const {
  std::vector<InvitationView> out;
  TimePoint now = context_.now();
  auto add = [&](const InvitationBook::Owned& owned, bool issued) {
    InvitationView view;
    view.id = owned.record.id;
    view.direction = issued ? "issued" : "accepted";
    view.peer_id = owned.record.peer_id;
    view.peer = context_.cluster_name_of(owned.record.peer_id);
    view.namespaces = owned.invitation.namespaces;
    InvitationState state = InvitationBook::state(owned, now);
    view.state = state;
    view.limits = owned.invitation.limits;
    if (state == InvitationState::kActive || state == InvitationState::kRevoked ||
        state == InvitationState::kExpired) {
      // Replaced invitations hand their usage to the one that replaced them.
      view.usage =
          issued ? target_.usage_of_source(view.peer_id) : source_.book().usage_at(view.peer_id);
    }
    view.not_before = owned.invitation.not_before;
    view.expires = owned.invitation.expires;
    out.push_back(std::move(view));
  };
  for (const auto& [id, owned] : invitations_.issued()) add(owned, true);
  for (const auto& [id, owned] : invitations_.accepted()) add(owned, false);
  return out;
}

Status Router::revoke_invitation(const std::string& id, bool evict) {
  const InvitationBook::Owned* owned = invitations_.find_issued(id);
  if (!owned) {
    if (invitations_.find_accepted(id)) {
      return invalid_argument("invitation " + id +
                              " was issued by the other cluster; only its issuer can revoke it");
    }
    return not_found("invitation " + id + ": no such issued invitation (see `shoalctl invite list`)");
  }
  const std::string source = owned->record.peer_id;
  auto revoked = invitations_.revoke(store::InvitationDirection::kIssued, id, context_.store());
  if (!revoked.is_ok()) context_.note_store(revoked.status());  // latched: see create_invitation
  SHOAL_ASSIGN_OR_RETURN(bool newly_revoked, std::move(revoked));
  if (newly_revoked) {
    context_.record_event("peer/" + source,
                          "revoked invitation " + id + (evict ? " (evicting its work)" : ""));
  }
  if (!is_source(source)) {
    target_.withdraw_from_source(source, "invitation " + id + " revoked", evict);
  }
  context_.send(source, protocol::Revoke{id, evict});
  return end_control();
}

std::vector<std::string> Router::peer_ids() const {
  std::vector<std::string> out;
  out.reserve(peers_.all().size());
  for (const auto& [id, peer] : peers_.all()) {
    if (!PeerTable::is_forgotten(peer)) out.push_back(id);
  }
  return out;
}

bool Router::admits_connection(const std::string& peer_id) const {
  if (peers_.forgotten_at(peer_id)) return false;  // nothing of it is heard any more
  if (is_source(peer_id) || is_target(peer_id)) return true;
  // A source holding a token we revoked before it connected (perhaps before
  // it accepted) must get in, to hear the REVOKE that on_hello repeats;
  // until the token expires it could otherwise believe it Active forever.
  if (!invitations_.revocations_to_tell(peer_id, context_.now()).empty()) return true;
  // Work still in flight either way: its last statuses must get through.
  return target_.holds_work_of(peer_id) || source_.book().usage_at(peer_id).workloads > 0;
}

std::vector<PeerView> Router::peers() const {
  std::vector<PeerView> out;
  TimePoint now = context_.now();
  for (const auto& [id, peer] : peers_.all()) {
    if (PeerTable::is_forgotten(peer)) continue;
    PeerView view;
    view.id = id;
    view.cluster = peer.cluster;
    view.org = peer.org;
    view.endpoint = peer.endpoint;
    view.last_seen = peer.last_seen;
    if (peer.lease_ms > 0) view.lease_until = from_millis(peer.lease_until_ms);
    if (!is_source(id) && !is_target(id)) {
      // No valid invitation either way: the relationship is over (or not begun).
      std::string revoked, expired, pending;
      auto consider = [&](const std::vector<const InvitationBook::Owned*>& owned_list) {
        for (const InvitationBook::Owned* owned : owned_list) {
          InvitationState state = InvitationBook::state(*owned, now);
          if (state == InvitationState::kRevoked)
            revoked = owned->record.id;
          else if (state == InvitationState::kExpired)
            expired = owned->record.id;
          else if (state == InvitationState::kNotYetValid)
            pending = owned->record.id;
        }
      };
      consider(invitations_.issued_to(id));
      consider(invitations_.accepted_from(id));
      if (!revoked.empty()) {
        view.state = PeerState::kRevoked;
        view.reason = "invitation " + revoked + " revoked";
      } else if (!expired.empty()) {
        view.state = PeerState::kExpired;
        view.reason = "invitation " + expired + " expired";
      } else {
        view.state = PeerState::kConnecting;
        view.reason = pending.empty() ? "no invitation" : "invitation " + pending + " not valid yet";
      }
    } else if (!peer.last_seen) {
      view.state = PeerState::kConnecting;
      view.reason = "not heard from since this agent started";
    } else if (now - *peer.last_seen <= 3 * context_.config().heartbeat_interval) {
      // Active only when messages flow both ways: it also acknowledges
      // reading ours (of this boot), at least once a few heartbeats.
      bool hears_us = peer.read_progress_at != TimePoint{} &&
                      now - peer.read_progress_at <= 3 * context_.config().heartbeat_interval;
      view.state = hears_us ? PeerState::kActive : PeerState::kConnecting;
      if (!hears_us) view.reason = "we hear it, but it has not acknowledged our messages yet";
    } else {
      view.state = PeerState::kUnreachable;
      view.reason = "no message for " + format_duration(now - *peer.last_seen);
    }
    for (const auto* invitation : invitations_.valid_issued(id, now)) {
      for (const auto& ns : invitation->namespaces) view.namespaces_offered.push_back(ns);
    }
    for (const auto* invitation : invitations_.valid_accepted(id, now)) {
      for (const auto& ns : invitation->namespaces) view.namespaces_accepted.push_back(ns);
    }
    view.capacity = source_.targets().capacity_of(id);
    view.workloads_placed = static_cast<int>(source_.book().usage_at(id).workloads);
    out.push_back(std::move(view));
  }
  return out;
}

Result<std::vector<store::EventRecord>> Router::events(const std::string& subject) {
  return context_.store().load_events(subject);
}

std::vector<store::ReservationRecord> Router::reservations() const {
  return target_.reservations();
}

// ---- the roles' control requests --------------------------------------------

Result<std::vector<std::string>> Router::submit(const std::vector<model::WorkloadSpec>& specs) {
  auto uids = source_.submit(specs);
  Status ended = end_control();
  if (!uids.is_ok()) return uids;
  SHOAL_RETURN_IF_ERROR(ended);
  return uids;
}

Status Router::delete_workload(const std::string& namespace_name, const std::string& name) {
  SHOAL_RETURN_IF_ERROR(source_.delete_workload(namespace_name, name));
  return end_control();
}

Status Router::force_delete_workload(const std::string& namespace_name, const std::string& name) {
  SHOAL_RETURN_IF_ERROR(source_.force_delete(namespace_name, name));
  return end_control();
}

Status Router::set_priority(const std::string& namespace_name, const std::string& name,
                            int32_t priority) {
  SHOAL_RETURN_IF_ERROR(source_.set_priority(namespace_name, name, priority));
  return end_control();
}

Status Router::nominate(const std::string& namespace_name, const std::string& name,
                        const std::vector<std::string>& clusters) {
  SHOAL_RETURN_IF_ERROR(source_.nominate(namespace_name, name, clusters));
  return end_control();
}

Status Router::stop_hosted(const std::string& namespace_name, const std::string& name,
                           const std::string& from_cluster) {
  SHOAL_RETURN_IF_ERROR(target_.stop_hosted(namespace_name, name, from_cluster));
  return end_control();
}

Result<Operations::LogRead> Router::read_log(const store::WorkloadRecord& record, int replica,
                                             int64_t offset, size_t max_bytes) {
  if (record.winner.empty()) {
    return Status(ErrorCode::kUnavailable, record.spec.key() + " is not placed on any cluster now");
  }
  if (replica < 0 || replica >= record.spec.replicas) {
    return invalid_argument("replica: expected 0.." + std::to_string(record.spec.replicas - 1));
  }
  LogRead read;
  if (record.winner == context_.self_id()) {
    SHOAL_ASSIGN_OR_RETURN(read.chunk, context_.cluster().read_log(
                                           target::TargetRole::cluster_key(context_.self_id(), record.uid),
                                           replica, offset, max_bytes));
    return read;
  }
  protocol::LogRequest request;
  request.uid = record.uid;
  request.epoch = record.epoch;
  request.replica = replica;
  request.offset = offset;
  request.max_bytes = static_cast<uint32_t>(std::min<size_t>(max_bytes, protocol::kMaxLogChunkBytes));
  SHOAL_ASSIGN_OR_RETURN(read.pending, remote_logs_.start(record.winner, request));
  context_.send(record.winner, std::move(request));
  return read;
}

Result<cluster::LogChunk> Router::read_hosted_log(const std::string& namespace_name,
                                                  const std::string& name, int replica,
                                                  int64_t offset, size_t max_bytes) {
  std::string key = namespace_name + "/" + name;
  std::optional<std::pair<std::string, std::string>> copy;  // (source, uid)
  int replicas = 0;
  auto found = [&](const std::string& source, const std::string& uid, int count) -> Status {
    if (copy && *copy != std::pair{source, uid}) {
      return invalid_argument(key + ": several sources run work by that name here");
    }
    copy = {source, uid};
    replicas = count;
    return Status::ok();
  };
  for (const auto& record : reservations()) {
    if (record.source == context_.self_id() || record.spec.key() != key) continue;
    SHOAL_RETURN_IF_ERROR(found(record.source, record.uid, record.spec.replicas));
  }
  if (!copy) {
    // A finished copy its source has let go of: its run row still names it,
    // and the cluster may still keep its output (the newest such run).
    SHOAL_ASSIGN_OR_RETURN(std::vector<store::RunRecord> runs, context_.store().load_runs());
    const store::RunRecord* newest = nullptr;
    for (const auto& run : runs) {
      if (run.source == context_.self_id() || run.namespace_name != namespace_name ||
          run.name != name) {
        continue;
      }
      if (!newest || run.started_at_ms > newest->started_at_ms) newest = &run;
    }
    if (newest) {
      SHOAL_RETURN_IF_ERROR(
          found(newest->source, newest->uid, static_cast<int>(newest->nodes.size())));
    }
  }
  if (!copy) return not_found("workload " + key + " not found");
  if (replica < 0 || replica >= replicas) {
    return invalid_argument("replica: expected 0.." + std::to_string(replicas - 1));
  }
  return context_.cluster().read_log(target::TargetRole::cluster_key(copy->first, copy->second), replica,
                                     offset, max_bytes);
}

std::vector<store::WorkloadRecord> Router::workloads() const { return source_.book().workloads(); }

std::vector<store::WorkloadRecord> Router::copies_of(const std::string& uid) const {
  return source_.book().copies_of(uid);
}

std::optional<store::WorkloadRecord> Router::workload_by_uid(const std::string& uid) const {
  const source::SourceWorkload* workload = source_.book().find(uid);
  if (!workload) return std::nullopt;
  return workload->record;
}

std::optional<store::WorkloadRecord> Router::find_workload(const std::string& namespace_name,
                                                           const std::string& name) const {
  return source_.book().find_workload(namespace_name, name);
}

Status Router::set_quota(const model::QuotaSpec& quota) { return source_.set_quota(quota); }

Status Router::delete_quota(const std::string& namespace_name) {
  return source_.delete_quota(namespace_name);
}

std::vector<QuotaView> Router::quotas() const {
  std::vector<QuotaView> out;
  for (const auto& [name, quota] : source_.quotas()) {
    out.push_back({quota, source_.book().held_in(name), source_.waiting_for_quota(name)});
  }
  return out;
}

}  // namespace shoal::core
