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
                                             const std::vector<std::string>& namespaces) {
  SHOAL_ASSIGN_OR_RETURN(crypto::IdCard card, crypto::parse_id_card(to_card));
  if (card.public_key == identity_.public_key()) {
    return invalid_argument("--to: that is this agent's own id card; invite another agent");
  }
  if (namespaces.empty()) return invalid_argument("--namespace: expected at least one namespace");
  for (const auto& ns : namespaces) {
    SHOAL_RETURN_IF_ERROR(model::validate_name(ns, "--namespace"));
  }
  TimePoint now = clock_.now();
  crypto::Invitation invitation;
  invitation.id = new_uid().substr(0, 16);
  invitation.issuer = {config_.cluster, config_.org, identity_.public_key(), config_.endpoint};
  invitation.subject = card.public_key;
  invitation.namespaces = namespaces;
  invitation.created = now;
  invitation.not_before = now;
  invitation.expires = now + config_.invitation_lifetime;
  std::string token = crypto::issue_token(invitation, identity_);
  store::InvitationRecord record{invitation.id, store::InvitationDirection::kIssued,
                                 crypto::key_to_text(card.public_key), token, false};
  SHOAL_RETURN_IF_ERROR(store_.put_invitation(record));
  remember_peer(card);
  issued_[invitation.id] = {invitation, record};
  std::string list;
  for (const auto& ns : namespaces) list += (list.empty() ? "" : ",") + ns;
  record_event("peer/" + record.peer_id,
               "issued invitation " + invitation.id + " to " + card.cluster + " for " + list);
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
                                 std::string(token), false};
  while (!record.token.empty() && (record.token.back() == '\n' || record.token.back() == ' ')) {
    record.token.pop_back();
  }
  SHOAL_RETURN_IF_ERROR(store_.put_invitation(record));
  remember_peer(invitation.issuer);
  std::string cluster = invitation.issuer.cluster;
  accepted_[record.id] = {std::move(invitation), record};
  record_event("peer/" + peer_id, "accepted invitation " + record.id + " from " + cluster);
  send(peer_id, protocol::Hello{config_.cluster, config_.org, config_.endpoint});
  return cluster;
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
    if (!peer.last_seen) view.state = "Connecting";
    else if (now - *peer.last_seen <= 3 * config_.heartbeat_interval) view.state = "Active";
    else view.state = "Unreachable";
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
  // A source workload with a winner is past Pending.
  for (const auto& [uid, workload] : workloads_) {
    if (!workload.record.winner.empty() && workload.record.phase == model::Phase::kPending) {
      return false;
    }
  }
  return true;
}

}  // namespace shoal::core
