// MessagePack encoding of message bodies. Each body is a positional array;
// see protocol/README.md for the field numbers.
#include "common/msgpack_io.h"
#include "crypto/id_card.h"
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

model::Resources read_resources(ArrayReader& outer, std::string_view field) {
  ArrayReader r = outer.nested(field);
  model::Resources out;
  out.cpu_milli = r.integer<int64_t>("cpu");
  out.memory_bytes = r.integer<int64_t>("memory");
  out.gpu = r.integer<int64_t>("gpu");
  if (r.ok() && (out.cpu_milli < 0 || out.memory_bytes < 0 || out.gpu < 0)) {
    r.fail("", "negative resources");
  }
  outer.adopt(r);
  return out;
}

void pack_spec(Packer& p, const model::WorkloadSpec& s) {
  p.pack_array(s.image.empty() ? 18 : 19);
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
  if (!s.image.empty()) p.pack(s.image);  // appended: absent means the cluster's image
}

model::WorkloadSpec read_spec(ArrayReader& outer) {
  ArrayReader r = outer.nested("spec");
  model::WorkloadSpec s;
  s.namespace_name = r.string("namespace");
  s.name = r.string("name");
  s.labels = r.string_map("labels");
  s.queue = r.string("queue");
  s.priority = r.integer<int32_t>("priority");
  s.replicas = r.integer<int32_t>("replicas");
  s.resources = read_resources(r, "resources");
  s.sim.duration = Duration(r.integer<int64_t>("duration"));
  s.sim.exit_code = r.integer<int32_t>("exitCode");
  r.next("placement");
  if (r.ok() && !r.at_end()) {
    s.node_selector = r.string_map("nodeSelector");
    s.min_available = r.integer<int32_t>("minAvailable");
  }
  if (r.has_more()) {
    s.command = r.strings("command");
    s.args = r.strings("args");
    s.env = r.string_map("env");
    s.working_dir = r.string("workingDir");
    s.termination_grace = Duration(r.integer<int64_t>("terminationGracePeriod"));
  }
  if (r.has_more()) s.start_timeout = Duration(r.integer<int64_t>("startTimeout"));
  if (r.has_more()) s.image = r.string("image");
  if (r.ok()) {
    if (s.replicas < 1) r.fail("replicas", "expected at least 1");
    else if (s.min_available < 0 || s.min_available > s.replicas) r.fail("minAvailable", "expected 0..replicas");
    else if (s.sim.duration.count() < 0) r.fail("duration", "expected a non-negative duration");
    else if (s.termination_grace.count() < 0) r.fail("terminationGracePeriod", "expected a non-negative duration");
    else if (s.start_timeout.count() < 0) r.fail("startTimeout", "expected a non-negative duration");
    else if (!model::validate_name(s.namespace_name, "namespace").is_ok()) r.fail("namespace", "invalid name");
    else if (!model::validate_name(s.name, "name").is_ok()) r.fail("name", "invalid name");
    else if (!model::validate_name(s.queue, "queue").is_ok()) r.fail("queue", "invalid name");
    else if (!s.image.empty() && !model::validate_image(s.image, "image").is_ok()) r.fail("image", "invalid image reference");
  }
  outer.adopt(r);
  return s;
}

void pack_counts(Packer& p, const model::UsageCounts& c) {
  p.pack_array(4);
  p.pack(c.workloads);
  p.pack(c.cpu_milli);
  p.pack(c.memory_bytes);
  p.pack(c.queued);
}

model::UsageCounts read_counts(ArrayReader& outer, std::string_view field) {
  ArrayReader r = outer.nested(field);
  model::UsageCounts out;
  out.workloads = r.integer<int64_t>("workloads");
  out.cpu_milli = r.integer<int64_t>("cpu");
  out.memory_bytes = r.integer<int64_t>("memory");
  out.queued = r.integer<int64_t>("queued");
  if (r.ok() && (out.workloads < 0 || out.cpu_milli < 0 || out.memory_bytes < 0 || out.queued < 0)) {
    r.fail("", "negative counts");
  }
  outer.adopt(r);
  return out;
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
    p.pack_array(3);
    p.pack(m.uid);
    p.pack(m.epoch);
    pack_spec(p, m.spec);
  }
  void operator()(const Ready& m) {
    p.pack_array(3);
    p.pack(m.uid);
    p.pack(m.epoch);
    p.pack(m.score);
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

// A nested array of `item` arrays, each read by `read_item`; any failure
// inside becomes r's, naming the field.
template <typename T, typename ReadItem>
std::vector<T> read_list(ArrayReader& r, const char* list_field, const char* item_field,
                         ReadItem read_item) {
  std::vector<T> out;
  ArrayReader list = r.nested(list_field);
  while (list.ok() && !list.at_end()) {
    ArrayReader item = list.nested(item_field);
    T value = read_item(item);
    list.adopt(item);
    out.push_back(std::move(value));
  }
  r.adopt(list);
  return out;
}

template <typename T>
Result<Body> finish(ArrayReader& r, T message) {
  if (!r.ok()) return r.status();
  return Body(std::move(message));
}

Result<Body> decode(MessageType type, ArrayReader& r) {
  switch (type) {
    case MessageType::kHello: {
      Hello m;
      m.cluster = r.string("cluster");
      m.org = r.string("org");
      m.endpoint = r.string("endpoint");
      if (r.ok()) {
        Status fields = crypto::validate_card_fields(m.cluster, m.org, m.endpoint, "HELLO");
        if (!fields.is_ok()) r.fail("", fields.message());
      }
      return finish(r, std::move(m));
    }
    case MessageType::kCapacity: {
      Capacity m;
      m.namespaces = read_list<NamespaceCapacity>(r, "namespaces", "item", [](ArrayReader& item) {
        NamespaceCapacity n;
        n.namespace_name = item.string("namespace");
        n.free = read_resources(item, "free");
        n.largest_free_node = read_resources(item, "largestFreeNode");
        if (item.ok() && !item.at_end()) {  // field 4 is newer: older agents omit it
          n.queues = read_list<QueueCapacity>(item, "queues", "queue", [](ArrayReader& entry) {
            QueueCapacity q;
            q.queue = entry.string("name");
            q.free = read_resources(entry, "free");
            q.largest_free_node = read_resources(entry, "largestFreeNode");
            if (entry.has_more()) q.workloads = entry.integer<int64_t>("workloads");
            if (entry.ok() && q.workloads < 0) entry.fail("workloads", "expected a count >= 0");
            return q;
          });
        }
        if (item.has_more()) n.counts = read_counts(item, "counts");  // field 5, newer still
        return n;
      });
      if (r.has_more()) {  // field 2: labels, claims, allocatable, cluster counts
        ArrayReader facts = r.nested("cluster");
        ClusterFacts cluster;
        if (!facts.skip_nil()) cluster.labels = facts.string_map("labels");
        if (!facts.skip_nil()) cluster.claims = facts.string_map("claims");
        cluster.allocatable = read_resources(facts, "allocatable");
        if (!facts.skip_nil()) cluster.counts = read_counts(facts, "counts");
        r.adopt(facts);
        m.cluster = std::move(cluster);
      }
      return finish(r, std::move(m));
    }
    case MessageType::kCandidate: {
      Candidate m;
      m.uid = r.string("uid");
      m.epoch = r.integer<uint64_t>("epoch");
      m.spec = read_spec(r);
      return finish(r, std::move(m));
    }
    case MessageType::kReady: {
      Ready m;
      m.uid = r.string("uid");
      m.epoch = r.integer<uint64_t>("epoch");
      m.score = r.real("score");
      return finish(r, std::move(m));
    }
    case MessageType::kReject: {
      Reject m;
      m.uid = r.string("uid");
      m.epoch = r.integer<uint64_t>("epoch");
      m.reason = r.string("reason");
      if (r.has_more()) {
        uint8_t code = r.integer<uint8_t>("code");
        m.code =
            code < std::size(kRejectCodeNames) ? static_cast<RejectCode>(code) : RejectCode::kOther;
      } else {
        m.code = legacy_reject_code(m.reason);
      }
      return finish(r, std::move(m));
    }
    case MessageType::kApprove: {
      Approve m{r.string("uid"), 0};
      m.epoch = r.integer<uint64_t>("epoch");
      return finish(r, std::move(m));
    }
    case MessageType::kCancel: {
      Cancel m{r.string("uid"), 0};
      m.epoch = r.integer<uint64_t>("epoch");
      return finish(r, std::move(m));
    }
    case MessageType::kReleased: {
      Released m{r.string("uid"), 0};
      m.epoch = r.integer<uint64_t>("epoch");
      return finish(r, std::move(m));
    }
    case MessageType::kBound: {
      Bound m;
      m.uid = r.string("uid");
      m.epoch = r.integer<uint64_t>("epoch");
      m.nodes = r.strings("nodes");
      return finish(r, std::move(m));
    }
    case MessageType::kStatus: {
      WorkloadStatus m;
      m.uid = r.string("uid");
      m.epoch = r.integer<uint64_t>("epoch");
      m.generation = r.integer<uint64_t>("generation");
      uint8_t phase = r.integer<uint8_t>("phase");
      if (r.ok() && phase >= std::size(model::kPhaseNames)) r.fail("phase", "unknown phase");
      m.phase = static_cast<model::Phase>(phase);
      m.nodes = r.strings("nodes");
      m.started_at_ms = r.integer<int64_t>("startedAt");
      m.finished_at_ms = r.integer<int64_t>("finishedAt");
      m.exit_code = r.integer<int32_t>("exitCode");
      m.message = r.string("message");
      if (r.has_more()) {
        uint8_t condition = r.integer<uint8_t>("condition");
        m.condition = condition < std::size(kCopyConditionNames)
                          ? static_cast<CopyCondition>(condition)
                          : CopyCondition::kOther;
      } else {
        m.condition = legacy_copy_condition(m.message);
      }
      return finish(r, std::move(m));
    }
    case MessageType::kStatusAck: {
      StatusAck m;
      m.uid = r.string("uid");
      m.epoch = r.integer<uint64_t>("epoch");
      m.generation = r.integer<uint64_t>("generation");
      return finish(r, std::move(m));
    }
    case MessageType::kDelete: {
      Delete m{r.string("uid"), 0};
      m.epoch = r.integer<uint64_t>("epoch");
      return finish(r, std::move(m));
    }
    case MessageType::kRevoke: {
      Revoke m;
      m.invitation_id = r.string("invitationId");
      m.evict = r.boolean("evict");
      return finish(r, std::move(m));
    }
    case MessageType::kDigest: {
      Digest m;
      m.lease_ms = r.integer<uint64_t>("leaseMs");
      m.copies = read_list<CopyRef>(r, "copies", "copy", [](ArrayReader& item) {
        CopyRef copy;
        copy.uid = item.string("uid");
        copy.epoch = item.integer<uint64_t>("epoch");
        if (item.has_more()) copy.priority = item.integer<int32_t>("priority");
        return copy;
      });
      return finish(r, std::move(m));
    }
    case MessageType::kPriority: {
      Priority m;
      m.uid = r.string("uid");
      m.epoch = r.integer<uint64_t>("epoch");
      m.priority = r.integer<int32_t>("priority");
      return finish(r, std::move(m));
    }
    case MessageType::kHoldings: {
      Holdings m;
      m.copies = read_list<HeldCopy>(r, "copies", "copy", [](ArrayReader& item) {
        HeldCopy copy;
        copy.uid = item.string("uid");
        copy.epoch = item.integer<uint64_t>("epoch");
        uint8_t phase = item.integer<uint8_t>("phase");
        if (item.ok() && phase >= std::size(model::kPhaseNames)) item.fail("phase", "unknown phase");
        copy.phase = static_cast<model::Phase>(phase);
        return copy;
      });
      return finish(r, std::move(m));
    }
    case MessageType::kLogRequest: {
      LogRequest m;
      m.request_id = r.integer<uint64_t>("requestId");
      m.uid = r.string("uid");
      m.epoch = r.integer<uint64_t>("epoch");
      m.replica = r.integer<int32_t>("replica");
      m.offset = r.integer<int64_t>("offset");
      m.max_bytes = r.integer<uint32_t>("maxBytes");
      if (r.ok() && m.replica < 0) r.fail("replica", "expected a replica index >= 0");
      return finish(r, std::move(m));
    }
    case MessageType::kLogChunk: {
      LogChunk m;
      m.request_id = r.integer<uint64_t>("requestId");
      m.error_code = r.string("errorCode");
      m.error = r.string("error");
      m.data = r.binary("data");
      m.offset = r.integer<int64_t>("offset");
      m.next_offset = r.integer<int64_t>("nextOffset");
      m.finished = r.boolean("finished");
      if (r.has_more()) m.pending = r.boolean("pending");
      if (r.ok() && m.pending && (!m.data.empty() || m.finished)) {
        r.fail("pending", "expected no data and not finished while pending");
      } else if (r.ok() && m.data.size() > kMaxLogChunkBytes) {
        r.fail("data", "expected at most " + std::to_string(kMaxLogChunkBytes) + " bytes");
      } else if (r.ok() && (m.offset < 0 || m.next_offset < m.offset)) {
        r.fail("nextOffset", "expected 0 <= offset <= nextOffset");
      }
      return finish(r, std::move(m));
    }
    case MessageType::kBatch:
      break;  // refused by decode_body
  }
  return corrupt("message type " + std::to_string(static_cast<int>(type)) + ": unknown");
}

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

Result<Body> decode_body(MessageType type, std::span<const uint8_t> bytes) {
  uint8_t number = static_cast<uint8_t>(type);
  if (number == 0 || number > kMaxMessageType) {
    return corrupt("message type " + std::to_string(number) + ": unknown");
  }
  if (type == MessageType::kBatch) {
    return corrupt("message type BATCH: framing for other messages (decode_batch), not a body");
  }
  std::string what(message_type_name(type));
  SHOAL_ASSIGN_OR_RETURN(Unpacked handle, unpack_one(bytes, what));
  ArrayReader reader(handle.get(), what);
  // Later versions may append fields; extra trailing fields are ignored.
  return decode(type, reader);
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
