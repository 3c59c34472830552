#include "agent/core/source/leases.h"

namespace shoal::core::source {

Duration SourceLeases::digest_interval() const {
  Duration interval = config_.gc_interval;
  if (config_.lease.count() > 0) interval = std::min(interval, config_.lease / 4);
  return interval;
}

std::string SourceLeases::broken_invariant(const InvitationBook& invitations) const {
  if (invitations.issuers().size() != issuers_seen_) return "";
  for (const auto& [id, on_record] : invitations.issuers()) {
    if (targets_.last_digest_sent(id) + digest_interval() < next_due_ && may_renew(id)) {
      return "a DIGEST is due before the plan's next_due";
    }
  }
  return "";
}

void SourceLeases::send_digests(TimePoint now, const InvitationBook& invitations) {
  Duration interval = digest_interval();
  start_pass(invitations.issuers().size());
  for (const auto& [id, on_record] : invitations.issuers()) {
    // Renewing a lease tells the target "I still see you". One that may
    // not be renewed waits until we hear from it (heard_from).
    if (!may_renew(id)) continue;
    TimePoint last_sent = targets_.last_digest_sent(id);
    if (now - last_sent < interval) {
      due_by(last_sent + interval);
      continue;
    }
    send_digest(id, now);
  }
}

void SourceLeases::send_digest(const std::string& target, TimePoint now) {
  protocol::Digest digest;
  digest.lease_ms = static_cast<uint64_t>(config_.lease.count());
  for (const auto& [uid, workload] : book_.entries()) {
    const store::WorkloadRecord& record = workload.record;
    if (record.winner == target && !model::is_finished(record.phase) && !record.deleting) {
      digest.copies.push_back({uid, record.epoch, record.spec.priority});
    }
  }
  targets_.digest_sent(target, now);
  due_by(now + digest_interval());
  context_.send(target, std::move(digest));
}

void SourceLeases::send_binding(const std::string& target, protocol::Body body) {
  // Ahead of the first one, and then once a retry interval until the
  // target answers: what follows a DIGEST on the link is read after it,
  // and an envelope lost is followed by another DIGEST as an APPROVE is by
  // its resend. Not ahead of every one: until the answer comes, a burst
  // of placements would send (and the target answer) a DIGEST each, a
  // tenth more messages per placement.
  TimePoint now = context_.now();
  if (config_.lease.count() > 0 && target != context_.self_id() &&
      !targets_.knows_our_lease(target) &&
      now - targets_.last_digest_ahead(target) >= config_.retry_interval && may_renew(target)) {
    send_digest(target, now);
    targets_.digest_ahead_sent(target, now);
  }
  context_.send(target, std::move(body));
}

}  // namespace shoal::core::source
