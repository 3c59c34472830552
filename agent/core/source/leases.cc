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

}  // namespace shoal::core::source
