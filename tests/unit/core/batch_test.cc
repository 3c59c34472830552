// The lazy parts of the step contract: what nobody waits on shares an
// envelope (Context::send_later), and a quiet batch shares the next one's
// commit (GroupCommit), never at the cost of write-ahead.
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <variant>

#include "store/sqlite/database.h"
#include "tests/unit/core/world.h"

namespace shoal::core::testing {
namespace {

using namespace std::chrono_literals;
using protocol::MessageType;

constexpr Duration kLazy = 100ms;

// A source whose own cluster takes nothing, and one target that invited
// it; both let what nobody waits on wait kLazy.
struct Lazy {
  World world;
  Node* source = nullptr;
  Node* target = nullptr;

  Lazy() {
    world.configure = [](AgentConfig& config) { config.lazy_delay = kLazy; };
    source = &world.add("source", 1, 100);
    target = &world.add("target");
    world.invite(*target, *source);
    world.run_for(3s);
  }
};

// The phase `node`'s store has committed for workload `name`, as another
// connection reads it.
std::string committed_phase(const Node& node, const std::string& name) {
  auto db = store::sqlite::Database::open(node.db_path);
  EXPECT_TRUE(db.is_ok()) << db.status().message();
  if (!db.is_ok()) return "";
  auto select = (*db)->prepare("SELECT phase FROM workloads WHERE name = ?");
  EXPECT_TRUE(select.is_ok());
  if (!select.is_ok()) return "";
  select->bind(1, name);
  auto row = select->step();
  return row.is_ok() && *row ? select->column_text(0) : "";
}

// The report a STATUS wire carries.
protocol::WorkloadStatus status_in(const Wire& w) {
  protocol::DropReason reason;
  auto envelope = protocol::open(w.bytes, &reason);
  EXPECT_TRUE(envelope.is_ok());
  if (!envelope.is_ok()) return {};
  auto body = protocol::decode_body(envelope->type, envelope->body);
  EXPECT_TRUE(body.is_ok() && std::holds_alternative<protocol::WorkloadStatus>(*body));
  if (!body.is_ok() || !std::holds_alternative<protocol::WorkloadStatus>(*body)) return {};
  return std::get<protocol::WorkloadStatus>(*body);
}

struct Seen {
  TimePoint at;
  MessageType type;
  uint64_t envelope;
  size_t parts;
};

void submit(World& world, Node& node, const model::WorkloadSpec& spec) {
  world.step(node, [&] { ASSERT_TRUE(node.agent->operations().submit({spec}).is_ok()); });
}

TEST(DeferredMessageTest, AcknowledgementsWaitToShareAnEnvelopeButNoLongerThanTheLazyDelay) {
  Lazy lazy;
  submit(lazy.world, *lazy.source, workload("job", 1000, 60s));
  std::vector<Seen> statuses, acks;
  std::set<uint64_t> generations;
  lazy.world.run_as_runtime_for(3s, Duration(1), [&](const Wire& w) {
    Seen seen{lazy.source->clock->now(), w.type, w.envelope, w.parts};
    if (w.type == MessageType::kStatus) {
      statuses.push_back(seen);
      generations.insert(status_in(w).generation);
    }
    if (w.type == MessageType::kStatusAck) acks.push_back(seen);
    return true;
  });
  ASSERT_EQ(phase_of(*lazy.source, "job"), model::Phase::kRunning);
  // Bound (with BOUND) and Running, reported within a millisecond; their
  // acknowledgements leave in one envelope once the first waited kLazy,
  // and the target repeats neither.
  EXPECT_EQ(generations, (std::set<uint64_t>{1, 2}));
  ASSERT_FALSE(acks.empty());
  for (const Seen& ack : acks) {
    EXPECT_EQ(ack.envelope, acks.front().envelope) << "one signature for all";
    EXPECT_GE(ack.at - statuses.front().at, kLazy) << "acknowledged at once";
    EXPECT_LE(ack.at - statuses.front().at, kLazy + 5ms);
  }
  EXPECT_LT(statuses.back().at, acks.front().at) << "a report repeated";
}

TEST(DeferredMessageTest, AnAcknowledgementRidesWithTheNextEnvelopeToItsPeer) {
  Lazy lazy;
  submit(lazy.world, *lazy.source, workload("first", 1000, 60s));
  // In steps shorter than the lazy delay, until the first is Running here:
  // its acknowledgement is owed, not sent.
  for (int i = 0; i < 100 && phase_of(*lazy.source, "first") != model::Phase::kRunning; ++i) {
    lazy.world.run_for(40ms, 40ms);
  }
  ASSERT_EQ(phase_of(*lazy.source, "first"), model::Phase::kRunning);
  lazy.source->transport->outbox.clear();
  lazy.world.step(*lazy.source, [&] {
    ASSERT_TRUE(lazy.source->agent->operations().submit({workload("second", 1000, 60s)}).is_ok());
  });
  std::vector<Seen> sent;
  for (const Wire& w : lazy.source->transport->outbox) {
    if (w.to == lazy.target->id) sent.push_back({{}, w.type, w.envelope, w.parts});
  }
  ASSERT_GE(sent.size(), 2u);
  EXPECT_EQ(sent.front().type, MessageType::kStatusAck) << "the older messages first";
  EXPECT_EQ(sent.back().type, MessageType::kCandidate);
  for (const Seen& message : sent) {
    EXPECT_EQ(message.envelope, sent.front().envelope) << "one envelope, one signature";
  }
}

// The envelope that carries the target's report that `name` finished,
// held back (with everything else the target sent once the source knew it
// ran): what a quiet batch of the source reads.
std::vector<uint8_t> finished_report(Lazy& lazy, const std::string& name) {
  submit(lazy.world, *lazy.source, workload(name, 1000, 1s));
  std::vector<uint8_t> held;
  lazy.world.run_for(3s, 50ms, [&](const Wire& w) {
    if (w.from != lazy.target->id || phase_of(*lazy.source, name) != model::Phase::kRunning) {
      return true;
    }
    if (held.empty() && w.type == MessageType::kStatus &&
        status_in(w).phase == model::Phase::kSucceeded) {
      held = *w.sealed;
    }
    return false;
  });
  EXPECT_FALSE(held.empty());
  EXPECT_EQ(phase_of(*lazy.source, name), model::Phase::kRunning);
  EXPECT_EQ(committed_phase(*lazy.source, name), "Running");
  return held;
}

// A source holding its target's report that "job" finished, unread, and
// the group its batches run in (as the runtime runs them).
struct ReportInHand {
  Lazy lazy;
  Node& source = *lazy.source;
  std::vector<uint8_t> report = finished_report(lazy, "job");
  GroupCommit group{kLazy};

  BatchOutcome batch(const std::function<Status()>& steps) {
    source.transport->mark_batch_start();
    return run_batch(*source.agent, *source.store, *source.transport, steps, nullptr, &group);
  }
  BatchOutcome read_report() {
    return batch([&] {
      source.agent->handle_wire(report);
      return Status::ok();
    });
  }
  BatchOutcome idle() {
    return batch([] { return Status::ok(); });
  }
};

TEST(GroupCommitTest, AQuietBatchWaitsForTheGroupsCommitAndNothingOfItLeavesBefore) {
  ReportInHand hand;
  Node& source = hand.source;
  source.transport->outbox.clear();

  // Reading the report writes the outcome and owes an acknowledgement:
  // quiet, so it waits for a commit.
  EXPECT_EQ(hand.read_report().end, BatchEnd::kOpen);
  EXPECT_EQ(phase_of(source, "job"), model::Phase::kSucceeded);
  EXPECT_EQ(committed_phase(source, "job"), "Running");
  EXPECT_TRUE(source.transport->outbox.empty());

  // Another quiet batch joins it while the group lingers.
  hand.lazy.world.advance_clock(kLazy / 2);
  EXPECT_EQ(hand.idle().end, BatchEnd::kOpen);
  EXPECT_EQ(committed_phase(source, "job"), "Running");
  EXPECT_TRUE(source.transport->outbox.empty());

  // Past the linger the next batch commits both; only then does the
  // acknowledgement leave.
  hand.lazy.world.advance_clock(kLazy / 2);
  EXPECT_EQ(hand.idle().end, BatchEnd::kCommitted);
  EXPECT_FALSE(hand.group.open());
  EXPECT_EQ(committed_phase(source, "job"), "Succeeded");
  ASSERT_EQ(source.transport->outbox.size(), 1u);
  EXPECT_EQ(source.transport->outbox[0].type, MessageType::kStatusAck);
}

TEST(GroupCommitTest, ABatchThatSendsCommitsTheGroupAtOnce) {
  ReportInHand hand;
  ASSERT_EQ(hand.read_report().end, BatchEnd::kOpen);
  BatchOutcome sending = hand.batch([&] {
    return hand.source.agent->operations().submit({workload("next", 1000, 60s)}).status();
  });
  EXPECT_EQ(sending.end, BatchEnd::kCommitted);
  EXPECT_EQ(committed_phase(hand.source, "job"), "Succeeded");
  EXPECT_EQ(committed_phase(hand.source, "next"), "Placing");
}

TEST(GroupCommitTest, AnAnswerWaitingCommitsEvenAQuietBatch) {
  ReportInHand hand;
  hand.group.answers_waiting = true;
  EXPECT_EQ(hand.read_report().end, BatchEnd::kCommitted);
  EXPECT_EQ(committed_phase(hand.source, "job"), "Succeeded");
}

// The runtime's linger is half a heartbeat (Agent::commit_linger), longer
// than the lazy delay; a quiet batch that owes an acknowledgement still
// commits within the lazy delay, with the tick that sends it, while one
// that owes nothing waits for the linger.
TEST(GroupCommitTest, WhatAQuietBatchDeferredCommitsItWithinTheLazyDelay) {
  ReportInHand hand;
  Node& source = hand.source;
  hand.group = GroupCommit{source.agent->commit_linger()};
  ASSERT_EQ(hand.group.linger, AgentConfig{}.heartbeat_interval / 2);
  ASSERT_GT(hand.group.linger, 2 * kLazy);
  auto tick = [&] {
    return hand.batch([&] {
      source.agent->tick();
      return Status::ok();
    });
  };
  // A heartbeat pass now, so that none falls in what follows.
  hand.lazy.world.advance_clock(hand.group.linger);
  ASSERT_EQ(tick().end, BatchEnd::kCommitted);
  source.transport->outbox.clear();

  ASSERT_EQ(hand.read_report().end, BatchEnd::kOpen);
  hand.lazy.world.advance_clock(kLazy / 2);
  EXPECT_EQ(tick().end, BatchEnd::kOpen);  // the acknowledgement not due yet
  EXPECT_TRUE(source.transport->outbox.empty());
  hand.lazy.world.advance_clock(kLazy / 2);
  EXPECT_EQ(tick().end, BatchEnd::kCommitted);
  EXPECT_EQ(committed_phase(source, "job"), "Succeeded");
  ASSERT_EQ(source.transport->outbox.size(), 1u);
  EXPECT_EQ(source.transport->outbox[0].type, MessageType::kStatusAck);

  // Quiet with nothing owed: open past the lazy delay, committed at the linger.
  ASSERT_EQ(hand.idle().end, BatchEnd::kOpen);
  hand.lazy.world.advance_clock(2 * kLazy);
  EXPECT_EQ(hand.idle().end, BatchEnd::kOpen);
  hand.lazy.world.advance_clock(hand.group.linger);
  EXPECT_EQ(hand.idle().end, BatchEnd::kCommitted);
}

TEST(GroupCommitTest, TheLingerIsNoneWithoutALazyDelay) {
  World world;
  world.configure = [](AgentConfig& config) { config.lazy_delay = Duration(0); };
  Node& node = world.add("solo");
  EXPECT_EQ(node.agent->commit_linger(), Duration(0));
}

TEST(GroupCommitTest, ACrashLosesTheOpenGroupAndTheReportIsRepeated) {
  ReportInHand hand;
  Node& source = hand.source;
  ASSERT_EQ(hand.read_report().end, BatchEnd::kOpen);
  hand.lazy.world.restart(source);  // the open transaction dies with the process
  EXPECT_EQ(phase_of(source, "job"), model::Phase::kRunning);
  // Never acknowledged, the report comes again.
  hand.lazy.world.run_for(5s);
  EXPECT_EQ(phase_of(source, "job"), model::Phase::kSucceeded);
  EXPECT_EQ(committed_phase(source, "job"), "Succeeded");
}

}  // namespace
}  // namespace shoal::core::testing
