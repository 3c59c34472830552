// The router and its peers: HELLO (who a peer is and where it listens,
// the REVOKEs it has not heard, our room for a source that restarted),
// REVOKE, and the heartbeats that keep every idle link known to be alive.
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
  peers_.remember(crypto::key_to_text(card.public_key), card.cluster, card.org, card.endpoint);
}

}  // namespace shoal::core
