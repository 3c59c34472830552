// A CANDIDATE approved in advance (protocol::Candidate::approved): a round
// that asks one awake target makes it the winner before it answers; the
// target binds at once if it holds room within the step that reads it, and
// otherwise answers as to a plain CANDIDATE and binds that epoch only on an
// APPROVE. One copy, whatever is lost or restarted.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "world.h"

namespace shoal::core::testing {
namespace {

using namespace std::chrono_literals;
using protocol::MessageType;


// Whether the CANDIDATE on `wire` went approved in advance.
bool approved(const Wire& wire) {
  protocol::DropReason reason;
  auto envelope = protocol::open(wire.bytes, &reason);
  EXPECT_TRUE(envelope.is_ok());
  auto body = protocol::decode_body(MessageType::kCandidate, envelope->body);
  EXPECT_TRUE(body.is_ok()) << body.status().message();
  return body.is_ok() && std::get<protocol::Candidate>(*body).approved;
}

// A source too small for the work and one target of 4 x 8 cpu that invited
// it. retryInterval 10 s: the target is awake to the source (heard from
// within a fifth of it) after the heartbeats of setting up, whichever beat
// they fell on; AllAtOnce (the world's default) asks the one target alone.
class Approval : public ::testing::Test {
 protected:
  void SetUp() override {
    world.configure = [](AgentConfig& config) { config.retry_interval = 10s; };
    source = &world.add("source", 1, 1000);
    target = &world.add("target");
    world.invite(*target, *source);
    world.run_for(3s);
  }
  // Delivers what `keep` lets through, and records it.
  std::function<bool(const Wire&)> record(std::function<bool(const Wire&)> keep = nullptr) {
    return [this, keep](const Wire& w) {
      if (keep && !keep(w)) return false;
      seen.push_back(w);
      return true;
    };
  }
  // The protocol messages (no HELLO, CAPACITY or DIGEST) `from` sent, in order.
  std::vector<MessageType> sent_by(const Node& from) const {
    std::vector<MessageType> out;
    for (const Wire& w : seen) {
      bool upkeep = w.type == MessageType::kHello || w.type == MessageType::kCapacity ||
                    w.type == MessageType::kDigest || w.type == MessageType::kHoldings;
      if (w.from == from.id && !upkeep) out.push_back(w.type);
    }
    return out;
  }
  size_t count(const Node& from, MessageType type) const {
    size_t n = 0;
    for (const Wire& w : seen) n += w.from == from.id && w.type == type;
    return n;
  }

  World world;
  Node* source = nullptr;
  Node* target = nullptr;
  std::vector<Wire> seen;  // every message delivered through record(), in order
};

TEST_F(Approval, ATargetAskedAloneBindsAtOnceWithoutReadyOrApprove) {
  auto uids = source->agent->operations().submit({workload("job", 4000, 2s)});
  ASSERT_TRUE(uids.is_ok());
  world.deliver(record());
  ASSERT_EQ(count(*source, MessageType::kCandidate), 1u);
  for (const Wire& w : seen) {
    if (w.type == MessageType::kCandidate) {
      EXPECT_TRUE(approved(w));
    }
  }
  EXPECT_EQ(sent_by(*target), (std::vector<MessageType>{MessageType::kBound, MessageType::kStatus}));
  auto record = source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->phase, model::Phase::kBound);
  EXPECT_EQ(record->cluster, "target");
  EXPECT_EQ(bound_copies(*target, uids->front()), 1);
  world.run_for(3s, 250ms, this->record());
  EXPECT_EQ(phase_of(*source, "job"), model::Phase::kSucceeded);
  EXPECT_EQ(count(*source, MessageType::kApprove), 0u);
  EXPECT_EQ(count(*target, MessageType::kReady), 0u);
  EXPECT_EQ(source->agent->operations().find_workload("default", "job")->epoch, 1u);
}

// The target's room went to its own work after its last CAPACITY: the
// approval finds none. It queues the candidate and says so; the source
// takes its approval back; when room frees, the target offers it by READY
// and binds only on the APPROVE that answers it.
TEST_F(Approval, ATargetWithoutRoomQueuesItAndBindsOnlyOnTheApprovalOfItsReady) {
  // Its own work fills it; no tick passes, so no CAPACITY tells the source.
  std::vector<model::WorkloadSpec> own;
  for (int i = 0; i < 4; ++i) own.push_back(workload("own-" + std::to_string(i), 8000, 5s));
  ASSERT_TRUE(target->agent->operations().submit(own).is_ok());
  world.deliver();
  ASSERT_EQ(target->cluster->capacity().free.cpu_milli, 0);
  auto uids = source->agent->operations().submit({workload("job", 4000, 2s)});
  ASSERT_TRUE(uids.is_ok());
  world.deliver(record());
  ASSERT_EQ(count(*source, MessageType::kCandidate), 1u);
  EXPECT_TRUE(approved(seen.front()));
  EXPECT_EQ(sent_by(*target), (std::vector<MessageType>{MessageType::kReject}));
  EXPECT_EQ(bound_copies(*target, uids->front()), 0);
  EXPECT_EQ(source->agent->operations().find_workload("default", "job")->winner, "")
      << "the approval was taken back";
  world.run_for(10s, 250ms, record());
  EXPECT_EQ(phase_of(*source, "job"), model::Phase::kSucceeded);
  EXPECT_EQ(bound_copies(*target, uids->front()), 1);
  // Bound after a READY and its APPROVE, never straight from the queue.
  std::vector<MessageType> answers = sent_by(*target);
  auto ready = std::find(answers.begin(), answers.end(), MessageType::kReady);
  auto bound = std::find(answers.begin(), answers.end(), MessageType::kBound);
  ASSERT_NE(ready, answers.end());
  EXPECT_LT(ready, bound);
  EXPECT_GE(count(*source, MessageType::kApprove), 1u);
}

// A target that has not been heard from within a fifth of retryInterval may be
// stopped: it gets a plain CANDIDATE, so that another can be asked if it
// never answers, and binds on the APPROVE of its READY.
TEST_F(Approval, ATargetNotHeardFromLatelyGetsAPlainCandidate) {
  // Its heartbeats are lost for 3 s (less than the worker-lost timeout).
  world.run_for(3s, 250ms, [&](const Wire& w) { return w.from != target->id; });
  auto uids = source->agent->operations().submit({workload("job", 4000, 2s)});
  ASSERT_TRUE(uids.is_ok());
  world.deliver(record());
  ASSERT_EQ(count(*source, MessageType::kCandidate), 1u);
  EXPECT_FALSE(approved(seen.front()));
  EXPECT_EQ(sent_by(*target).front(), MessageType::kReady);
  EXPECT_EQ(count(*source, MessageType::kApprove), 1u);
  EXPECT_EQ(phase_of(*source, "job"), model::Phase::kBound);
  EXPECT_EQ(bound_copies(*target, uids->front()), 1);
}

// The approved CANDIDATE is lost: the source asks again by APPROVE (never
// by a second approved CANDIDATE, which could bind after the source moved
// on); the target holds nothing for it and refuses, and the next round
// places it. One copy.
TEST_F(Approval, ALostApprovedCandidateIsAskedForByApprovalThenPlacedInTheNextRound) {
  auto uids = source->agent->operations().submit({workload("job", 4000, 2s)});
  ASSERT_TRUE(uids.is_ok());
  bool dropped = false;
  auto lose_first_candidate = [&](const Wire& w) {
    if (w.type != MessageType::kCandidate || dropped) return true;
    dropped = true;
    return false;
  };
  world.deliver(record(lose_first_candidate));
  world.run_for(25s, 250ms, record(lose_first_candidate));
  ASSERT_TRUE(dropped);
  EXPECT_EQ(phase_of(*source, "job"), model::Phase::kSucceeded);
  EXPECT_EQ(bound_copies(*target, uids->front()), 1);
  EXPECT_GE(count(*source, MessageType::kApprove), 1u);
  EXPECT_EQ(count(*source, MessageType::kCandidate), 1u) << "the second round's; the first was lost";
  for (const Wire& w : seen) {
    if (w.type == MessageType::kCandidate) {
      EXPECT_TRUE(approved(w));
    }
  }
  EXPECT_EQ(source->agent->operations().find_workload("default", "job")->epoch, 2u);
}

// The source restarts after its approved CANDIDATE bound the copy but
// before it heard BOUND: it kept the winner, asks it by APPROVE, and is
// answered BOUND again. No second round, one copy.
TEST_F(Approval, ASourceRestartedBeforeItHeardBoundKeepsTheWinnerItApprovedInAdvance) {
  auto uids = source->agent->operations().submit({workload("job", 4000, 2s)});
  ASSERT_TRUE(uids.is_ok());
  world.deliver([&](const Wire& w) { return w.from != target->id; });
  ASSERT_EQ(bound_copies(*target, uids->front()), 1);
  target->transport->outbox.clear();  // its BOUND and STATUS are lost
  world.restart(*source);
  EXPECT_EQ(source->agent->operations().find_workload("default", "job")->winner, target->id);
  world.run_for(6s, 250ms, record());
  EXPECT_EQ(phase_of(*source, "job"), model::Phase::kSucceeded);
  EXPECT_EQ(bound_copies(*target, uids->front()), 1);
  EXPECT_EQ(count(*source, MessageType::kCandidate), 0u);
  EXPECT_GE(count(*source, MessageType::kApprove), 1u);
  EXPECT_EQ(source->agent->operations().find_workload("default", "job")->epoch, 1u);
}

}  // namespace
}  // namespace shoal::core::testing
