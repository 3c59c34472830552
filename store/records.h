// The rows shoal persists, as plain structs. Peer ids are base64url public
// keys; times are wall-clock milliseconds (0 = not set).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/time.h"
#include "model/workload.h"

namespace shoal::store {

struct PeerRecord {
  std::string id;
  std::string cluster;
  std::string org;
  std::string endpoint;
  uint64_t last_boot = 0;  // highest boot counter seen from this peer: older boots are replays
  uint64_t last_seq = 0;   // highest sequence number seen within last_boot: it and older ones
                           // are replays after a restart (in memory, a window takes late ones)
  // Lease fencing, when this agent is a target of the peer: the lease length
  // the peer asked for (0: no fencing) and when its current lease ends (wall
  // clock ms, by the peer's send time). Persisted so a restart keeps fencing.
  int64_t lease_ms = 0;
  int64_t lease_until_ms = 0;
  // When the operator forgot this peer (`shoalctl peer forget`; wall clock
  // ms), 0 while it is not: a forgotten peer is not listed, not heard, not
  // sent to, and its copies count as lost once a lease renewed at this time
  // has certainly ended. A new invitation either way clears it.
  int64_t forgotten_at_ms = 0;
};

enum class InvitationDirection : uint8_t { kIssued = 0, kAccepted = 1 };

struct InvitationRecord {
  std::string id;
  InvitationDirection direction = InvitationDirection::kIssued;
  std::string peer_id;  // issued: the source's key; accepted: the issuer's key
  std::string token;    // the signed token, the authority for everything else
  bool revoked = false;
  bool replaced = false;  // a newer invitation between the same two agents took over
};

// Source side: an epoch of a workload given up as lost (its target silent
// past workerLostTimeout, or no longer holding it) before its outcome was
// heard. Its lease has ended by then, so it no longer runs, but it may have
// run to success unheard.
struct LostCopy {
  std::string target;  // peer id
  uint64_t epoch = 0;
  bool succeeded = false;  // its outcome arrived late: Succeeded
  bool operator==(const LostCopy&) const = default;
};

// Source side: a workload this agent was asked to place.
struct WorkloadRecord {
  std::string uid;
  model::WorkloadSpec spec;
  model::Phase phase = model::Phase::kPending;
  uint64_t epoch = 0;        // placement attempt; bumped on every new round
  std::string winner;        // peer id of the target that won this epoch, or ""
  std::string cluster;       // the winner's cluster name
  std::vector<std::string> nodes;
  std::string reason;        // why it is not placed yet, or why it failed
  TimePoint created_at{};
  TimePoint updated_at{};
  int64_t started_at_ms = 0;
  int64_t finished_at_ms = 0;
  int32_t exit_code = 0;
  uint64_t status_generation = 0;  // newest STATUS generation mirrored
  bool deleting = false;           // `shoalctl delete` asked; remote copies are being stopped
  // External dispatcher: the clusters an operator nominated (nullopt: none yet).
  std::optional<std::vector<std::string>> nominations;
  int32_t restarts = 0;  // times re-placed after its own failure (restartPolicy), or a failed launch
  // Times re-placed after an end its job did not cause: its copy deleted or
  // evicted at the target, its node failed, lost on the target's restart,
  // fenced off, or given up with a silent target (protocol::is_disruption).
  int32_t disruptions = 0;
  TimePoint restart_at{};  // restartPolicy backoff: no new round before this, room or not
  // numberOfClusters > 1: the workload's row is a group (no rounds of its
  // own; phase and reason summarize its copies) and each copy is a row of
  // its own with the group's uid in `parent` and copy_index 1..N. Each copy
  // is placed like a workload on its own, never where a sibling runs.
  std::string parent;
  int32_t copy_index = 0;
  // Its epochs given up as lost whose outcome is not known yet, and, for a
  // copy of a group, those that turned out to have Succeeded. A late
  // outcome is the workload's if nothing replaced the lost copy yet; a
  // copy's siblings keep away from every target listed here, so no two
  // copies of a group ever run or succeed on one cluster.
  std::vector<LostCopy> lost_copies;
};

// Target side: what a source asked this cluster to hold or run.
enum class ReservationPhase : uint8_t { kReserved = 0, kBound, kRunning, kSucceeded, kFailed };
constexpr std::string_view kReservationPhaseNames[] = {"Reserved", "Bound", "Running",
                                                       "Succeeded", "Failed"};
inline bool holds_resources(ReservationPhase phase) {
  return phase == ReservationPhase::kReserved || phase == ReservationPhase::kBound ||
         phase == ReservationPhase::kRunning;
}

struct ReservationRecord {
  std::string source;  // peer id of the source (own id for local work)
  std::string uid;
  uint64_t epoch = 0;
  model::WorkloadSpec spec;
  ReservationPhase phase = ReservationPhase::kReserved;
  std::vector<std::string> nodes;  // one per replica
  TimePoint expires_at{};          // for kReserved only
  uint64_t generation = 0;         // bumped on every status change
  uint64_t acked_generation = 0;   // newest generation the source acknowledged
  int64_t started_at_ms = 0;
  int64_t finished_at_ms = 0;
  int32_t exit_code = 0;
  std::string message;    // for people
  uint8_t condition = 0;  // why it ended, beyond the exit code: a protocol::CopyCondition
};

// Target side, append-only: one row per copy that was bound here, known by
// (source, uid, started_at) since adoption moves a running copy to a newer
// epoch; from the moment it was bound until it stopped for any reason.
// Unlike reservations (collected once the source acknowledged them) and
// events (truncated), runs outlive the work, so that what ran where and
// when can be audited afterwards; the chaos checker proves exactly-once from
// them. Rows finished more than kRunHistory ago are pruned.
struct RunRecord {
  std::string source;
  std::string uid;
  uint64_t epoch = 0;  // the newest it ran under
  std::string namespace_name;
  std::string name;
  model::Resources per_replica;
  std::vector<std::string> nodes;  // one per replica
  int64_t started_at_ms = 0;       // bound (the cluster starts it then)
  int64_t finished_at_ms = 0;      // 0 while it holds its nodes
  std::string phase;               // Bound, Running, Succeeded or Failed
  std::string message;
};

struct EventRecord {
  std::string subject;  // a workload uid, or "peer/<id>"
  TimePoint at{};
  std::string text;
};

}  // namespace shoal::store
