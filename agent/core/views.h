// What the agent shows of itself (shoalctl status, peers, invite list):
// plain values, built on request, owned by the caller.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/histogram.h"
#include "model/quota.h"
#include "common/time.h"
#include "crypto/invitation.h"
#include "model/placement_spec.h"
#include "model/resources.h"
#include "protocol/envelope.h"
#include "protocol/messages.h"
#include "store/records.h"

namespace shoal::core {

// What `invite create` asks for; unset fields take the agent's defaults.
struct InvitationOptions {
  std::vector<std::string> namespaces;
  crypto::InvitationLimits limits;
  std::optional<Duration> lifetime;  // default: AgentConfig::invitation_lifetime
  bool never_expires = false;        // explicit `--expires never`
  std::optional<TimePoint> not_before;
};

// A federation-wide quota, what its namespace holds now, and how many of
// its workloads wait for it.
struct QuotaView {
  model::QuotaSpec quota;
  model::QuotaUsage held;
  size_t waiting = 0;
};

// Where an invitation stands now. The names are also REJECT reason codes.
enum class InvitationState { kActive, kNotYetValid, kExpired, kRevoked, kReplaced };
inline constexpr std::string_view kInvitationStateNames[] = {"Active", "NotYetValid", "Expired",
                                                             "Revoked", "Replaced"};
inline std::string invitation_state_name(InvitationState state) {
  return std::string(kInvitationStateNames[static_cast<int>(state)]);
}

// Where the relationship with a peer stands now, as `shoalctl peers` shows it.
enum class PeerState { kConnecting, kActive, kUnreachable, kExpired, kRevoked };
inline constexpr std::string_view kPeerStateNames[] = {"Connecting", "Active", "Unreachable",
                                                       "Expired", "Revoked"};
inline std::string peer_state_name(PeerState state) {
  return std::string(kPeerStateNames[static_cast<int>(state)]);
}

// Resources held under an invitation: reserved or bound, not finished.
struct InvitationUsage {
  model::Resources resources;
  int64_t workloads = 0;
};

struct InvitationView {
  std::string id;
  std::string direction;  // "issued" (we are the target) or "accepted" (we are the source)
  std::string peer;       // the other cluster's name
  std::string peer_id;
  std::vector<std::string> namespaces;
  InvitationState state = InvitationState::kActive;
  crypto::InvitationLimits limits;
  InvitationUsage usage;
  TimePoint not_before{};
  std::optional<TimePoint> expires;
};

struct PeerView {
  std::string id;
  std::string cluster;
  std::string org;
  std::string endpoint;
  PeerState state = PeerState::kConnecting;
  std::string reason;  // why the state is what it is, for humans
  std::optional<TimePoint> last_seen;
  // As their target: until when their lease lets us run their work (none:
  // they do not fence).
  std::optional<TimePoint> lease_until;
  std::vector<std::string> namespaces_offered;        // we invited them into these
  std::vector<std::string> namespaces_accepted;       // they invited us into these
  std::vector<protocol::NamespaceCapacity> capacity;  // what they advertise to us
  int workloads_placed = 0;                           // our workloads bound there now
};

// What forgetting a peer did (Operations::forget_peer).
struct PeerForgotten {
  std::string id;
  std::string cluster;
  std::vector<std::string> invitations_revoked;  // ids, issued and accepted
  int64_t hosted_stopped = 0;                    // its copies here, stopped (Failed: Revoked)
  int64_t copies_lost = 0;  // our workloads there, placed again at `placed_again_at`
  // When a lease renewed at the last moment has certainly ended (lease +
  // max clock skew from now); the moment itself when fencing is off.
  TimePoint placed_again_at{};
};

// One cluster as this agent's source role sees it (shoalctl get clusters,
// place --live): what the placement engine reads, and who it is.
struct LiveCluster {
  std::string peer_id;
  std::string org;
  std::string state;        // Self, or the peer's state (Active, Unreachable, ...)
  std::string unavailable;  // why it is no candidate now ("" when it is)
  model::ClusterCandidate candidate;  // its name is unique here
};

// How many top-level workloads this source holds, without listing them.
struct WorkloadCounts {
  size_t total = 0;
  std::array<size_t, std::size(model::kPhaseNames)> by_phase{};
  size_t started = 0;  // ever started (a start time is known)
  // What each tick walks (the rest are finished, wait for a slot, or are
  // parked: they wait in their targets' queues until their next round).
  size_t awake = 0;
  size_t parked = 0;
};

// One page of a listing of top-level workloads, in "namespace/name" order.
struct WorkloadPage {
  std::vector<store::WorkloadRecord> items;
  // The key to list after for the next page (opaque to users: `--continue`);
  // "" when this page ends the listing.
  std::string next;
};

struct AgentStats {
  std::array<uint64_t, protocol::kDropReasonCount> dropped{};
  uint64_t received = 0;  // messages (a BATCH counts as what it carries)
  uint64_t sent = 0;
  // Envelopes: signatures made, and signatures checked that held.
  uint64_t envelopes_sent = 0;
  uint64_t envelopes_received = 0;
  // By message type (index: protocol::MessageType): where the traffic goes.
  std::array<uint64_t, protocol::kMaxMessageType + 1> received_by_type{};
  std::array<uint64_t, protocol::kMaxMessageType + 1> sent_by_type{};
  std::map<std::string, uint64_t> rejected;  // CANDIDATEs this target refused, by reason code
  // As a source: REJECTs heard, by code name; workloads (or copies) bound,
  // and how long each first placement took from submission to BOUND.
  std::map<std::string, uint64_t> rejections_heard;
  uint64_t placements_bound = 0;
  // Of those, bound on a CANDIDATE approved in advance (no READY, no APPROVE).
  uint64_t placements_approved_in_advance = 0;
  Histogram placement_latency{latency_buckets_seconds()};
  // As a target: reservations released because no APPROVE came in time.
  uint64_t reservations_expired = 0;
  // As a target: approved offers that stopped running work, and how many
  // workloads they stopped in all.
  uint64_t preemptions = 0;
  uint64_t preempted_victims = 0;
};

}  // namespace shoal::core
