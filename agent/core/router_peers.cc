// The router and its peers: HELLO (who a peer is and where it listens,
// the REVOKEs it has not heard, our room for a source that restarted),
// REVOKE, the heartbeats that keep every idle link known to be alive, and
// forgetting a peer gone for good.
#include "agent/core/router.h"

namespace shoal::core {

void Router::on_hello(const std::string& from, const Sender& sender, const protocol::Hello& hello) {
  if (from == context_.self_id()) return;
  // Answer the first HELLO of each peer boot, so a (re)started peer hears
  // from us at once; answering every HELLO would ping-pong forever.
  bool first_contact = PeerTable::greet(sender.row->second);
  // The signed HELLO is the peer's word on its own address and name.
  peers_.remember(sender.row, hello.cluster, hello.org, hello.endpoint);
  const AgentConfig& config = context_.config();
  if (first_contact) {
    context_.send(from, protocol::Hello{config.cluster, config.org, config.endpoint});
    // Reconcile with a (re)started or reconnected target at once (next tick).
    source_.greet_target(from);
  }
  // A REVOKE may have been lost, sent while the peer was down, or sent before
  // it even accepted the token. A source greets us only while it believes an
  // invitation valid, so each of its HELLOs is answered with the REVOKEs it
  // has not heard; once it has, it stops greeting and we stop repeating.
  TimePoint now = context_.now();
  bool from_source = InvitationBook::any_valid(sender.invitations.issued, now);
  if (!from_source) {
    for (const std::string& id :
         InvitationBook::revocations_to_tell(sender.invitations.issued, now)) {
      context_.send(from, protocol::Revoke{id, false});
    }
  }
  // A (re)started source gets our capacity at once rather than at the next
  // heartbeat; only once per boot, so HELLOs cannot make us sign at will.
  if (first_contact && from_source) target_.advertiser().greet(from);
}

void Router::on_revoke(const std::string& from, const protocol::Revoke& message) {
  const InvitationBook::Owned* owned = invitations_.find_accepted(message.invitation_id);
  if (!owned || owned->record.peer_id != from) return;  // not theirs to revoke
  auto revoked = invitations_.revoke(store::InvitationDirection::kAccepted, message.invitation_id,
                                     context_.store());
  if (!revoked.is_ok()) return context_.note_store(revoked.status());
  if (!*revoked) return;
  context_.record_event("peer/" + from,
                        "invitation " + message.invitation_id + " revoked by " +
                            context_.cluster_name_of(from) +
                            (message.evict ? "; our work there is being stopped" : ""));
  if (!is_target(from)) source_.targets().forget_capacity(from);  // nothing to place there any more
}

void Router::send_heartbeats(TimePoint silent_since) {
  // Any envelope tells a peer we are alive and reading (its silence count,
  // our acknowledgements); a HELLO is only for a link that carries nothing
  // else. Passes run every half interval: a peer we sent nothing since the
  // previous pass would wait longer than an interval for the next one, so
  // it gets a HELLO now. An idle link carries one HELLO per interval, as
  // before; a busy one none. (By pass, not by elapsed time: a tick a
  // millisecond late must not make every pass send.)
  const AgentConfig& config = context_.config();
  const protocol::Body hello = protocol::Hello{config.cluster, config.org, config.endpoint};
  std::vector<uint8_t> encoded;  // once per pass, for every peer that gets it
  for (const auto& [id, peer] : peers_.all()) {
    if (peer.last_sent_to >= silent_since || peers_.is_self(id)) continue;
    if (is_source(id) || is_target(id)) {
      if (encoded.empty()) encoded = protocol::encode_body(hello);
      context_.send(id, hello, encoded);
    }
  }
}

void Router::remember_peer(const crypto::IdCard& card) {
  std::string id = crypto::key_to_text(card.public_key);
  peers_.remember(id, card.cluster, card.org, card.endpoint);
  if (peers_.unforget(id)) {
    context_.record_event("peer/" + id, "a new invitation: " + card.cluster + " is a peer again");
    source_.greet_target(id);  // its lease may be renewed again: a DIGEST is due
  }
}

Result<PeerForgotten> Router::forget_peer(const std::string& name) {
  SHOAL_ASSIGN_OR_RETURN(std::string id, forgettable_peer(name));
  TimePoint now = context_.now();
  PeerForgotten forgotten;
  forgotten.id = id;
  forgotten.cluster = context_.cluster_name_of(id);
  forgotten.hosted_stopped = target_.usage_of_source(id).workloads;
  forgotten.copies_lost = source_.book().usage_at(id).workloads;
  // Forgotten first: nothing below (a REVOKE, a STATUS of a stopped copy)
  // is sent to it.
  peers_.forget(id, now);
  SHOAL_ASSIGN_OR_RETURN(forgotten.invitations_revoked, revoke_all_with(id));
  target_.withdraw_from_source(id, "peer " + forgotten.cluster + " forgotten by the operator",
                               /*evict=*/true);
  target_.note_capacity_changed();
  forgotten.placed_again_at = source_.lose_target(id);
  context_.record_event(
      "peer/" + id,
      "forgotten by the operator: " + std::to_string(forgotten.invitations_revoked.size()) +
          " invitation(s) revoked, " + std::to_string(forgotten.hosted_stopped) +
          " of its workload(s) here stopped, " + std::to_string(forgotten.copies_lost) +
          " of ours there placed again from " + format_time(forgotten.placed_again_at));
  SHOAL_RETURN_IF_ERROR(end_control());
  return forgotten;
}

Result<std::string> Router::forgettable_peer(const std::string& name) const {
  if (name.empty()) return invalid_argument("name: expected a peer's cluster name or id");
  if (name == context_.self_id() || name == context_.config().cluster) {
    return invalid_argument("name: " + name + " is this agent; expected a peer");
  }
  std::vector<std::string> named;
  for (const auto& [id, peer] : peers_.all()) {
    if (peers_.is_self(id) || PeerTable::is_forgotten(peer)) continue;
    if (id == name) return id.text();
    if (peer.cluster == name) named.push_back(id.text());
  }
  if (named.empty()) return not_found("name: no peer " + name + " (see `shoalctl peers`)");
  if (named.size() > 1) {
    return invalid_argument("name: " + std::to_string(named.size()) + " peers are named " + name +
                            "; give the id (see `shoalctl peers -o wide`)");
  }
  return named.front();
}

Result<std::vector<std::string>> Router::revoke_all_with(const std::string& peer_id) {
  std::vector<std::string> revoked_ids;
  using Direction = store::InvitationDirection;
  for (auto [direction, owned_list] :
       {std::pair{Direction::kIssued, invitations_.issued_to(peer_id)},
        std::pair{Direction::kAccepted, invitations_.accepted_from(peer_id)}}) {
    for (const InvitationBook::Owned* owned : owned_list) {
      std::string id = owned->record.id;
      auto revoked = invitations_.revoke(direction, id, context_.store());
      if (!revoked.is_ok())
        context_.note_store(revoked.status());  // latched: see create_invitation
      SHOAL_ASSIGN_OR_RETURN(bool newly_revoked, std::move(revoked));
      if (!newly_revoked) continue;
      revoked_ids.push_back(id);
      context_.record_event("peer/" + peer_id,
                            "invitation " + id + " revoked: the peer is forgotten");
    }
  }
  return revoked_ids;
}

}  // namespace shoal::core
