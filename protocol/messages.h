// Every message agents exchange, as plain structs. The wire layout of each is
// documented in protocol/README.md; field order is the format.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <span>

#include "common/status.h"
#include "model/placement_spec.h"
#include "model/resources.h"
#include "model/workload.h"

namespace shoal::protocol {

inline constexpr uint32_t kProtocolVersion = 1;

// Values are wire numbers: never renumber, only append.
enum class MessageType : uint8_t {
  kHello = 1,
  kCapacity = 2,
  kCandidate = 3,
  kReady = 4,
  kReject = 5,
  kApprove = 6,
  kCancel = 7,
  kReleased = 8,
  kBound = 9,
  kStatus = 10,
  kStatusAck = 11,
  kRevoke = 12,
  kDelete = 13,
  kDigest = 14,
  kHoldings = 15,
  // Framing, not a message: several messages to one peer under one
  // signature (protocol/envelope.h). Never a Body.
  kBatch = 16,
  kLogRequest = 17,
  kLogChunk = 18,
  kPriority = 19,
};
inline constexpr uint8_t kMaxMessageType = 19;

constexpr std::string_view kMessageTypeNames[] = {
    "?",        "HELLO",    "CAPACITY",    "CANDIDATE", "READY",  "REJECT", "APPROVE",
    "CANCEL",   "RELEASED", "BOUND",       "STATUS",    "STATUS_ACK", "REVOKE", "DELETE",
    "DIGEST",   "HOLDINGS", "BATCH",       "LOG_REQUEST", "LOG_CHUNK", "PRIORITY"};
inline std::string_view message_type_name(MessageType type) {
  return kMessageTypeNames[static_cast<uint8_t>(type)];
}

// Announces who is talking and, implicitly, that the sender is up. Sent on
// start and with every heartbeat.
struct Hello {
  std::string cluster;
  std::string org;
  std::string endpoint;
};

// What one of the target's queues can still take for a namespace.
struct QueueCapacity {
  std::string queue;
  model::Resources free;
  model::Resources largest_free_node;
  // Of this queue and namespace here: bound, running or queued; plus what
  // waits in the target's backend that is not the agent's (Slurm's pending jobs).
  int64_t workloads = 0;
  friend bool operator==(const QueueCapacity&, const QueueCapacity&) = default;
};

// Aggregates for one namespace the receiver is invited into. Never node names.
struct NamespaceCapacity {
  std::string namespace_name;
  model::Resources free;               // sum over nodes, capped by the namespace's quota
  model::Resources largest_free_node;  // per resource, the largest free amount on one node
  std::vector<QueueCapacity> queues;   // every queue the target has; empty from older agents
  model::UsageCounts counts;           // the namespace's work here (weighted routing)
  friend bool operator==(const NamespaceCapacity&, const NamespaceCapacity&) = default;
};
// What a target says of itself as a whole (CAPACITY field 2), under its
// `disclose` rules. Absent from older agents.
struct ClusterFacts {
  // Labels and claims go out when they change, on a source's first HELLO of
  // a boot and once a minute; nullopt: as last sent.
  std::optional<model::Labels> labels;
  std::optional<model::Labels> claims;
  model::Resources allocatable;               // the sum over the cluster's nodes
  std::optional<model::UsageCounts> counts;   // cluster-wide, only if disclosed
  friend bool operator==(const ClusterFacts&, const ClusterFacts&) = default;
};
struct Capacity {
  std::vector<NamespaceCapacity> namespaces;
  std::optional<ClusterFacts> cluster;
};

// "Could you run this?" from a source to a target.
struct Candidate {
  std::string uid;
  uint64_t epoch = 0;
  model::WorkloadSpec spec;
  // Approved in advance (field 4, sent only when true): the source asked
  // this target alone and made it the epoch's winner before sending. A
  // target that holds room for it within the step that reads it binds at
  // once and answers BOUND, as if its READY had been APPROVEd; otherwise it
  // answers as to a plain CANDIDATE, and binds this epoch only on an APPROVE.
  bool approved = false;
};

struct Ready {
  std::string uid;
  uint64_t epoch = 0;
  double score = 0;  // the target's fit, 0..100
  // An offer that costs preemption (fields 4 and 5, absent when 0): the
  // target holds no room yet, and would stop `victims` running workloads
  // of priority at most `victim_priority` once (and only if) APPROVEd.
  uint32_t victims = 0;
  int32_t victim_priority = 0;
};

// Why a target refused a CANDIDATE: what the source decides by (REJECT
// field 4). Values are wire numbers: never renumber, only append. A code
// this build does not know reads as kOther.
enum class RejectCode : uint8_t {
  kOther = 0,           // none of these, or from a newer sender
  kNoCapacity,          // queued here: a READY may follow for this epoch
  kNotInvited,          // no invitation covers the namespace
  kInvitationNotValid,  // expired, revoked or not yet valid
  kQuotaExceeded,       // over the invitation's limits
  kNeverFits,           // would not fit even the idle cluster (queue, nodes, gang)
  kStaleEpoch,          // an older epoch than the target holds
  kAlreadyBound,        // the target runs a copy of an earlier epoch
  kReservationExpired,  // APPROVE came after the reservation's TTL
  kStartFailed,         // the cluster could not start the bound copy
  kDeletedAtTarget,     // the target's operator removed it
  kHoldsAnotherCopy,    // (source side) the target runs a sibling copy
  kBackendUnavailable,  // the target's cluster manager does not answer now
};
inline constexpr std::string_view kRejectCodeNames[] = {
    "Other",           "NoCapacity",      "NotInvited",   "InvitationNotValid", "QuotaExceeded",
    "NeverFits",       "StaleEpoch",      "AlreadyBound", "ReservationExpired", "StartFailed",
    "DeletedAtTarget", "HoldsAnotherCopy", "BackendUnavailable"};
inline std::string_view reject_code_name(RejectCode code) {
  return kRejectCodeNames[static_cast<size_t>(code)];
}

struct Reject {
  std::string uid;
  uint64_t epoch = 0;
  std::string reason;  // for people: e.g. "NoCapacity:NoNodeFits", "QuotaExceeded:cpu"
  RejectCode code = RejectCode::kOther;
};

// Why a copy ended the way it did at its target, beyond its exit code
// (STATUS field 10). Values are wire numbers: never renumber, only append.
enum class CopyCondition : uint8_t {
  kNone = 0,         // running, or ran to its own end (the exit code says how)
  kLeaseExpired,     // fenced: its source's lease ran out before the work did
  kDeletedAtTarget,  // the target's operator removed it
  kRevoked,          // evicted with the invitation it ran under
  kLostOnRestart,    // the target could not restore it after a restart
  kReleased,         // the target let it go for its source (a newer epoch, a delete)
  kOther,            // from a newer sender
  kStartFailed,      // the cluster could not launch it once it was bound
  kNodeFailed,       // its node failed (Slurm NODE_FAIL, BOOT_FAIL)
  kEvicted,          // the cluster ended it for its own reasons (scancel by another user)
  kPreempted,        // the cluster's scheduler took its room for other work
  kStartTimeout,     // bound but not started within its startTimeout: given up by its target
};
inline constexpr std::string_view kCopyConditionNames[] = {
    "None",          "LeaseExpired", "DeletedAtTarget", "Revoked",    "LostOnRestart", "Released",
    "Other",         "StartFailed",  "NodeFailed",      "Evicted",    "Preempted",
    "StartTimeout"};

// Whether a copy that ended so ended for a reason that was not its job's
// own: its source places it again whatever its restartPolicy, counting a
// disruption rather than a restart (docs/lifecycle.md, "Whose end is it").
// Not disruptions: the job's own exit code (kNone, which follows
// restartPolicy), a launch that failed (kStartFailed, placed again as a
// restart), and kReleased and kOther, which end nothing the source wanted.
constexpr bool is_disruption(CopyCondition condition) {
  switch (condition) {
    case CopyCondition::kLeaseExpired:
    case CopyCondition::kDeletedAtTarget:
    case CopyCondition::kRevoked:
    case CopyCondition::kLostOnRestart:
    case CopyCondition::kNodeFailed:
    case CopyCondition::kEvicted:
    case CopyCondition::kPreempted:
    case CopyCondition::kStartTimeout:
      return true;
    case CopyCondition::kNone:
    case CopyCondition::kReleased:
    case CopyCondition::kOther:
    case CopyCondition::kStartFailed:
      return false;
  }
  return false;
}

// What a sender that predates the code fields meant, from its text (the
// only place a reason's text is read): protocol version 1 without field 4
// of REJECT or field 10 of STATUS.
RejectCode legacy_reject_code(std::string_view reason);
CopyCondition legacy_copy_condition(std::string_view message);

struct Approve {
  std::string uid;
  uint64_t epoch = 0;
};

struct Cancel {
  std::string uid;
  uint64_t epoch = 0;
};

struct Released {
  std::string uid;
  uint64_t epoch = 0;
};

struct Bound {
  std::string uid;
  uint64_t epoch = 0;
  std::vector<std::string> nodes;
};

struct WorkloadStatus {
  std::string uid;
  uint64_t epoch = 0;
  uint64_t generation = 0;  // grows with every change at the target
  model::Phase phase = model::Phase::kBound;
  std::vector<std::string> nodes;
  int64_t started_at_ms = 0;   // 0: not started
  int64_t finished_at_ms = 0;  // 0: not finished
  int32_t exit_code = 0;
  std::string message;  // for people
  CopyCondition condition = CopyCondition::kNone;
};

struct StatusAck {
  std::string uid;
  uint64_t epoch = 0;
  uint64_t generation = 0;
};

// The target withdrew an invitation it issued to the recipient; `evict`:
// the recipient's running workloads there are being stopped too.
struct Revoke {
  std::string invitation_id;
  bool evict = false;
};

// The source deleted the workload: stop and release whatever of it the
// target holds or runs, at this epoch or older. Answered with RELEASED.
struct Delete {
  std::string uid;
  uint64_t epoch = 0;
};

// One copy in a reconciliation digest, with the workload's priority as
// the source has it now (none from a sender that predates it): a PRIORITY
// that was lost is made good by the next digest.
struct CopyRef {
  std::string uid;
  uint64_t epoch = 0;
  std::optional<int32_t> priority;
  friend bool operator==(const CopyRef&, const CopyRef&) = default;
};

// Source to target, every lease/4 (at most gcInterval) and on reconnect: the
// copies the source believes the target holds for it (it is their epoch's
// winner), and a renewed lease. The target may keep the source's work
// running until `sent_at + lease_ms` by the envelope's clock; 0: no fencing.
// Answered with HOLDINGS.
struct Digest {
  uint64_t lease_ms = 0;
  std::vector<CopyRef> copies;
};

// One copy a target holds for a source.
struct HeldCopy {
  std::string uid;
  uint64_t epoch = 0;
  model::Phase phase = model::Phase::kBound;  // Bound, Running, Succeeded or Failed
  friend bool operator==(const HeldCopy&, const HeldCopy&) = default;
};

// Target to source, in answer to DIGEST: every copy it holds for the source
// beyond a bare reservation. The source decides what each mismatch means
// (agent/core/source/copies.cc: reconcile).
struct Holdings {
  std::vector<HeldCopy> copies;
};

// The most output one LOG_CHUNK carries: a follower asks again for more.
inline constexpr uint32_t kMaxLogChunkBytes = 64 << 10;

// Source to target: a piece of one replica's output of a copy the target
// runs (or ran) for the sender, and for no one else. Answered with
// LOG_CHUNK; neither side stores anything, and a lost one is asked again.
struct LogRequest {
  uint64_t request_id = 0;  // the sender's, echoed in the answer
  std::string uid;
  uint64_t epoch = 0;
  int32_t replica = 0;
  int64_t offset = 0;  // bytes into the output; < 0: that many before its end
  uint32_t max_bytes = kMaxLogChunkBytes;  // the target sends at most kMaxLogChunkBytes
};

// Target to source, in answer to LOG_REQUEST: the bytes, or why there are none.
struct LogChunk {
  uint64_t request_id = 0;
  std::string error_code;  // "" on success, else an ErrorCode name (common/status.h)
  std::string error;       // for people
  std::string data;        // raw bytes (MessagePack bin)
  int64_t offset = 0;      // where `data` starts in the output
  int64_t next_offset = 0; // where to ask next
  bool finished = false;   // the replica has ended and `data` reaches its end
  // The target's cluster is reading the output now (a pod's, from its API
  // server): `data` is empty, ask again shortly. Appended: older senders
  // omit it (false).
  bool pending = false;
};

// Source to target: the workload's priority changed after submit
// (`shoalctl patch`). The target applies it to what it queues, holds or
// runs of `uid` at this epoch or older. Not answered: DIGEST repeats the
// priority of every bound copy, and a queued candidate's retries carry it.
struct Priority {
  std::string uid;
  uint64_t epoch = 0;
  int32_t priority = 0;
};

// Alternatives in wire-number order, BATCH (framing) skipped: type_of maps.
using Body = std::variant<Hello, Capacity, Candidate, Ready, Reject, Approve, Cancel, Released,
                          Bound, WorkloadStatus, StatusAck, Revoke, Delete, Digest, Holdings,
                          LogRequest, LogChunk, Priority>;

MessageType type_of(const Body& body);

std::vector<uint8_t> encode_body(const Body& body);
// Never throws; unknown types and malformed bodies are Corrupt errors that
// name the field.
Result<Body> decode_body(MessageType type, std::span<const uint8_t> bytes);

}  // namespace shoal::protocol
