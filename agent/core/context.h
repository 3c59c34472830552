// What the parts of one agent share (agent/core/README.md): its
// configuration and identity, the injected world (clock, store, cluster,
// transport, randomness), and the effects of the step being taken —
// messages out, events, counters, and the first failed store write.
//
// Owned by Agent; PeerTable-aware so that a message can be addressed by peer
// id. Parts talk to each other only through Agent, never through here.
#pragma once

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "agent/cluster/cluster.h"
#include "agent/core/config.h"
#include "agent/core/interfaces.h"
#include "agent/core/peer_table.h"
#include "agent/core/views.h"
#include "crypto/identity.h"
#include "protocol/envelope.h"
#include "protocol/messages.h"
#include "store/store.h"

namespace spdlog {
class logger;
}

namespace shoal::core {

class Context {
 public:
  Context(AgentConfig config, crypto::Identity identity, const Clock& clock, Transport& transport,
          store::Store& store, cluster::Cluster& cluster, Rng& rng,
          std::shared_ptr<spdlog::logger> logger, PeerTable& peers,
          const crypto::SignatureScheme& signatures);

  const AgentConfig& config() const { return config_; }
  const crypto::Identity& identity() const { return identity_; }
  // How envelopes and invitation tokens are signed and checked.
  const crypto::SignatureScheme& signatures() const { return signatures_; }
  const std::string& self_id() const { return self_id_; }
  const Clock& clock() const { return clock_; }
  TimePoint now() const { return clock_.now(); }
  store::Store& store() { return store_; }
  cluster::Cluster& cluster() { return cluster_; }
  const cluster::Cluster& cluster() const { return cluster_; }
  Rng& rng() { return rng_; }
  spdlog::logger* logger() const { return logger_.get(); }
  const std::shared_ptr<spdlog::logger>& shared_logger() const { return logger_; }
  AgentStats& stats() { return stats_; }
  const AgentStats& stats() const { return stats_; }
  uint64_t boot() const { return boot_; }
  void set_boot(uint64_t boot) { boot_ = boot; }

  // Queues `body` for `peer_id` until seal_outgoing(); the transport sends
  // it once the batch commits. To ourselves it joins the local inbox and is
  // handled within the same step (Router::drain_local). Sets the peer's
  // last_sent_to: a batch that does not commit leaves no agent behind to
  // remember it (the runtime rebuilds it from the store, the sim restarts
  // it).
  void send(const std::string& peer_id, protocol::Body body);
  // The same for a body already encoded (`encoded` is encode_body(body)):
  // one body for many peers is encoded once.
  void send(const std::string& peer_id, const protocol::Body& body,
            const std::vector<uint8_t>& encoded);
  // Like send, for what nobody waits on (an acknowledgement): it leaves
  // with the next envelope this agent seals for `peer_id`, or in one of its
  // own within `within`, whichever comes first. At everyday rates most
  // envelopes carried one message; an acknowledgement in an envelope of
  // its own cost a signature, a verification and, at the peer, a commit.
  // Like every message it leaves only after a batch commits (the one that
  // queued it, or a later one). Only for what the peer repeats until
  // answered: a deferred message may be lost with a later batch that does
  // not commit.
  void send_later(const std::string& peer_id, protocol::Body body, Duration within);
  // How long send_later's messages wait for an envelope to share: well
  // inside the retryInterval after which the peer would repeat itself.
  Duration lazy_delay() const {
    return std::clamp<Duration>(config_.lazy_delay, Duration(0), config_.retry_interval / 4);
  }
  // Moves the deferred messages that are due into this batch (a tick's
  // first step), so that no timer stays due after the tick.
  void take_due_deferred();
  // When the earliest deferred message must leave (TimePoint::max(): none).
  TimePoint deferred_due() const { return deferred_due_; }
  // Signs what this batch queued, one envelope per peer (a BATCH of every
  // message, in order; more envelopes only past kMaxBodyBytes), and hands
  // the envelopes to the transport. Signing dominated the agent's CPU at one
  // signature per message. Deferred messages ride along to those peers, and
  // go alone once due.
  void seal_outgoing();
  bool has_local() const { return !local_inbox_.empty(); }
  protocol::Body take_local();

  // The envelope time of the message being handled (now for a local one):
  // the time leases are renewed by.
  TimePoint sent_at() const { return sent_at_; }
  void set_sent_at(TimePoint at) { sent_at_ = at; }
  // Where the message being handled stands in its sender's order of
  // envelopes: (boot, seq), or {0, 0} for a local one (handled at once,
  // never overtaken). Envelopes may arrive out of order (a redial; the
  // replay window takes them), so a report can be older than one already
  // taken from the same peer: compare with EnvelopeOrder::precedes.
  struct EnvelopeOrder {
    uint64_t boot = 0;
    uint64_t seq = 0;
    // True when this envelope was sealed before `later` by the same boot of
    // the same peer: what it says is older news.
    bool precedes(const EnvelopeOrder& later) const {
      return boot != 0 && boot == later.boot && seq < later.seq;
    }
  };
  const EnvelopeOrder& envelope_order() const { return envelope_order_; }
  void set_envelope_order(EnvelopeOrder order) { envelope_order_ = order; }

  // Appends to `subject`'s history (a copy's story is told in its group's;
  // see set_event_subject).
  void record_event(const std::string& subject, const std::string& text);
  // How record_event names a subject: given (subject, text), may rewrite
  // both. Set by the source role, which knows which uids are copies.
  using EventSubject = std::function<void(std::string& subject, std::string& text)>;
  void set_event_subject(EventSubject rewrite) { event_subject_ = std::move(rewrite); }

  // Keeps the first failed store write (see Agent::store_health()).
  void note_store(const Status& status) {
    if (!status.is_ok() && store_health_.is_ok()) store_health_ = status;
  }
  const Status& store_health() const { return store_health_; }

  std::string cluster_name_of(const std::string& peer_id) const {
    return peers_.cluster_name_of(peer_id);
  }
  // 32 hex digits from the injected randomness.
  std::string new_uid();
  // Uniform in [0, 1), from the injected randomness.
  double random_unit() { return static_cast<double>(rng_.next() >> 11) * 0x1.0p-53; }

  // How long after the last send an unanswered message goes again:
  // retryInterval, doubling with each resend up to 8x. A peer slow to answer
  // (a backlog, not a loss) is not buried under copies of what it has not
  // read yet; a lost message still goes again after retryInterval.
  Duration resend_after(int resends) const {
    return config_.retry_interval * (int64_t{1} << std::min(resends, 3));
  }
  // When an unanswered message last sent to `peer_id` at `last_sent` goes
  // again: resend_after, and not while the peer is still reading (and
  // acknowledging) what we sent before it (protocol/README.md, flow control).
  TimePoint resend_at(const std::string& peer_id, TimePoint last_sent, int resends) const;
  // The latest resend_at() can have been for that message: when it was not
  // read yet. A deadline computed earlier is at most this, since the peer's
  // progress only moves forward (for invariant checks).
  TimePoint latest_resend_at(const std::string& peer_id, TimePoint last_sent, int resends) const;

 private:
  AgentConfig config_;
  crypto::Identity identity_;
  const crypto::SignatureScheme& signatures_;
  std::string self_id_;
  const Clock& clock_;
  Transport& transport_;
  store::Store& store_;
  cluster::Cluster& cluster_;
  Rng& rng_;
  std::shared_ptr<spdlog::logger> logger_;
  PeerTable& peers_;  // read, and told of each message queued (note_sending)

  uint64_t boot_ = 0;
  uint64_t seq_ = 0;
  AgentStats stats_;
  Status store_health_;
  std::deque<protocol::Body> local_inbox_;
  // The batch a message of `type` to `peer_id` joins, counted as sent;
  // null for a peer we do not know (the message goes nowhere).
  std::vector<protocol::BatchItem>* batch_for(const std::string& peer_id,
                                              protocol::MessageType type);
  // Encoded, by peer id, in send order: what seal_outgoing() signs.
  TextMap<std::vector<protocol::BatchItem>> outgoing_;  // by peer id
  struct Deferred {
    TimePoint due = TimePoint::max();
    std::vector<protocol::BatchItem> items;  // in send order
  };
  // send_later's messages, by peer id, waiting for an envelope to that
  // peer or their due time. A batch that does not commit is followed by a
  // new agent (the step contract), so none of them outlives it.
  TextMap<Deferred> deferred_;
  // Moves into outgoing_ the deferred messages that are due, and with
  // `riding_too` those to a peer outgoing_ already writes to.
  void release_deferred(bool riding_too);
  TimePoint deferred_due_ = TimePoint::max();  // the earliest in deferred_
  TimePoint sent_at_{};
  EnvelopeOrder envelope_order_;
  EventSubject event_subject_;
};

}  // namespace shoal::core
