// The source's side of the targets' leases (protocol/README.md, "Leases and
// fencing"): how long each target has been silent, whether we may still
// renew its lease (DIGEST, APPROVE), when its copies count as lost and
// fenced, when the next DIGEST is due, and sending it.
//
// A target silent for worker_lost_timeout is lost; we stop renewing its
// lease lease + max_clock_skew before that, so by the time its copies are
// placed again its lease has certainly ended and it has stopped them. A
// target the operator forgot is lost at once, and its copies are placed
// again lease + max_clock_skew after it was forgotten (renewals stop then). The
// DIGEST plan (next_due) is a lower bound of every issuer's next
// DIGEST, so the tick may come early, never late: between passes a DIGEST
// comes due earlier only by a greeting, by hearing again from a target too
// long silent to renew, or by a new issuer, and each of those calls
// due_by/due_now (or changes the issuers' count).
//
// Invariant (broken_invariant): while the issuers are those of the last
// pass, no renewable issuer's DIGEST is due before the plan says.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>

#include "agent/core/config.h"
#include "agent/core/context.h"
#include "agent/core/invitation_book.h"
#include "agent/core/peer_table.h"
#include "agent/core/source/book.h"
#include "agent/core/source/target_ledger.h"

namespace shoal::core::source {

class SourceLeases {
 public:
  // Reads the silences in `peers`, keeps our renewals in `targets`, and
  // lists in each DIGEST what `book` holds at that target.
  SourceLeases(Context& context, const PeerTable& peers, TargetLedger& targets,
               const SourceBook& book)
      : context_(context),
        config_(context.config()),
        peers_(peers),
        targets_(targets),
        book_(book) {}

  Duration silent_for(const std::string& peer_id) const {
    return peers_.silent_for(peer_id, context_.now());
  }
  bool forgotten(const std::string& peer_id) const {
    return peers_.forgotten_at(peer_id).has_value();
  }
  // Silent for worker_lost_timeout, or forgotten by the operator: its
  // copies are placed again once renewals_ended.
  bool lost(const std::string& peer_id) const {
    return silent_for(peer_id) >= config_.worker_lost_timeout || forgotten(peer_id);
  }
  // Whether a lease-renewing message (DIGEST, APPROVE) may go to this peer,
  // silent for now or for `silence`. Never to a forgotten one.
  bool may_renew(const std::string& peer_id) const {
    return may_renew_after(silent_for(peer_id)) && !forgotten(peer_id);
  }
  bool may_renew_after(Duration silence) const {
    // Stop once the target has been silent so long that worker-lost
    // handling will need its copies stopped: then its lease has ended
    // lease + skew before we place them again.
    return config_.lease.count() == 0 ||
           silence < config_.worker_lost_timeout - config_.lease - config_.max_clock_skew;
  }
  // When a copy at `winner` counts as lost: silent long enough, and (with
  // fencing) our renewals stopped lease + skew before. Inline, as the
  // above: the due-time index asks on every tick.
  TimePoint worker_lost_at(const std::string& winner) const {
    if (forgotten(winner)) return fenced_at(winner);
    TimePoint silent_enough = context_.now() - silent_for(winner) + config_.worker_lost_timeout;
    return std::max(silent_enough, fenced_at(winner));
  }
  // Whether our renewals to `winner` stopped lease + skew before `now` (or
  // fencing is off): a copy there has certainly stopped.
  bool renewals_ended(const std::string& winner, TimePoint now) const {
    return now >= fenced_at(winner);
  }
  // Why a copy at `winner` (cluster `cluster`) is given up as lost.
  std::string why_lost(const std::string& winner, const std::string& cluster) const {
    return forgotten(winner)
               ? "worker lost: " + cluster + " forgotten by the operator, its lease over"
               : "worker lost: " + cluster + " silent for " + format_duration(silent_for(winner));
  }
  // For a forgotten peer, when what we asked of it may be let go: its
  // copies have certainly stopped (fenced_at), so a DELETE owed to it is
  // answered; none while it is not forgotten.
  std::optional<TimePoint> let_go_at(const std::string& peer_id) const {
    if (!forgotten(peer_id)) return std::nullopt;
    return fenced_at(peer_id);
  }
  // How often each target's lease is renewed: a quarter lease, or the
  // garbage interval if that is shorter.
  Duration digest_interval() const;

  // ---- the DIGEST plan ----
  // Whether a pass over the issuers is due: the plan has come, or the
  // issuers changed since the last pass (they only ever grow).
  bool pass_due(TimePoint now, size_t issuers) const {
    return now >= next_due_ || issuers != issuers_seen_;
  }
  TimePoint next_due(size_t issuers) const {
    return issuers != issuers_seen_ ? TimePoint::min() : next_due_;
  }
  // A pass starts over `issuers` issuers; it plans each one's next DIGEST.
  void start_pass(size_t issuers) {
    next_due_ = TimePoint::max();
    issuers_seen_ = issuers;
  }
  void due_by(TimePoint at) { next_due_ = std::min(next_due_, at); }
  void due_now() { next_due_ = TimePoint::min(); }

  // ---- renewals ----
  // A DIGEST to every issuer of `invitations` that is due one (a pass of the plan).
  void send_digests(TimePoint now, const InvitationBook& invitations);
  // One DIGEST to `target` now: its lease renewed, what we hold there listed.
  void send_digest(const std::string& target, TimePoint now);
  // An APPROVE, or a CANDIDATE approved in advance: what binds work at
  // `target`. A target that has not answered a DIGEST of ours since we
  // greeted it may not know our lease yet, and would bind the copy
  // unfenced (a copy its death leaves running, while we place it again
  // elsewhere). A DIGEST goes first, in the same batch, read first (one a
  // retry interval, until the target answers one).
  void send_binding(const std::string& target, protocol::Body body);

  std::string broken_invariant(const InvitationBook& invitations) const;

 private:
  // When a copy at `winner` has certainly stopped: lease + skew after our
  // last renewal to it; the beginning of time when fencing is off. Renewals
  // to a forgotten peer end when it is forgotten (may_renew), and that
  // moment is stored, while the last DIGEST's time is not: a restart must
  // not move the fence earlier.
  TimePoint fenced_at(const std::string& winner) const {
    if (config_.lease.count() == 0) return TimePoint::min();
    TimePoint last_renewal = targets_.last_digest_sent(winner);
    if (auto forgotten = peers_.forgotten_at(winner)) last_renewal = *forgotten;
    return last_renewal + config_.lease + config_.max_clock_skew;
  }

  Context& context_;
  const AgentConfig& config_;
  const PeerTable& peers_;
  TargetLedger& targets_;
  const SourceBook& book_;
  TimePoint next_due_ = TimePoint::min();
  size_t issuers_seen_ = 0;
};

}  // namespace shoal::core::source
