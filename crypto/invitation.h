// Invitation tokens: a target's signed permission for one source key to send
// workloads into some of its namespaces. Text form: shoal-invite:v1:<base64url>.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "crypto/id_card.h"
#include "crypto/identity.h"

namespace shoal::crypto {

struct InvitationLimits {
  std::optional<int64_t> cpu_milli;
  std::optional<int64_t> memory_bytes;
  std::optional<int64_t> gpu;
  std::optional<int64_t> workloads;
  // The invitee's work may be stopped for the issuer's own work, and for
  // guests whose invitations are not preemptible, under the issuer's
  // spec.preemption (docs/invitations.md).
  bool preemptible = false;
  // The highest priority the invitee's work holds at the issuer: a
  // workload that claims more is held to it. nullopt: no ceiling.
  std::optional<int32_t> max_priority;
  friend bool operator==(const InvitationLimits&, const InvitationLimits&) = default;
};

struct Invitation {
  std::string id;            // random, unique; what `invite revoke` names
  IdCard issuer;             // the target
  PublicKey subject{};       // the source's key
  std::vector<std::string> namespaces;
  InvitationLimits limits;
  TimePoint not_before{};
  std::optional<TimePoint> expires;  // nullopt: never (explicitly asked for)
  TimePoint created{};

  bool covers(std::string_view namespace_name) const;
  friend bool operator==(const Invitation&, const Invitation&) = default;
};

// Signs `invitation` with the issuer's identity; the issuer key inside the
// invitation must be that identity's.
std::string issue_token(const Invitation& invitation, const Identity& issuer,
                        const SignatureScheme& signatures = ed25519_signatures());

// Decodes a token and checks the issuer's signature. Validity in time and the
// subject are the caller's to check: see check_acceptable().
Result<Invitation> open_token(std::string_view token,
                              const SignatureScheme& signatures = ed25519_signatures());

// Refuses a token that is not for `own_key` or has expired at `now`, each
// with its own message.
Status check_acceptable(const Invitation& invitation, const PublicKey& own_key, TimePoint now);

}  // namespace shoal::crypto
