// MessagePack encoding of message bodies. Each body is a positional array;
// see protocol/README.md for the field numbers. Decoding: codec_decode.cc.
#include "common/msgpack_io.h"
#include "protocol/messages.h"

namespace shoal::protocol {
namespace {

using Packer = msgpack::packer<ByteWriter>;

void pack_resources(Packer& p, const model::Resources& r) {
  p.pack_array(3);
  p.pack(r.cpu_milli);
  p.pack(r.memory_bytes);
  p.pack(r.gpu);
}

void pack_spec(Packer& p, const model::WorkloadSpec& s) {
  // Trailing fields appended later are left out while they hold their
  // defaults: the image, then the preemption policy.
  bool with_policy = s.preemption_policy != model::PreemptionPolicy::kPreemptLowerPriority;
  p.pack_array(with_policy ? 20 : s.image.empty() ? 18 : 19);
  p.pack(s.namespace_name);
  p.pack(s.name);
  p.pack(s.labels);
  p.pack(s.queue);
  p.pack(s.priority);
  p.pack(s.replicas);
  pack_resources(p, s.resources);
  p.pack(static_cast<int64_t>(s.sim.duration.count()));  // sim backend only
  p.pack(s.sim.exit_code);                               // sim backend only
  p.pack_array(0);  // reserved for the placement spec
  p.pack(s.node_selector);
  p.pack(s.min_available);
  // Appended for real backends (protocol/README.md).
  p.pack(s.command);
  p.pack(s.args);
  p.pack(s.env);
  p.pack(s.working_dir);
  p.pack(static_cast<int64_t>(s.termination_grace.count()));
  p.pack(static_cast<int64_t>(s.start_timeout.count()));  // appended: 0 from older senders
  if (!s.image.empty() || with_policy) p.pack(s.image);  // appended: "" or absent: the cluster's image
  if (with_policy) p.pack(static_cast<uint8_t>(s.preemption_policy));  // appended
}

void pack_counts(Packer& p, const model::UsageCounts& c) {
  p.pack_array(4);
  p.pack(c.workloads);
  p.pack(c.cpu_milli);
  p.pack(c.memory_bytes);
  p.pack(c.queued);
}

void pack_optional_map(Packer& p, const std::optional<model::Labels>& map) {
  if (map) p.pack(*map);
  else p.pack_nil();
}

struct Encoder {
  Packer& p;
  void operator()(const Hello& m) {
    p.pack_array(3);
    p.pack(m.cluster);
    p.pack(m.org);
    p.pack(m.endpoint);
  }
  void operator()(const Capacity& m) {
    p.pack_array(m.cluster ? 2 : 1);
    p.pack_array(static_cast<uint32_t>(m.namespaces.size()));
    for (const auto& n : m.namespaces) {
      p.pack_array(5);
      p.pack(n.namespace_name);
      pack_resources(p, n.free);
      pack_resources(p, n.largest_free_node);
      p.pack_array(static_cast<uint32_t>(n.queues.size()));
      for (const auto& q : n.queues) {
        p.pack_array(4);
        p.pack(q.queue);
        pack_resources(p, q.free);
        pack_resources(p, q.largest_free_node);
        p.pack(q.workloads);
      }
      pack_counts(p, n.counts);
    }
    if (!m.cluster) return;
    p.pack_array(4);
    pack_optional_map(p, m.cluster->labels);
    pack_optional_map(p, m.cluster->claims);
    pack_resources(p, m.cluster->allocatable);
    if (m.cluster->counts) pack_counts(p, *m.cluster->counts);
    else p.pack_nil();
  }
  void operator()(const Candidate& m) {
    p.pack_array(m.approved ? 4 : 3);
    p.pack(m.uid);
    p.pack(m.epoch);
    pack_spec(p, m.spec);
    if (m.approved) p.pack(true);
  }
  void operator()(const Ready& m) {
    p.pack_array(m.victims > 0 ? 5 : 3);
    p.pack(m.uid);
    p.pack(m.epoch);
    p.pack(m.score);
    if (m.victims == 0) return;
    p.pack(m.victims);
    p.pack(m.victim_priority);
  }
  void operator()(const Reject& m) {
    p.pack_array(4);
    p.pack(m.uid);
    p.pack(m.epoch);
    p.pack(m.reason);
    p.pack(static_cast<uint8_t>(m.code));
  }
  template <typename UidEpoch>
  void uid_epoch(const UidEpoch& m) {
    p.pack_array(2);
    p.pack(m.uid);
    p.pack(m.epoch);
  }
  void operator()(const Approve& m) { uid_epoch(m); }
  void operator()(const Cancel& m) { uid_epoch(m); }
  void operator()(const Released& m) { uid_epoch(m); }
  void operator()(const Delete& m) { uid_epoch(m); }
  void operator()(const Bound& m) {
    p.pack_array(3);
    p.pack(m.uid);
    p.pack(m.epoch);
    p.pack(m.nodes);
  }
  void operator()(const WorkloadStatus& m) {
    p.pack_array(10);
    p.pack(m.uid);
    p.pack(m.epoch);
    p.pack(m.generation);
    p.pack(static_cast<uint8_t>(m.phase));
    p.pack(m.nodes);
    p.pack(m.started_at_ms);
    p.pack(m.finished_at_ms);
    p.pack(m.exit_code);
    p.pack(m.message);
    p.pack(static_cast<uint8_t>(m.condition));
  }
  void operator()(const StatusAck& m) {
    p.pack_array(3);
    p.pack(m.uid);
    p.pack(m.epoch);
    p.pack(m.generation);
  }
  void operator()(const Revoke& m) {
    p.pack_array(2);
    p.pack(m.invitation_id);
    p.pack(m.evict);
  }
  void operator()(const Digest& m) {
    p.pack_array(2);
    p.pack(m.lease_ms);
    p.pack_array(static_cast<uint32_t>(m.copies.size()));
    for (const auto& copy : m.copies) {
      p.pack_array(copy.priority ? 3 : 2);
      p.pack(copy.uid);
      p.pack(copy.epoch);
      if (copy.priority) p.pack(*copy.priority);  // appended: older senders omit it
    }
  }
  void operator()(const Holdings& m) {
    p.pack_array(1);
    p.pack_array(static_cast<uint32_t>(m.copies.size()));
    for (const auto& copy : m.copies) {
      p.pack_array(3);
      p.pack(copy.uid);
      p.pack(copy.epoch);
      p.pack(static_cast<uint8_t>(copy.phase));
    }
  }
  void operator()(const LogRequest& m) {
    p.pack_array(6);
    p.pack(m.request_id);
    p.pack(m.uid);
    p.pack(m.epoch);
    p.pack(m.replica);
    p.pack(m.offset);
    p.pack(m.max_bytes);
  }
  void operator()(const LogChunk& m) {
    p.pack_array(m.pending ? 8 : 7);
    p.pack(m.request_id);
    p.pack(m.error_code);
    p.pack(m.error);
    pack_binary(p, m.data);
    p.pack(m.offset);
    p.pack(m.next_offset);
    p.pack(m.finished);
    if (m.pending) p.pack(m.pending);
  }
  void operator()(const Priority& m) {
    p.pack_array(3);
    p.pack(m.uid);
    p.pack(m.epoch);
    p.pack(m.priority);
  }
};

}  // namespace

MessageType type_of(const Body& body) {
  // Body's alternatives follow the wire numbers, less BATCH's.
  auto number = static_cast<uint8_t>(body.index() + 1);
  if (number >= static_cast<uint8_t>(MessageType::kBatch)) ++number;
  return static_cast<MessageType>(number);
}

std::vector<uint8_t> encode_body(const Body& body) {
  ByteWriter buffer;
  Packer packer(buffer);
  std::visit(Encoder{packer}, body);
  return std::move(buffer.bytes);
}

RejectCode legacy_reject_code(std::string_view reason) {
  std::string_view code = reason.substr(0, reason.find(':'));
  if (code == "NoCapacity") return RejectCode::kNoCapacity;
  if (code == "NotInvited") return RejectCode::kNotInvited;
  if (code == "Expired" || code == "Revoked" || code == "NotYetValid")
    return RejectCode::kInvitationNotValid;
  if (code == "QuotaExceeded") return RejectCode::kQuotaExceeded;
  if (code == "NoSuchQueue" || code == "NoNodeFits" || code == "GangDoesNotFit")
    return RejectCode::kNeverFits;
  if (code == "StaleEpoch") return RejectCode::kStaleEpoch;
  if (code == "AlreadyBound") return RejectCode::kAlreadyBound;
  if (code == "ReservationExpired") return RejectCode::kReservationExpired;
  if (code == "StartFailed") return RejectCode::kStartFailed;
  if (code == "DeletedAtTarget") return RejectCode::kDeletedAtTarget;
  return RejectCode::kOther;
}

CopyCondition legacy_copy_condition(std::string_view message) {
  std::string_view code = message.substr(0, message.find(':'));
  if (code == "LeaseExpired") return CopyCondition::kLeaseExpired;
  if (code == "DeletedAtTarget") return CopyCondition::kDeletedAtTarget;
  if (code == "Revoked") return CopyCondition::kRevoked;
  if (code == "lost on restart") return CopyCondition::kLostOnRestart;
  if (code == "Released") return CopyCondition::kReleased;
  if (code == "StartTimeout") return CopyCondition::kStartTimeout;
  return CopyCondition::kNone;
}

}  // namespace shoal::protocol
