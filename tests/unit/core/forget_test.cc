// `shoalctl peer forget`: a cluster gone for good is let go. Its
// invitations are revoked both ways, its work here stops, our copies there
// are placed again only once a lease renewed until the forget has certainly
// ended (never two at once), and it stays forgotten across restarts until
// a new invitation.
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/unit/core/lifecycle_fixture.h"

namespace shoal::core::testing {
namespace {

using namespace std::chrono_literals;

bool lists_peer(Node& node, const std::string& cluster) {
  auto peers = node.agent->operations().peers();
  return std::any_of(peers.begin(), peers.end(),
                     [&](const PeerView& peer) { return peer.cluster == cluster; });
}

// Runs `total` in 100 ms steps, failing if the job ever runs at east and
// west at once; returns the first time west ran it (max: never).
TimePoint run_checking_overlap(Federation& f, const std::string& uid, Duration total) {
  TimePoint west_started = TimePoint::max();
  for (Duration passed{0}; passed < total; passed += 100ms) {
    f.world.run_for(100ms, 100ms, f.network());
    int east = running_copies(*f.east, uid);
    int west = running_copies(*f.west, uid);
    EXPECT_LE(east + west, 1) << "two copies run at once";
    if (west > 0 && west_started == TimePoint::max()) west_started = f.source->clock->now();
  }
  return west_started;
}

TEST(ForgetTest, AForgottenTargetsCopyIsPlacedAgainOnlyOnceItsLeaseHasEnded) {
  Federation f(2s);
  std::string uid = f.submit_long_job();
  Operations& ops = f.source->agent->operations();
  uint64_t dropped_before =
      ops.stats().dropped[static_cast<size_t>(protocol::DropReason::kUnknownSender)];

  auto forgotten = ops.forget_peer("east");
  ASSERT_TRUE(forgotten.is_ok()) << forgotten.status().message();
  EXPECT_EQ(forgotten->cluster, "east");
  EXPECT_EQ(forgotten->id, f.east->id);
  EXPECT_EQ(forgotten->invitations_revoked.size(), 1u) << "the one east issued us";
  EXPECT_EQ(forgotten->copies_lost, 1);
  EXPECT_EQ(forgotten->hosted_stopped, 0);
  EXPECT_EQ(forgotten->placed_again_at, f.source->clock->now() + 2s + 500ms) << "lease + skew";
  EXPECT_FALSE(lists_peer(*f.source, "east"));
  EXPECT_FALSE(ops.admits_connection(f.east->id));
  auto ids = ops.peer_ids();
  EXPECT_EQ(std::count(ids.begin(), ids.end(), f.east->id), 0);

  // East stays up and connected, but hears no renewal: it stops the copy
  // when its lease lapses, and only after lease + skew does west run it.
  TimePoint west_started = run_checking_overlap(f, uid, 4s);
  ASSERT_NE(west_started, TimePoint::max()) << "placed again at west";
  EXPECT_GE(west_started, forgotten->placed_again_at);
  auto old_copy = copy_at(*f.east, uid);
  ASSERT_TRUE(old_copy.has_value());
  EXPECT_EQ(old_copy->message.rfind("LeaseExpired", 0), 0u) << old_copy->message;
  auto record = ops.find_workload("default", "job");
  EXPECT_EQ(record->cluster, "west");
  EXPECT_EQ(record->disruptions, 1);
  EXPECT_TRUE(event_contains(*f.source, uid, "east forgotten by the operator"));
  EXPECT_GT(ops.stats().dropped[static_cast<size_t>(protocol::DropReason::kUnknownSender)],
            dropped_before)
      << "what east still sends is dropped";
  EXPECT_FALSE(lists_peer(*f.source, "east"));
}

// The fence is kept across a restart: the forget's time is stored, while
// the time of the last DIGEST is not.
TEST(ForgetTest, ARestartKeepsThePeerForgottenAndItsFence) {
  Federation f(2s);
  std::string uid = f.submit_long_job();
  f.cut_east = true;  // east runs on, unreachable
  f.world.run_for(250ms, 250ms, f.network());
  auto forgotten = f.source->agent->operations().forget_peer("east");
  ASSERT_TRUE(forgotten.is_ok()) << forgotten.status().message();
  f.world.restart(*f.source);
  EXPECT_FALSE(lists_peer(*f.source, "east"));
  EXPECT_FALSE(f.source->agent->operations().admits_connection(f.east->id));

  TimePoint west_started = run_checking_overlap(f, uid, 4s);
  ASSERT_NE(west_started, TimePoint::max());
  EXPECT_GE(west_started, forgotten->placed_again_at);
  EXPECT_EQ(running_copies(*f.east, uid), 0) << "east fenced its copy";
  f.cut_east = false;  // east answers again: still forgotten
  f.world.run_for(3s, 250ms, f.network());
  EXPECT_FALSE(lists_peer(*f.source, "east"));
  EXPECT_EQ(f.source->agent->operations().find_workload("default", "job")->cluster, "west");
}

// A workload being deleted owes east a DELETE that east, gone, never
// confirms: it is let go at east's fence, not kept Deleting forever.
TEST(ForgetTest, ADeleteOwedToAForgottenPeerIsLetGoAtItsFence) {
  Federation f(2s);
  f.submit_long_job();
  Operations& ops = f.source->agent->operations();
  f.cut_east = true;
  ASSERT_TRUE(ops.delete_workload("default", "job").is_ok());
  f.world.run_for(10s, 250ms, f.network());
  ASSERT_EQ(ops.find_workload("default", "job")->reason, "Deleting");

  ASSERT_TRUE(ops.forget_peer("east").is_ok());
  f.world.run_for(2s, 250ms, f.network());
  EXPECT_TRUE(ops.find_workload("default", "job").has_value()) << "not before the fence";
  f.world.run_for(1s, 250ms, f.network());
  EXPECT_FALSE(ops.find_workload("default", "job").has_value());
  EXPECT_TRUE(ops.submit({workload("job", 1000, 1s)}).is_ok()) << "the name is free";
}

// The target's side: forgetting a source stops its work here at once, and
// its records go once the stop is over (nobody will acknowledge them).
TEST(ForgetTest, ForgettingASourceStopsItsWorkHereAndCollectsItsRecords) {
  Federation f(2s);
  std::string uid = f.submit_long_job();
  Operations& east = f.east->agent->operations();
  auto forgotten = east.forget_peer("source");
  ASSERT_TRUE(forgotten.is_ok()) << forgotten.status().message();
  EXPECT_EQ(forgotten->hosted_stopped, 1);
  EXPECT_EQ(forgotten->copies_lost, 0);
  EXPECT_EQ(forgotten->invitations_revoked.size(), 1u) << "the one east issued";
  EXPECT_EQ(running_copies(*f.east, uid), 0);
  f.world.run_for(1s);
  EXPECT_EQ(phase_of(*f.source, "job"), model::Phase::kRunning)
      << "nothing goes to a forgotten peer, not even the stopped copy's STATUS";
  f.world.run_for(model::kDefaultTerminationGrace - 2s);
  EXPECT_TRUE(copy_at(*f.east, uid).has_value()) << "kept while its stop's grace runs";
  f.world.run_for(2s);
  EXPECT_FALSE(copy_at(*f.east, uid).has_value()) << "collected";
  EXPECT_FALSE(lists_peer(*f.east, "source"));
}

TEST(ForgetTest, ARequestNamesWhatIsWrong) {
  Federation f(2s);
  Operations& ops = f.source->agent->operations();
  EXPECT_EQ(ops.forget_peer("north").status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(ops.forget_peer("source").status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(ops.forget_peer(f.source->id).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(ops.forget_peer("").status().code(), ErrorCode::kInvalidArgument);
  ASSERT_TRUE(ops.forget_peer(f.east->id).is_ok()) << "by id too";
  auto again = ops.forget_peer("east");
  EXPECT_EQ(again.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(again.status().message().find("name: no peer east"), std::string::npos)
      << again.status().message();
}

// A new invitation makes a forgotten peer a peer again: listed, and placed at.
TEST(ForgetTest, ANewInvitationMakesAForgottenPeerAPeerAgain) {
  Federation f(2s);
  Operations& ops = f.source->agent->operations();
  ASSERT_TRUE(ops.forget_peer("east").is_ok());
  f.world.run_for(1s);
  f.world.invite(*f.east, *f.source);
  f.world.run_for(2s);
  EXPECT_TRUE(lists_peer(*f.source, "east"));
  EXPECT_TRUE(ops.admits_connection(f.east->id));
  ASSERT_TRUE(ops.submit({workload("job", 4000, 3600s)}).is_ok());
  f.world.run_for(1s);
  auto record = ops.find_workload("default", "job");
  EXPECT_EQ(record->cluster, "east");
  EXPECT_EQ(record->phase, model::Phase::kRunning);
}

}  // namespace
}  // namespace shoal::core::testing
