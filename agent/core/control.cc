// The agent's control requests (from shoalctl, through the runtime):
// invitations, and read-only views of peers, workloads and reservations.
#include <algorithm>

#include "agent/core/agent.h"

namespace shoal::core {

std::string Agent::id_card() const {
  return crypto::IdCard{config_.cluster, config_.org, identity_.public_key(), config_.endpoint}
      .to_string();
}

Result<std::string> Agent::create_invitation(std::string_view to_card,
                                             const InvitationOptions& options) {
  SHOAL_ASSIGN_OR_RETURN(crypto::IdCard card, crypto::parse_id_card(to_card));
  if (card.public_key == identity_.public_key()) {
    return invalid_argument("--to: that is this agent's own id card; invite another agent");
  }
  if (options.namespaces.empty()) {
    return invalid_argument("--namespace: expected at least one namespace");
  }
  for (const auto& ns : options.namespaces) {
    SHOAL_RETURN_IF_ERROR(model::validate_name(ns, "--namespace"));
  }
  const crypto::InvitationLimits& limits = options.limits;
  for (auto [value, flag] : {std::pair{limits.cpu_milli, "--cpu"}, {limits.memory_bytes, "--memory"},
                             {limits.gpu, "--gpu"}, {limits.workloads, "--workloads"}}) {
    if (value && *value < 0) return invalid_argument(std::string(flag) + ": expected a quantity >= 0");
  }
  TimePoint now = clock_.now();
  crypto::Invitation invitation;
  invitation.id = new_uid().substr(0, 16);
  invitation.issuer = {config_.cluster, config_.org, identity_.public_key(), config_.endpoint};
  invitation.subject = card.public_key;
  invitation.namespaces = options.namespaces;
  invitation.limits = limits;
  invitation.created = now;
  invitation.not_before = options.not_before.value_or(now);
  if (!options.never_expires) {
    Duration lifetime = options.lifetime.value_or(config_.invitation_lifetime);
    if (lifetime <= Duration::zero()) return invalid_argument("--expires: expected a duration > 0 or never");
    invitation.expires = invitation.not_before + lifetime;
  }
  std::string token = crypto::issue_token(invitation, identity_);
  std::string subject = crypto::key_to_text(card.public_key);
  store::InvitationRecord record{invitation.id, store::InvitationDirection::kIssued, subject, token,
                                 false, false};
  SHOAL_RETURN_IF_ERROR(store_.put_invitation(record));
  // Renewal: one invitation per source. The old one stops counting at once;
  // work admitted under it keeps running and counts against the new limits.
  for (auto& [id, owned] : issued_) {
    if (owned.record.peer_id != subject || owned.record.replaced || owned.record.revoked) continue;
    owned.record.replaced = true;
    SHOAL_RETURN_IF_ERROR(store_.put_invitation(owned.record));
    record_event("peer/" + subject, "invitation " + id + " replaced by " + invitation.id);
  }
  remember_peer(card);
  issued_[invitation.id] = {invitation, record};
  std::string list;
  for (const auto& ns : options.namespaces) list += (list.empty() ? "" : ",") + ns;
  record_event("peer/" + subject,
               "issued invitation " + invitation.id + " to " + card.cluster + " for " + list);
  capacity_changed_ = true;
  return token;
}

Result<std::string> Agent::accept_invitation(std::string_view token) {
  SHOAL_ASSIGN_OR_RETURN(crypto::Invitation invitation, crypto::open_token(token));
  SHOAL_RETURN_IF_ERROR(
      crypto::check_acceptable(invitation, identity_.public_key(), clock_.now()));
  if (invitation.issuer.public_key == identity_.public_key()) {
    return invalid_argument("invitation token issuer: this agent issued it; it is for the source");
  }
  std::string peer_id = crypto::key_to_text(invitation.issuer.public_key);
  store::InvitationRecord record{invitation.id, store::InvitationDirection::kAccepted, peer_id,
                                 std::string(token), false, false};
  while (!record.token.empty() && (record.token.back() == '\n' || record.token.back() == ' ')) {
    record.token.pop_back();
  }
  if (auto existing = accepted_.find(invitation.id); existing != accepted_.end()) {
    if (existing->second.record.revoked) {
      return invalid_argument("invitation token: invitation " + invitation.id +
                              " was revoked by its issuer");
    }
    return existing->second.invitation.issuer.cluster;  // accepting twice changes nothing
  }
  SHOAL_RETURN_IF_ERROR(store_.put_invitation(record));
  for (auto& [id, owned] : accepted_) {
    if (owned.record.peer_id != peer_id || owned.record.replaced || owned.record.revoked) continue;
    if (owned.invitation.created > invitation.created) continue;  // an older token accepted late
    owned.record.replaced = true;
    SHOAL_RETURN_IF_ERROR(store_.put_invitation(owned.record));
    record_event("peer/" + peer_id, "invitation " + id + " replaced by " + invitation.id);
  }
  remember_peer(invitation.issuer);
  std::string cluster = invitation.issuer.cluster;
  accepted_[record.id] = {std::move(invitation), record};
  record_event("peer/" + peer_id, "accepted invitation " + record.id + " from " + cluster);
  send(peer_id, protocol::Hello{config_.cluster, config_.org, config_.endpoint});
  return cluster;
}

InvitationState Agent::invitation_state(const OwnedInvitation& owned, TimePoint now) {
  if (owned.record.revoked) return InvitationState::kRevoked;
  if (owned.record.replaced) return InvitationState::kReplaced;
  if (owned.invitation.expires && *owned.invitation.expires <= now) return InvitationState::kExpired;
  if (now < owned.invitation.not_before) return InvitationState::kNotYetValid;
  return InvitationState::kActive;
}

InvitationUsage Agent::usage_of_source(const std::string& source) const {
  InvitationUsage usage;
  for (const auto& [key, reservation] : reservations_) {
    if (key.first != source || !store::holds_resources(reservation.record.phase)) continue;
    usage.resources += reservation.record.spec.total();
    usage.workloads += 1;
  }
  return usage;
}

InvitationUsage Agent::usage_at_target(const std::string& target) const {
  InvitationUsage usage;
  for (const auto& [uid, workload] : workloads_) {
    const store::WorkloadRecord& record = workload.record;
    if (record.winner != target || model::is_finished(record.phase)) continue;
    usage.resources += record.spec.total();
    usage.workloads += 1;
  }
  return usage;
}

std::vector<InvitationView> Agent::invitations() const {
  std::vector<InvitationView> out;
  TimePoint now = clock_.now();
  auto add = [&](const OwnedInvitation& owned, bool issued) {
    InvitationView view;
    view.id = owned.record.id;
    view.direction = issued ? "issued" : "accepted";
    view.peer_id = owned.record.peer_id;
    view.peer = cluster_name_of(owned.record.peer_id);
    view.namespaces = owned.invitation.namespaces;
    InvitationState state = invitation_state(owned, now);
    view.state = invitation_state_name(state);
    view.limits = owned.invitation.limits;
    if (state == InvitationState::kActive || state == InvitationState::kRevoked ||
        state == InvitationState::kExpired) {
      // Replaced invitations hand their usage to the one that replaced them.
      view.usage = issued ? usage_of_source(view.peer_id) : usage_at_target(view.peer_id);
    }
    view.not_before = owned.invitation.not_before;
    view.expires = owned.invitation.expires;
    out.push_back(std::move(view));
  };
  for (const auto& [id, owned] : issued_) add(owned, true);
  for (const auto& [id, owned] : accepted_) add(owned, false);
  return out;
}

Status Agent::revoke_invitation(const std::string& id, bool evict) {
  auto it = issued_.find(id);
  if (it == issued_.end()) {
    if (accepted_.count(id)) {
      return invalid_argument("invitation " + id +
                              " was issued by the other cluster; only its issuer can revoke it");
    }
    return not_found("invitation " + id + ": no such issued invitation (see `shoalctl invite list`)");
  }
  OwnedInvitation& owned = it->second;
  const std::string source = owned.record.peer_id;
  if (!owned.record.revoked) {
    owned.record.revoked = true;
    SHOAL_RETURN_IF_ERROR(store_.put_invitation(owned.record));
    record_event("peer/" + source, "revoked invitation " + id + (evict ? " (evicting its work)" : ""));
  }
  if (!may_send_as_source(source)) withdraw_from_source(source, "invitation " + id + " revoked", evict);
  send(source, protocol::Revoke{id, evict});
  return store_health_;
}

std::vector<std::string> Agent::peer_ids() const {
  std::vector<std::string> out;
  out.reserve(peers_.size());
  for (const auto& [id, peer] : peers_) out.push_back(id);
  return out;
}

std::vector<PeerView> Agent::peers() const {
  std::vector<PeerView> out;
  TimePoint now = clock_.now();
  for (const auto& [id, peer] : peers_) {
    PeerView view;
    view.id = id;
    view.cluster = peer.cluster;
    view.org = peer.org;
    view.endpoint = peer.endpoint;
    view.last_seen = peer.last_seen;
    if (peer.lease_ms > 0) view.lease_until = from_millis(peer.lease_until_ms);
    if (!may_send_as_source(id) && !may_send_as_target(id)) {
      // No valid invitation either way: the relationship is over (or not begun).
      std::string revoked, expired, pending;
      auto consider = [&, &peer_id = id](const auto& table) {
        for (const auto& [inv_id, owned] : table) {
          if (owned.record.peer_id != peer_id) continue;
          InvitationState state = invitation_state(owned, now);
          if (state == InvitationState::kRevoked) revoked = inv_id;
          else if (state == InvitationState::kExpired) expired = inv_id;
          else if (state == InvitationState::kNotYetValid) pending = inv_id;
        }
      };
      consider(issued_);
      consider(accepted_);
      if (!revoked.empty()) {
        view.state = "Revoked";
        view.reason = "invitation " + revoked + " revoked";
      } else if (!expired.empty()) {
        view.state = "Expired";
        view.reason = "invitation " + expired + " expired";
      } else {
        view.state = "Connecting";
        view.reason = pending.empty() ? "no invitation" : "invitation " + pending + " not valid yet";
      }
    } else if (!peer.last_seen) {
      view.state = "Connecting";
      view.reason = "not heard from since this agent started";
    } else if (now - *peer.last_seen <= 3 * config_.heartbeat_interval) {
      view.state = "Active";
    } else {
      view.state = "Unreachable";
      view.reason = "no message for " + format_duration(now - *peer.last_seen);
    }
    for (const auto* invitation : valid_issued(id)) {
      for (const auto& ns : invitation->namespaces) view.namespaces_offered.push_back(ns);
    }
    for (const auto* invitation : valid_accepted(id)) {
      for (const auto& ns : invitation->namespaces) view.namespaces_accepted.push_back(ns);
    }
    for (const auto& [ns, capacity] : peer.capacity) view.capacity.push_back(capacity);
    for (const auto& [uid, workload] : workloads_) {
      if (workload.record.winner == id && !model::is_finished(workload.record.phase)) {
        ++view.workloads_placed;
      }
    }
    out.push_back(std::move(view));
  }
  return out;
}

Result<std::vector<store::EventRecord>> Agent::events(const std::string& subject) {
  return store_.load_events(subject);
}

std::vector<store::ReservationRecord> Agent::reservations() const {
  std::vector<store::ReservationRecord> out;
  for (const auto& [key, reservation] : reservations_) out.push_back(reservation.record);
  return out;
}

bool Agent::check_invariants() const {
  // Every reservation that holds resources holds one node per replica.
  for (const auto& [key, reservation] : reservations_) {
    const auto& record = reservation.record;
    if (store::holds_resources(record.phase) &&
        record.nodes.size() != static_cast<size_t>(record.spec.replicas)) {
      return false;
    }
  }
  // A source workload with a winner is past Pending; one with anything left
  // to do is visited by the source timers (awake_).
  for (const auto& [uid, workload] : workloads_) {
    if (!workload.record.winner.empty() && workload.record.phase == model::Phase::kPending) {
      return false;
    }
    if (!is_quiet(workload) && !awake_.count(uid)) return false;
  }
  // The scans' lower bounds are lower bounds: no deadline hides before them.
  for (const auto& [key, reservation] : reservations_) {
    const auto& record = reservation.record;
    if (record.phase == store::ReservationPhase::kReserved &&
        record.expires_at < next_reservation_expiry_) {
      return false;
    }
    if (record.generation > record.acked_generation &&
        reservation.last_status_sent + resend_after(reservation.status_resends) <
            next_status_retry_) {
      return false;
    }
  }
  // The copies of a group, finished ones included, are placed on different
  // clusters.
  for (const auto& [group_uid, copy_uids] : copies_) {
    std::set<std::string> winners;
    for (const auto& copy_uid : copy_uids) {
      const store::WorkloadRecord& copy = workloads_.at(copy_uid).record;
      if (copy.winner.empty()) continue;
      if (!winners.insert(copy.winner).second) return false;
    }
  }
  return true;
}

}  // namespace shoal::core
