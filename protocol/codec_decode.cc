// Decoding of message bodies (codec.cc encodes them): each message's
// fields read in wire order; a later version's extra trailing fields are
// ignored, an older one's missing optional fields take their defaults (or
// are derived, as legacy_reject_code does), and the first bad field fails
// the message, named.
#include "common/msgpack_io.h"
#include "crypto/id_card.h"
#include "protocol/messages.h"

namespace shoal::protocol {
namespace {

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
  if (r.has_more()) {
    uint8_t policy = r.integer<uint8_t>("preemptionPolicy");
    if (r.ok() && policy >= std::size(model::kPreemptionPolicyNames)) {
      r.fail("preemptionPolicy", "expected 0 (PreemptLowerPriority) or 1 (Never)");
    }
    s.preemption_policy = static_cast<model::PreemptionPolicy>(policy);
  }
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

// APPROVE, CANCEL, RELEASED and DELETE: a uid and the epoch it is about.
template <typename UidEpoch>
void read_uid_epoch(ArrayReader& r, UidEpoch& m) {
  m.uid = r.string("uid");
  m.epoch = r.integer<uint64_t>("epoch");
}

void read(ArrayReader& r, Hello& m) {
  m.cluster = r.string("cluster");
  m.org = r.string("org");
  m.endpoint = r.string("endpoint");
  if (r.ok()) {
    Status fields = crypto::validate_card_fields(m.cluster, m.org, m.endpoint, "HELLO");
    if (!fields.is_ok()) r.fail("", fields.message());
  }
}

void read(ArrayReader& r, Capacity& m) {
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
}

void read(ArrayReader& r, Candidate& m) {
  m.uid = r.string("uid");
  m.epoch = r.integer<uint64_t>("epoch");
  m.spec = read_spec(r);
  if (r.has_more()) m.approved = r.boolean("approved");  // field 4, newer: older agents omit it
}

void read(ArrayReader& r, Ready& m) {
  m.uid = r.string("uid");
  m.epoch = r.integer<uint64_t>("epoch");
  m.score = r.real("score");
  if (r.has_more()) {
    m.victims = r.integer<uint32_t>("victims");
    m.victim_priority = r.integer<int32_t>("victimPriority");
  }
}

void read(ArrayReader& r, Reject& m) {
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
}

void read(ArrayReader& r, Approve& m) { read_uid_epoch(r, m); }

void read(ArrayReader& r, Cancel& m) { read_uid_epoch(r, m); }

void read(ArrayReader& r, Released& m) { read_uid_epoch(r, m); }

void read(ArrayReader& r, Bound& m) {
  m.uid = r.string("uid");
  m.epoch = r.integer<uint64_t>("epoch");
  m.nodes = r.strings("nodes");
}

void read(ArrayReader& r, WorkloadStatus& m) {
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
}

void read(ArrayReader& r, StatusAck& m) {
  m.uid = r.string("uid");
  m.epoch = r.integer<uint64_t>("epoch");
  m.generation = r.integer<uint64_t>("generation");
}

void read(ArrayReader& r, Delete& m) { read_uid_epoch(r, m); }

void read(ArrayReader& r, Revoke& m) {
  m.invitation_id = r.string("invitationId");
  m.evict = r.boolean("evict");
}

void read(ArrayReader& r, Digest& m) {
  m.lease_ms = r.integer<uint64_t>("leaseMs");
  m.copies = read_list<CopyRef>(r, "copies", "copy", [](ArrayReader& item) {
    CopyRef copy;
    copy.uid = item.string("uid");
    copy.epoch = item.integer<uint64_t>("epoch");
    if (item.has_more()) copy.priority = item.integer<int32_t>("priority");
    return copy;
  });
}

void read(ArrayReader& r, Priority& m) {
  m.uid = r.string("uid");
  m.epoch = r.integer<uint64_t>("epoch");
  m.priority = r.integer<int32_t>("priority");
}

void read(ArrayReader& r, Holdings& m) {
  m.copies = read_list<HeldCopy>(r, "copies", "copy", [](ArrayReader& item) {
    HeldCopy copy;
    copy.uid = item.string("uid");
    copy.epoch = item.integer<uint64_t>("epoch");
    uint8_t phase = item.integer<uint8_t>("phase");
    if (item.ok() && phase >= std::size(model::kPhaseNames)) item.fail("phase", "unknown phase");
    copy.phase = static_cast<model::Phase>(phase);
    return copy;
  });
}

void read(ArrayReader& r, LogRequest& m) {
  m.request_id = r.integer<uint64_t>("requestId");
  m.uid = r.string("uid");
  m.epoch = r.integer<uint64_t>("epoch");
  m.replica = r.integer<int32_t>("replica");
  m.offset = r.integer<int64_t>("offset");
  m.max_bytes = r.integer<uint32_t>("maxBytes");
  if (r.ok() && m.replica < 0) r.fail("replica", "expected a replica index >= 0");
}

void read(ArrayReader& r, LogChunk& m) {
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
}

template <typename T>
Result<Body> read_as(ArrayReader& r) {
  T message;
  read(r, message);
  if (!r.ok()) return r.status();
  return Body(std::move(message));
}

Result<Body> decode(MessageType type, ArrayReader& r) {
  switch (type) {
    case MessageType::kHello:
      return read_as<Hello>(r);
    case MessageType::kCapacity:
      return read_as<Capacity>(r);
    case MessageType::kCandidate:
      return read_as<Candidate>(r);
    case MessageType::kReady:
      return read_as<Ready>(r);
    case MessageType::kReject:
      return read_as<Reject>(r);
    case MessageType::kApprove:
      return read_as<Approve>(r);
    case MessageType::kCancel:
      return read_as<Cancel>(r);
    case MessageType::kReleased:
      return read_as<Released>(r);
    case MessageType::kBound:
      return read_as<Bound>(r);
    case MessageType::kStatus:
      return read_as<WorkloadStatus>(r);
    case MessageType::kStatusAck:
      return read_as<StatusAck>(r);
    case MessageType::kDelete:
      return read_as<Delete>(r);
    case MessageType::kRevoke:
      return read_as<Revoke>(r);
    case MessageType::kDigest:
      return read_as<Digest>(r);
    case MessageType::kPriority:
      return read_as<Priority>(r);
    case MessageType::kHoldings:
      return read_as<Holdings>(r);
    case MessageType::kLogRequest:
      return read_as<LogRequest>(r);
    case MessageType::kLogChunk:
      return read_as<LogChunk>(r);
    case MessageType::kBatch:
      break;  // refused by decode_body
  }
  return corrupt("message type " + std::to_string(static_cast<int>(type)) + ": unknown");
}

}  // namespace

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

}  // namespace shoal::protocol
