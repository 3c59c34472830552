#include <gtest/gtest.h>

#include <optional>

#include "common/msgpack_io.h"
#include "protocol/envelope.h"
#include "protocol/messages.h"

namespace shoal::protocol {
namespace {

model::WorkloadSpec sample_spec() {
  model::WorkloadSpec spec;
  spec.namespace_name = "ml";
  spec.name = "train";
  spec.labels = {{"team", "ml"}};
  spec.queue = "gpu";
  spec.priority = -3;
  spec.replicas = 2;
  spec.resources = {2500, int64_t{4} << 30, 1};
  spec.sim.duration = Duration(5000);
  spec.sim.exit_code = 7;
  spec.command = {"python3", "train.py"};
  spec.args = {"--epochs", "3"};
  spec.env = {{"SEED", "1"}};
  spec.working_dir = "out";
  spec.termination_grace = Duration(1500);
  spec.start_timeout = Duration(90000);
  spec.image = "ghcr.io/ml/train:3";
  return spec;
}

std::vector<Body> every_message() {
  return {
      Hello{"east", "acme", "tcp://127.0.0.1:7400"},
      Capacity{
          {{"default", {8000, 1024, 0}, {4000, 512, 0}, {{"q1", {8000, 1024, 0}, {4000, 512, 0}, 0}}, {}},
           {"ml", {1, 2, 3}, {1, 1, 1}, {}, {}}},
          std::nullopt},
      Capacity{{{"default", {8000, 1024, 0}, {4000, 512, 0}, {{"q1", {8000, 1024, 0}, {4000, 512, 0}, 3}},
                 {2, 500, 1024, 1}}},
               ClusterFacts{model::Labels{{"region", "us-east"}}, model::Labels{{"tier", "gold"}},
                            {32000, 1 << 30, 0}, model::UsageCounts{5, 2000, 4096, 2}}},
      Capacity{{}, ClusterFacts{std::nullopt, std::nullopt, {32000, 1 << 30, 0}, std::nullopt}},
      Candidate{"uid-1", 3, sample_spec()},
      Ready{"uid-1", 3, 87.5},
      Ready{"uid-1", 3, 12.5, 2, -7},  // an offer that costs preemption
      Reject{"uid-1", 3, "NoCapacity:NoNodeFits", RejectCode::kNoCapacity},
      Approve{"uid-1", 3},
      Cancel{"uid-1", 3},
      Released{"uid-1", 3},
      Bound{"uid-1", 3, {"node-0", "node-1"}},
      WorkloadStatus{"uid-1", 3, 4, model::Phase::kFailed, {"node-0"}, 10, 20, 7, "exited"},
      WorkloadStatus{"uid-1",
                     3,
                     5,
                     model::Phase::kFailed,
                     {"node-0"},
                     10,
                     20,
                     -1,
                     "LeaseExpired: no renewal",
                     CopyCondition::kLeaseExpired},
      StatusAck{"uid-1", 3, 4},
      Revoke{"inv-1", true},
      Delete{"uid-1", 3},
      Digest{120000, {{"uid-1", 3, 7}, {"uid-2", 9, -2}}},
      Digest{120000, {{"uid-1", 3, std::nullopt}}},  // from a sender before priorities
      Digest{0, {}},
      Holdings{{{"uid-1", 3, model::Phase::kRunning}, {"uid-9", 1, model::Phase::kSucceeded}}},
      LogRequest{7, "uid-1", 3, 2, -4096, 65536},
      LogChunk{7, "", "", std::string("out\0\xff put\n", 10), 100, 110, true},
      LogChunk{8, "NotFound", "no output for replica 2", "", 0, 0, false},
      LogChunk{9, "", "", "", 4096, 4096, false, true},  // pending: its cluster reads it now
      Priority{"uid-1", 3, -40},
  };
}

TEST(CodecTest, WireNumbersOfTheMessagesAfterBatchSkipIt) {
  EXPECT_EQ(type_of(Holdings{}), MessageType::kHoldings);
  EXPECT_EQ(type_of(Priority{}), MessageType::kPriority);
  EXPECT_EQ(message_type_name(MessageType::kPriority), "PRIORITY");
  EXPECT_EQ(type_of(LogRequest{}), MessageType::kLogRequest);
  EXPECT_EQ(static_cast<int>(type_of(LogChunk{})), 18);
  EXPECT_EQ(message_type_name(MessageType::kLogChunk), "LOG_CHUNK");
}

TEST(CodecTest, ALogChunkBeyondItsBoundOrWithOffsetsBackwardsIsRefusedNamingTheField) {
  LogChunk big{1, "", "", std::string(kMaxLogChunkBytes + 1, 'x'), 0, kMaxLogChunkBytes + 1, false};
  auto decoded = decode_body(MessageType::kLogChunk, encode_body(big));
  ASSERT_FALSE(decoded.is_ok());
  EXPECT_NE(decoded.status().message().find("data"), std::string::npos) << decoded.status().message();
  LogChunk backwards{1, "", "", "abc", 10, 5, false};
  decoded = decode_body(MessageType::kLogChunk, encode_body(backwards));
  ASSERT_FALSE(decoded.is_ok());
  EXPECT_NE(decoded.status().message().find("nextOffset"), std::string::npos) << decoded.status().message();
  LogChunk pending_with_data{1, "", "", "abc", 0, 3, false, true};
  decoded = decode_body(MessageType::kLogChunk, encode_body(pending_with_data));
  ASSERT_FALSE(decoded.is_ok());
  EXPECT_NE(decoded.status().message().find("pending"), std::string::npos) << decoded.status().message();
  LogRequest negative{1, "uid", 1, -1, 0, 10};
  decoded = decode_body(MessageType::kLogRequest, encode_body(negative));
  ASSERT_FALSE(decoded.is_ok());
  EXPECT_NE(decoded.status().message().find("replica"), std::string::npos) << decoded.status().message();
}

TEST(CodecTest, EveryMessageRoundTrips) {
  for (const Body& body : every_message()) {
    MessageType type = type_of(body);
    auto decoded = decode_body(type, encode_body(body));
    ASSERT_TRUE(decoded.is_ok()) << message_type_name(type) << ": " << decoded.status().message();
    // Re-encoding the decoded body gives the same bytes: nothing was lost.
    EXPECT_EQ(encode_body(*decoded), encode_body(body)) << message_type_name(type);
    EXPECT_EQ(type_of(*decoded), type);
  }
}

// An error deep inside a body names the whole way down to the field, so an
// operator reading the drop log knows which part of which message was bad.
TEST(CodecTest, ANestedErrorNamesItsWholePath) {
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> p(buffer);
  p.pack_array(1);
  p.pack_array(1);  // namespaces
  p.pack_array(4);  // one namespace
  p.pack(std::string("default"));
  for (int i = 0; i < 2; ++i) p.pack(std::vector<int64_t>{1000, 1024, 0});
  p.pack_array(1);  // its queues
  p.pack_array(3);  // one queue
  p.pack(std::string("batch"));
  p.pack(std::vector<int64_t>{1000, -1, 0});  // negative memory
  p.pack(std::vector<int64_t>{1000, 1024, 0});
  auto decoded = decode_body(MessageType::kCapacity, to_bytes(buffer));
  ASSERT_FALSE(decoded.is_ok());
  EXPECT_EQ(decoded.status().message(),
            "CAPACITY namespaces item queues queue free: negative resources");
}

// CAPACITY grew by appending: what an older agent sends reads
// with no labels or counts, and what a newer one may append is skipped.
TEST(CodecTest, CapacityReadsOlderAndNewerSenders) {
  msgpack::sbuffer older;
  msgpack::packer<msgpack::sbuffer> p(older);
  p.pack_array(1);
  p.pack_array(1);
  p.pack_array(3);
  p.pack(std::string("default"));
  for (int i = 0; i < 2; ++i) p.pack(std::vector<int64_t>{1000, 1024, 0});
  auto decoded = decode_body(MessageType::kCapacity, to_bytes(older));
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().message();
  const Capacity& old_capacity = std::get<Capacity>(*decoded);
  EXPECT_FALSE(old_capacity.cluster.has_value());
  EXPECT_EQ(old_capacity.namespaces.at(0).counts, model::UsageCounts{});

  msgpack::sbuffer newer;
  msgpack::packer<msgpack::sbuffer> q(newer);
  q.pack_array(3);  // a field 3 this build does not know
  q.pack_array(1);
  q.pack_array(6);  // namespace field 6, likewise
  q.pack(std::string("default"));
  for (int i = 0; i < 2; ++i) q.pack(std::vector<int64_t>{1000, 1024, 0});
  q.pack_array(0);
  q.pack(std::vector<int64_t>{1, 2, 3, 4});
  q.pack(std::string("from the future"));
  q.pack_array(5);
  q.pack(std::map<std::string, std::string>{{"zone", "z"}});
  q.pack_nil();
  q.pack(std::vector<int64_t>{8000, 1024, 0});
  q.pack_nil();
  q.pack(42);
  q.pack(true);
  decoded = decode_body(MessageType::kCapacity, to_bytes(newer));
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().message();
  const Capacity& new_capacity = std::get<Capacity>(*decoded);
  EXPECT_EQ(new_capacity.namespaces.at(0).counts, (model::UsageCounts{1, 2, 3, 4}));
  ASSERT_TRUE(new_capacity.cluster.has_value());
  EXPECT_EQ(new_capacity.cluster->labels, (model::Labels{{"zone", "z"}}));
  EXPECT_FALSE(new_capacity.cluster->claims.has_value()) << "nil: as last sent";
  EXPECT_FALSE(new_capacity.cluster->counts.has_value());
  EXPECT_EQ(new_capacity.cluster->allocatable.cpu_milli, 8000);
}

TEST(CodecTest, ASpecFromASenderBeforeExecFieldsReadsWithTheirDefaults) {
  msgpack::sbuffer older;
  msgpack::packer<msgpack::sbuffer> p(older);
  p.pack_array(3);  // CANDIDATE: uid, epoch, spec
  p.pack(std::string("u"));
  p.pack(1);
  p.pack_array(12);  // the spec's first twelve fields
  p.pack(std::string("default"));
  p.pack(std::string("w"));
  p.pack(std::map<std::string, std::string>{});
  p.pack(std::string("default"));
  p.pack(0);
  p.pack(1);
  p.pack(std::vector<int64_t>{1000, 1024, 0});
  p.pack(2000);
  p.pack(0);
  p.pack_array(0);
  p.pack(std::map<std::string, std::string>{});
  p.pack(0);
  auto decoded = decode_body(MessageType::kCandidate, to_bytes(older));
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().message();
  const model::WorkloadSpec& spec = std::get<Candidate>(*decoded).spec;
  EXPECT_EQ(spec.sim.duration, Duration(2000));
  EXPECT_TRUE(spec.command.empty());
  EXPECT_EQ(spec.termination_grace, model::kDefaultTerminationGrace);
  EXPECT_EQ(spec.start_timeout, Duration(0)) << "an older sender asks for no start timeout";
}

TEST(CodecTest, CandidateKeepsTheWholeSpec) {
  auto decoded = decode_body(MessageType::kCandidate, encode_body(Candidate{"u", 1, sample_spec()}));
  ASSERT_TRUE(decoded.is_ok());
  EXPECT_EQ(std::get<Candidate>(*decoded).spec, sample_spec());
  // The preemption policy follows the image, which is then sent even when
  // empty; a workload that keeps the defaults sends neither.
  model::WorkloadSpec polite = sample_spec();
  polite.image.clear();
  polite.preemption_policy = model::PreemptionPolicy::kNever;
  decoded = decode_body(MessageType::kCandidate, encode_body(Candidate{"u", 1, polite}));
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().message();
  EXPECT_EQ(std::get<Candidate>(*decoded).spec, polite);
}

// Field 4 goes only with an approval in advance: a plain CANDIDATE is the
// three fields older agents send and read, and reads as not approved.
TEST(CodecTest, ACandidateCarriesItsApprovalInAdvanceOnlyWhenGiven) {
  std::vector<uint8_t> plain = encode_body(Candidate{"u", 1, sample_spec()});
  std::vector<uint8_t> approved = encode_body(Candidate{"u", 1, sample_spec(), true});
  EXPECT_EQ(msgpack::unpack(reinterpret_cast<const char*>(plain.data()), plain.size()).get().via.array.size, 3u);
  EXPECT_EQ(msgpack::unpack(reinterpret_cast<const char*>(approved.data()), approved.size()).get().via.array.size,
            4u);
  auto decoded = decode_body(MessageType::kCandidate, plain);
  ASSERT_TRUE(decoded.is_ok());
  EXPECT_FALSE(std::get<Candidate>(*decoded).approved);
  decoded = decode_body(MessageType::kCandidate, approved);
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().message();
  EXPECT_TRUE(std::get<Candidate>(*decoded).approved);
  EXPECT_EQ(std::get<Candidate>(*decoded).spec, sample_spec());
  // Anything but a boolean there is named.
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> packer(buffer);
  msgpack::object_handle three = msgpack::unpack(reinterpret_cast<const char*>(plain.data()), plain.size());
  packer.pack_array(4);
  for (uint32_t i = 0; i < 3; ++i) packer.pack(three.get().via.array.ptr[i]);
  packer.pack(std::string("yes"));
  auto bad = decode_body(MessageType::kCandidate, to_bytes(buffer));
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("approved"), std::string::npos) << bad.status().message();
}

// A sender from before the code fields (REJECT field 4, STATUS field 10)
// is understood from its text, once, here; a code newer than this build
// reads as Other.
TEST(CodecTest, CodesAreReadFromOlderSendersTextAndNewerCodesAreOther) {
  auto pack_reject = [](const std::string& reason, std::optional<uint8_t> code) {
    msgpack::sbuffer buffer;
    msgpack::packer<msgpack::sbuffer> packer(buffer);
    packer.pack_array(code ? 4 : 3);
    packer.pack(std::string("uid"));
    packer.pack(uint64_t{1});
    packer.pack(reason);
    if (code) packer.pack(*code);
    return to_bytes(buffer);
  };
  auto code_of = [](const std::vector<uint8_t>& bytes) {
    auto decoded = decode_body(MessageType::kReject, bytes);
    EXPECT_TRUE(decoded.is_ok()) << decoded.status().message();
    return decoded.is_ok() ? std::get<Reject>(*decoded).code : RejectCode::kOther;
  };
  EXPECT_EQ(code_of(pack_reject("NoCapacity:QueueDeservedShareReached:q", std::nullopt)),
            RejectCode::kNoCapacity);
  EXPECT_EQ(code_of(pack_reject("AlreadyBound", std::nullopt)), RejectCode::kAlreadyBound);
  EXPECT_EQ(code_of(pack_reject("Revoked", std::nullopt)), RejectCode::kInvitationNotValid);
  EXPECT_EQ(code_of(pack_reject("QuotaExceeded:gpu", std::nullopt)), RejectCode::kQuotaExceeded);
  EXPECT_EQ(code_of(pack_reject("something new", std::nullopt)), RejectCode::kOther);
  // With a code, the text no longer matters.
  EXPECT_EQ(code_of(pack_reject("AlreadyBound", 1)), RejectCode::kNoCapacity);
  EXPECT_EQ(code_of(pack_reject("NoCapacity:x", 200)), RejectCode::kOther);

  WorkloadStatus old_status{
      "uid", 1, 2, model::Phase::kFailed, {}, 1, 2, -1, "LeaseExpired: no renewal from s"};
  // The version-1 layout: nine fields, no condition.
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> packer(buffer);
  packer.pack_array(9);
  packer.pack(old_status.uid);
  packer.pack(old_status.epoch);
  packer.pack(old_status.generation);
  packer.pack(static_cast<uint8_t>(old_status.phase));
  packer.pack(old_status.nodes);
  packer.pack(old_status.started_at_ms);
  packer.pack(old_status.finished_at_ms);
  packer.pack(old_status.exit_code);
  packer.pack(old_status.message);
  auto decoded = decode_body(MessageType::kStatus, to_bytes(buffer));
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().message();
  EXPECT_EQ(std::get<WorkloadStatus>(*decoded).condition, CopyCondition::kLeaseExpired);
}

TEST(CodecTest, HoldingsWithAnUnknownPhaseNamesTheField) {
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> packer(buffer);
  packer.pack_array(1);
  packer.pack_array(1);
  packer.pack_array(3);
  packer.pack(std::string("uid"));
  packer.pack(uint64_t{1});
  packer.pack(uint8_t{42});
  auto result = decode_body(MessageType::kHoldings, to_bytes(buffer));
  ASSERT_FALSE(result.is_ok());
  EXPECT_NE(result.status().message().find("phase"), std::string::npos) << result.status().message();
}

TEST(CodecTest, TextThatIsNotUtf8OrNamesThatAreNotNamesAreRefusedNamingTheField) {
  // A HELLO is a signed statement of the peer's name, org and address.
  auto hello = decode_body(MessageType::kHello, encode_body(Hello{"east", "org\xff", "tcp://h:1"}));
  ASSERT_FALSE(hello.is_ok());
  EXPECT_NE(hello.status().message().find("org"), std::string::npos) << hello.status().message();
  EXPECT_FALSE(decode_body(MessageType::kHello, encode_body(Hello{"East Side", "org", "tcp://h:1"})).is_ok());
  EXPECT_FALSE(decode_body(MessageType::kHello, encode_body(Hello{"east", "org", "tcp://h:1\n"})).is_ok());
  // A label value in a CANDIDATE's spec, and a reason in a REJECT.
  model::WorkloadSpec spec = sample_spec();
  spec.labels["team"] = "ml\xc3";
  auto candidate = decode_body(MessageType::kCandidate, encode_body(Candidate{"u", 1, spec}));
  ASSERT_FALSE(candidate.is_ok());
  EXPECT_NE(candidate.status().message().find("labels: expected UTF-8 text"), std::string::npos)
      << candidate.status().message();
  EXPECT_FALSE(decode_body(MessageType::kReject, encode_body(Reject{"u", 1, "\xed\xa0\x80"})).is_ok());
  spec = sample_spec();
  spec.queue = "Queue";
  EXPECT_FALSE(decode_body(MessageType::kCandidate, encode_body(Candidate{"u", 1, spec})).is_ok());
  spec = sample_spec();
  spec.image = "busybox; reboot";
  candidate = decode_body(MessageType::kCandidate, encode_body(Candidate{"u", 1, spec}));
  ASSERT_FALSE(candidate.is_ok());
  EXPECT_NE(candidate.status().message().find("image"), std::string::npos) << candidate.status().message();
  // No image: the spec as older agents wrote it, 18 fields.
  spec = sample_spec();
  spec.image.clear();
  auto plain = decode_body(MessageType::kCandidate, encode_body(Candidate{"u", 1, spec}));
  ASSERT_TRUE(plain.is_ok()) << plain.status().message();
  EXPECT_EQ(std::get<Candidate>(*plain).spec.image, "");
}

TEST(CodecTest, MalformedBodiesAreCleanErrors) {
  EXPECT_FALSE(decode_body(MessageType::kReady, {}).is_ok());
  EXPECT_FALSE(decode_body(static_cast<MessageType>(0), {}).is_ok());
  EXPECT_FALSE(decode_body(static_cast<MessageType>(200), {}).is_ok());
  // A READY whose epoch is a string names the field.
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> packer(buffer);
  packer.pack_array(3);
  packer.pack(std::string("uid"));
  packer.pack(std::string("three"));
  packer.pack(1.0);
  auto result = decode_body(MessageType::kReady, to_bytes(buffer));
  ASSERT_FALSE(result.is_ok());
  EXPECT_NE(result.status().message().find("epoch"), std::string::npos);
  // Truncation of a valid body at every length is an error, never a crash.
  std::vector<uint8_t> whole = encode_body(Candidate{"u", 1, sample_spec()});
  for (size_t n = 0; n < whole.size(); ++n) {
    EXPECT_FALSE(decode_body(MessageType::kCandidate, {whole.data(), n}).is_ok()) << n;
  }
}

class EnvelopeTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(crypto::initialize().is_ok()); }
  Envelope make() {
    Envelope e;
    e.type = MessageType::kApprove;
    e.from = sender_.public_key();
    e.to = receiver_.public_key();
    e.boot = 7;
    e.seq = 42;
    e.sent_at_ms = 1'800'000'000'000;
    e.body = encode_body(Approve{"u", 1});
    return e;
  }
  crypto::Identity sender_ = crypto::Identity::generate();
  crypto::Identity receiver_ = crypto::Identity::generate();
};

TEST_F(EnvelopeTest, SealedEnvelopeOpensWithEveryField) {
  DropReason reason;
  auto opened = open(seal(make(), sender_), &reason);
  ASSERT_TRUE(opened.is_ok()) << opened.status().message();
  EXPECT_EQ(opened->type, MessageType::kApprove);
  EXPECT_EQ(opened->from, sender_.public_key());
  EXPECT_EQ(opened->to, receiver_.public_key());
  EXPECT_EQ(opened->boot, 7u);
  EXPECT_EQ(opened->seq, 42u);
  EXPECT_EQ(opened->sent_at_ms, 1'800'000'000'000);
  EXPECT_EQ(opened->body, make().body);
}

TEST_F(EnvelopeTest, AnyFlippedBitIsRefused) {
  std::vector<uint8_t> wire = seal(make(), sender_);
  for (size_t i = 0; i < wire.size(); ++i) {
    std::vector<uint8_t> altered = wire;
    altered[i] ^= 0x04;
    DropReason reason;
    EXPECT_FALSE(open(altered, &reason).is_ok()) << "byte " << i;
  }
}

TEST_F(EnvelopeTest, SignedByAnotherKeyIsBadSignature) {
  Envelope e = make();  // claims to be from sender_
  DropReason reason;
  auto opened = open(seal(e, receiver_), &reason);
  ASSERT_FALSE(opened.is_ok());
  EXPECT_EQ(reason, DropReason::kBadSignature);
}

TEST_F(EnvelopeTest, UnknownVersionAndTypeAreNamed) {
  Envelope e = make();
  e.version = 99;
  DropReason reason;
  EXPECT_FALSE(open(seal(e, sender_), &reason).is_ok());
  EXPECT_EQ(reason, DropReason::kUnknownVersion);
  e = make();
  e.type = static_cast<MessageType>(77);
  EXPECT_FALSE(open(seal(e, sender_), &reason).is_ok());
  EXPECT_EQ(reason, DropReason::kUnknownType);
  std::vector<uint8_t> garbage = {0x92, 0x01};
  EXPECT_FALSE(open(garbage, &reason).is_ok());
  EXPECT_EQ(reason, DropReason::kMalformed);
}

TEST(BatchTest, ItemsRoundTripInOrderWithTheirRawTypes) {
  std::vector<BatchItem> items;
  for (const Body& body : every_message()) {
    items.push_back({static_cast<uint8_t>(type_of(body)), encode_body(body)});
  }
  items.push_back({200, {0x01, 0x02}});  // a type from a newer sender stays an item
  auto decoded = decode_batch(encode_batch(items));
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().message();
  ASSERT_EQ(decoded->size(), items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    EXPECT_EQ((*decoded)[i].type, items[i].type) << i;
    EXPECT_EQ((*decoded)[i].body, items[i].body) << i;
  }
  // A BATCH is framing: it has no body of its own to decode.
  auto as_body = decode_body(MessageType::kBatch, encode_batch(items));
  ASSERT_FALSE(as_body.is_ok());
  EXPECT_NE(as_body.status().message().find("BATCH"), std::string::npos);
}

// Many small messages to one peer (thousands of reports in one step) fill
// an envelope by count before bytes: each envelope's BATCH is one its
// receiver decodes; big ones still split by bytes.
TEST(BatchTest, AnEnvelopeCarriesNoMoreMessagesThanItsReceiverDecodes) {
  std::vector<BatchItem> small(kMaxBatchItems + 500, BatchItem{7, std::vector<uint8_t>(40, 0x01)});
  std::span<const BatchItem> rest(small);
  std::vector<size_t> envelopes;
  while (!rest.empty()) {
    size_t count = next_envelope_items(rest);
    ASSERT_GE(count, 1u);
    auto decoded = decode_batch(encode_batch(rest.first(count)));
    EXPECT_TRUE(decoded.is_ok()) << decoded.status().message();
    envelopes.push_back(count);
    rest = rest.subspan(count);
  }
  EXPECT_EQ(envelopes, (std::vector<size_t>{kMaxBatchItems, 500}));
  std::vector<BatchItem> big(3, BatchItem{7, std::vector<uint8_t>(kMaxBodyBytes / 2, 0x01)});
  EXPECT_EQ(next_envelope_items(big), 1u) << "two halves and their headers exceed a body";
  std::vector<BatchItem> beyond(kMaxBatchItems + 1, BatchItem{7, {0x01}});
  EXPECT_FALSE(decode_batch(encode_batch(beyond)).is_ok()) << "the decoder's limit moved: kMaxBatchItems too";
}

TEST(BatchTest, MalformedBatchesAreCleanErrorsNamingTheField) {
  auto error_of = [](const std::vector<uint8_t>& bytes) {
    auto decoded = decode_batch(bytes);
    return decoded.is_ok() ? std::string("accepted") : decoded.status().message();
  };
  EXPECT_NE(error_of(encode_batch({})).find("at least one"), std::string::npos);
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> packer(buffer);
  packer.pack_array(1);
  packer.pack_array(2);
  packer.pack(std::string("READY"));  // a type must be a number
  pack_binary(packer, "x");
  EXPECT_NE(error_of(to_bytes(buffer)).find("type"), std::string::npos);
  std::vector<BatchItem> one = {{static_cast<uint8_t>(MessageType::kApprove),
                                 encode_body(Approve{"u", 1})}};
  std::vector<uint8_t> whole = encode_batch(one);
  for (size_t n = 0; n < whole.size(); ++n) {
    EXPECT_FALSE(decode_batch({whole.data(), n}).is_ok()) << n;
  }
}

}  // namespace
}  // namespace shoal::protocol
