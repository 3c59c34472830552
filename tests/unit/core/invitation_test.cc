// Invitations enforced by the agent core: limits, revocation (with and
// without eviction), renewal, disclosure capping and durable replay marks.
#include <gtest/gtest.h>

#include <algorithm>

#include "model/quantity.h"
#include "tests/unit/core/world.h"

namespace shoal::core::testing {
namespace {

using namespace std::chrono_literals;
using protocol::MessageType;



const InvitationView* find_view(const std::vector<InvitationView>& views, const std::string& id,
                                const std::string& direction) {
  for (const auto& view : views) {
    if (view.id == id && view.direction == direction) return &view;
  }
  return nullptr;
}

InvitationOptions limited(int64_t cpu_milli, std::optional<int64_t> workloads = std::nullopt) {
  InvitationOptions options;
  options.namespaces = {"default"};
  options.limits.cpu_milli = cpu_milli;
  options.limits.workloads = workloads;
  return options;
}

TEST(AgentInvitationTest, LimitReachedKeepsTheNextWorkloadPendingWithQuotaExceeded) {
  World world;
  Node& source = world.add("source", 1, 500);  // its own cluster takes nothing
  Node& target = world.add("target");          // 32 cpu, far more than the limit
  std::string id = world.invite(target, source, limited(8000));
  world.run_for(3s);
  // Disclosure: the target advertises min(cluster free, limit - used).
  auto peers = source.agent->operations().peers();
  auto view = std::find_if(peers.begin(), peers.end(), [&](const PeerView& p) { return p.id == target.id; });
  ASSERT_NE(view, peers.end());
  ASSERT_EQ(view->capacity.size(), 1u);
  EXPECT_EQ(view->capacity.front().free.cpu_milli, 8000);

  ASSERT_TRUE(source.agent->operations()
                  .submit({workload("a", 4000, 60s), workload("b", 4000, 60s)})
                  .is_ok());
  world.run_for(2s);
  EXPECT_EQ(phase_of(source, "a"), model::Phase::kRunning);
  EXPECT_EQ(phase_of(source, "b"), model::Phase::kRunning);
  ASSERT_TRUE(source.agent->operations().submit({workload("c", 1000, 60s)}).is_ok());
  world.run_for(2s);
  EXPECT_EQ(phase_of(source, "c"), model::Phase::kPending);
  EXPECT_NE(reason_of(source, "c").find("target=QuotaExceeded:cpu"), std::string::npos)
      << reason_of(source, "c");
  EXPECT_EQ(target.agent->operations().stats().rejected.at("QuotaExceeded:cpu"), 1u);

  auto views = target.agent->operations().invitations();
  const InvitationView* issued = find_view(views, id, "issued");
  ASSERT_NE(issued, nullptr);
  EXPECT_EQ(issued->state, InvitationState::kActive);
  EXPECT_EQ(issued->usage.resources.cpu_milli, 8000);
  EXPECT_EQ(issued->usage.workloads, 2);
  auto source_views = source.agent->operations().invitations();
  const InvitationView* accepted = find_view(source_views, id, "accepted");
  ASSERT_NE(accepted, nullptr);
  EXPECT_EQ(accepted->usage.resources.cpu_milli, 8000);

  // When a and b finish, c fits the limit again and runs.
  world.run_for(60s);
  EXPECT_EQ(phase_of(source, "c"), model::Phase::kRunning);
}

TEST(AgentInvitationTest, LimitArithmeticUsesKubernetesQuantities) {
  World world;
  Node& source = world.add("source", 1, 100);
  Node& target = world.add("target");
  InvitationOptions options;
  options.namespaces = {"default"};
  options.limits.cpu_milli = *model::parse_cpu_milli("1500m", "--cpu");
  options.limits.memory_bytes = *model::parse_memory_bytes("2560Mi", "--memory");  // 2.5Gi
  world.invite(target, source, options);
  world.run_for(3s);
  // Each job asks 500m and 1Gi: memory runs out after two (2Gi of 2.5Gi),
  // before cpu would (three).
  std::vector<model::WorkloadSpec> specs;
  for (int i = 0; i < 3; ++i) specs.push_back(workload("job-" + std::to_string(i), 500, 60s));
  ASSERT_TRUE(source.agent->operations().submit(specs).is_ok());
  world.run_for(3s);
  int running = 0;
  std::string refused;
  for (const auto& record : source.agent->operations().workloads()) {
    if (record.phase == model::Phase::kRunning) ++running;
    else refused = record.reason;
  }
  EXPECT_EQ(running, 2);
  EXPECT_NE(refused.find("QuotaExceeded:memory"), std::string::npos) << refused;
}

TEST(AgentInvitationTest, WorkloadCountLimit) {
  World world;
  Node& source = world.add("source", 1, 500);
  Node& target = world.add("target");
  world.invite(target, source, limited(100000, 1));
  world.run_for(3s);
  ASSERT_TRUE(source.agent->operations()
                  .submit({workload("a", 1000, 60s), workload("b", 1000, 60s)})
                  .is_ok());
  world.run_for(3s);
  int running = (phase_of(source, "a") == model::Phase::kRunning) +
                (phase_of(source, "b") == model::Phase::kRunning);
  EXPECT_EQ(running, 1);
  std::string waiting = phase_of(source, "a") == model::Phase::kRunning ? "b" : "a";
  EXPECT_NE(reason_of(source, waiting).find("QuotaExceeded:workloads"), std::string::npos)
      << reason_of(source, waiting);
}

TEST(AgentInvitationTest, RevokeWithoutEvictLetsRunningWorkFinishAndRefusesNewWork) {
  World world;
  Node& source = world.add("source", 1, 500);
  Node& target = world.add("target");
  std::string id = world.invite(target, source, limited(32000));
  world.run_for(3s);
  ASSERT_TRUE(source.agent->operations().submit({workload("running", 4000, 10s)}).is_ok());
  world.run_for(2s);
  ASSERT_EQ(phase_of(source, "running"), model::Phase::kRunning);
  ASSERT_TRUE(target.agent->operations().revoke_invitation(id, /*evict=*/false).is_ok());
  world.run_for(1s);
  EXPECT_EQ(find_view(source.agent->operations().invitations(), id, "accepted")->state,
            InvitationState::kRevoked);
  ASSERT_TRUE(source.agent->operations().submit({workload("new", 1000, 1s)}).is_ok());
  world.run_for(12s);
  EXPECT_EQ(phase_of(source, "running"), model::Phase::kSucceeded);  // statuses still flow
  EXPECT_EQ(phase_of(source, "new"), model::Phase::kPending);
  // A CANDIDATE sent anyway (a source that ignores the REVOKE) is refused
  // with the reason, not silently dropped.
  protocol::Envelope forced;
  forced.type = MessageType::kCandidate;
  forced.from = source.identity.public_key();
  forced.to = target.identity.public_key();
  forced.boot = 1000;  // newer than any real boot of the source
  forced.seq = 1;
  forced.sent_at_ms = to_millis(world.clock().now());
  forced.body = protocol::encode_body(protocol::Candidate{"forced-uid", 1, workload("forced", 1000)});
  target.agent->handle_wire(protocol::seal(forced, source.identity));
  EXPECT_EQ(target.agent->operations().stats().rejected.at("Revoked"), 1u);
  // Revocation survives a restart of both agents.
  world.restart(target);
  world.restart(source);
  world.run_for(3s);
  EXPECT_EQ(find_view(target.agent->operations().invitations(), id, "issued")->state,
            InvitationState::kRevoked);
  EXPECT_EQ(find_view(source.agent->operations().invitations(), id, "accepted")->state,
            InvitationState::kRevoked);
  world.run_for(10s);
  EXPECT_EQ(phase_of(source, "new"), model::Phase::kPending);
  EXPECT_TRUE(target.agent->operations().reservations().empty() ||
              target.agent->operations().reservations().front().spec.name == "running");
}

// A REVOKE lost on the way is told again: on the source's next HELLO, and,
// since a source busy offering work sends no HELLO (a link that carries
// other messages needs none), with the refusal of its next CANDIDATE.
TEST(AgentInvitationTest, ALostRevokeReachesASourceTooBusyToGreet) {
  World world;
  Node& source = world.add("source", 1, 100);
  Node& target = world.add("target");
  std::string id = world.invite(target, source, limited(32000));
  world.run_for(3s);
  auto no_revoke = [](const Wire& w) { return w.type != MessageType::kRevoke; };
  world.step(target,
             [&] { ASSERT_TRUE(target.agent->operations().revoke_invitation(id, false).is_ok()); });
  world.deliver(no_revoke);
  ASSERT_EQ(find_view(source.agent->operations().invitations(), id, "accepted")->state,
            InvitationState::kActive);
  // A new CANDIDATE every 400 ms: the link to the target is never idle for
  // a heartbeat pass.
  for (int i = 0; i < 5; ++i) {
    world.step(source, [&] {
      ASSERT_TRUE(source.agent->operations()
                      .submit({workload("job-" + std::to_string(i), 1000, 1s)})
                      .is_ok());
    });
    world.deliver();
    world.run_as_runtime_for(400ms);
  }
  EXPECT_EQ(find_view(source.agent->operations().invitations(), id, "accepted")->state,
            InvitationState::kRevoked);
}

std::string peer_state(Node& node, const std::string& peer_id, std::string* reason = nullptr) {
  for (const auto& view : node.agent->operations().peers()) {
    if (view.id != peer_id) continue;
    if (reason) *reason = view.reason;
    return peer_state_name(view.state);
  }
  return "";
}

// Evicted with its invitation, the copy's end is not its job's own: the
// source places it again (here no other cluster invites it, so it waits).
TEST(AgentInvitationTest, RevokeWithEvictStopsRunningWorkAndReportsRevoked) {
  World world;
  Node& source = world.add("source", 1, 500);
  Node& target = world.add("target");
  std::string id = world.invite(target, source, limited(32000));
  world.run_for(3s);
  ASSERT_TRUE(source.agent->operations().submit({workload("long", 4000, 600s)}).is_ok());
  world.run_for(2s);
  ASSERT_EQ(phase_of(source, "long"), model::Phase::kRunning);
  ASSERT_TRUE(target.agent->operations().revoke_invitation(id, /*evict=*/true).is_ok());
  world.run_for(2s);
  EXPECT_EQ(phase_of(source, "long"), model::Phase::kPending);
  EXPECT_EQ(reason_of(source, "long").rfind("placing again after: Revoked", 0), 0u) << reason_of(source, "long");
  EXPECT_EQ(source.agent->operations().find_workload("default", "long")->disruptions, 1);
  std::string why;
  EXPECT_EQ(peer_state(source, target.id, &why), "Revoked");
  EXPECT_EQ(why, "invitation " + id + " revoked");
  EXPECT_EQ(peer_state(target, source.id), "Revoked");
  EXPECT_EQ(target.cluster->capacity().free.cpu_milli, 32000);
  EXPECT_TRUE(target.cluster->check_invariants());
  auto revoking = target.agent->operations().revoke_invitation("no-such-id", false);
  EXPECT_EQ(revoking.code(), ErrorCode::kNotFound);
  EXPECT_EQ(source.agent->operations().revoke_invitation(id, false).code(),
            ErrorCode::kInvalidArgument);
}

TEST(AgentInvitationTest, RenewalReplacesTheOldInvitationWithoutDisturbingRunningWork) {
  World world;
  Node& source = world.add("source", 1, 500);
  Node& target = world.add("target");
  std::string old_id = world.invite(target, source, limited(4000));
  world.run_for(3s);
  ASSERT_TRUE(source.agent->operations().submit({workload("first", 4000, 20s)}).is_ok());
  world.run_for(2s);
  ASSERT_EQ(phase_of(source, "first"), model::Phase::kRunning);
  std::string new_id = world.invite(target, source, limited(8000));
  world.run_for(1s);
  EXPECT_EQ(find_view(target.agent->operations().invitations(), old_id, "issued")->state,
            InvitationState::kReplaced);
  EXPECT_EQ(find_view(source.agent->operations().invitations(), old_id, "accepted")->state,
            InvitationState::kReplaced);
  EXPECT_EQ(find_view(target.agent->operations().invitations(), new_id, "issued")->state,
            InvitationState::kActive);
  EXPECT_EQ(phase_of(source, "first"), model::Phase::kRunning);
  // The running workload counts against the new limit: 4 of 8 cpu left.
  ASSERT_TRUE(source.agent->operations()
                  .submit({workload("second", 4000, 5s), workload("third", 1000, 5s)})
                  .is_ok());
  world.run_for(2s);
  int running = (phase_of(source, "second") == model::Phase::kRunning) +
                (phase_of(source, "third") == model::Phase::kRunning);
  EXPECT_EQ(running, 1);
  world.run_for(30s);
  EXPECT_EQ(phase_of(source, "first"), model::Phase::kSucceeded);
  EXPECT_EQ(phase_of(source, "second"), model::Phase::kSucceeded);
  EXPECT_EQ(phase_of(source, "third"), model::Phase::kSucceeded);
}

TEST(AgentInvitationTest, ExpiryWhileWorkRunsLetsItFinishAndStopsNewWork) {
  World world;
  Node& source = world.add("source", 1, 500);
  Node& target = world.add("target");
  InvitationOptions options = limited(32000);
  options.lifetime = 10s;
  std::string id = world.invite(target, source, options);
  world.run_for(3s);
  ASSERT_TRUE(source.agent->operations().submit({workload("long", 4000, 20s)}).is_ok());
  world.run_for(10s);
  EXPECT_EQ(find_view(target.agent->operations().invitations(), id, "issued")->state,
            InvitationState::kExpired);
  EXPECT_EQ(peer_state(source, target.id), "Expired");
  EXPECT_EQ(peer_state(target, source.id), "Expired");
  ASSERT_TRUE(source.agent->operations().submit({workload("late", 1000, 1s)}).is_ok());
  world.run_for(15s);
  EXPECT_EQ(phase_of(source, "long"), model::Phase::kSucceeded);
  EXPECT_EQ(phase_of(source, "late"), model::Phase::kPending);
}

TEST(AgentInvitationTest, NotYetValidInvitationGivesNothingUntilItStarts) {
  World world;
  Node& source = world.add("source", 1, 500);
  Node& target = world.add("target");
  InvitationOptions options = limited(32000);
  options.not_before = world.clock().now() + 30s;
  std::string id = world.invite(target, source, options);
  world.run_for(3s);
  EXPECT_EQ(find_view(target.agent->operations().invitations(), id, "issued")->state,
            InvitationState::kNotYetValid);
  ASSERT_TRUE(source.agent->operations().submit({workload("job", 1000, 1s)}).is_ok());
  world.run_for(5s);
  EXPECT_EQ(phase_of(source, "job"), model::Phase::kPending);
  world.run_for(90s);
  EXPECT_EQ(phase_of(source, "job"), model::Phase::kSucceeded);
}

TEST(AgentInvitationTest, CapturedMessageStaysAReplayAfterTheReceiverRestarts) {
  World world;
  Node& source = world.add("source", 1, 500);
  Node& target = world.add("target");
  world.invite(target, source);
  world.run_for(3s);
  ASSERT_TRUE(source.agent->operations().submit({workload("job", 1000, 1s)}).is_ok());
  std::vector<Wire> captured;
  world.deliver([&](const Wire& w) {
    if (w.to == target.id) captured.push_back(w);
    return true;
  });
  ASSERT_FALSE(captured.empty());
  world.restart(target);  // the sender keeps its boot: only seq marks can catch this
  uint64_t before = target.agent->operations()
                        .stats()
                        .dropped[static_cast<size_t>(protocol::DropReason::kReplayed)];
  for (const Wire& w : captured) target.agent->handle_wire(w.bytes);
  EXPECT_EQ(target.agent->operations()
                .stats()
                .dropped[static_cast<size_t>(protocol::DropReason::kReplayed)],
            before + captured.size());
}

}  // namespace
}  // namespace shoal::core::testing
