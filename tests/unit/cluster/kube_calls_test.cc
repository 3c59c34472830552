// KubeCallQueue: the kubernetes backend's calls made in parallel, in order
// for each pod, retried with a backoff, a create never made after its delete.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <map>
#include <vector>

#include "agent/cluster/kubernetes/kube_calls.h"

namespace shoal::cluster::kubernetes {
namespace {

using Clock = KubeCallQueue::Clock;
using namespace std::chrono_literals;

KubeCall create(const std::string& pod) { return KubeCall::create("default", pod, "{}"); }
KubeCall remove(const std::string& pod) { return KubeCall::remove("default", pod, 1); }
KubeCall read_log(const std::string& pod) { return KubeCall::read_log("default", pod, 4096); }

TEST(KubeCallQueueTest, CallsOfDifferentPodsGoTogetherThoseOfOnePodOneAfterTheOther) {
  KubeCallQueue queue;
  Clock::time_point now{};
  queue.push(create("a"));
  queue.push(create("b"));
  queue.push(remove("a"));  // drops a's waiting create: nothing of a is out yet
  queue.push(create("c"));
  std::optional<KubeCall> first = queue.take(now);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->name, "b");
  std::optional<KubeCall> second = queue.take(now);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->name, "a");
  EXPECT_EQ(second->kind, KubeCall::Kind::kDelete);
  std::optional<KubeCall> third = queue.take(now);
  ASSERT_TRUE(third);
  EXPECT_EQ(third->name, "c");
  EXPECT_FALSE(queue.take(now));
  EXPECT_EQ(queue.out(), 3u);
  EXPECT_EQ(queue.broken_invariant(), "");
}

TEST(KubeCallQueueTest, APodsDeleteWaitsForItsCreateThatIsOut) {
  KubeCallQueue queue;
  Clock::time_point now{};
  queue.push(create("a"));
  std::optional<KubeCall> made = queue.take(now);
  ASSERT_TRUE(made);
  queue.push(remove("a"));
  EXPECT_FALSE(queue.take(now)) << "the delete overtook its create";
  queue.settled(*made);
  std::optional<KubeCall> next = queue.take(now);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->kind, KubeCall::Kind::kDelete);
  EXPECT_EQ(queue.broken_invariant(), "");
}

TEST(KubeCallQueueTest, ACreateToRetryIsDroppedWhenItsDeleteCameMeanwhile) {
  KubeCallQueue queue;
  Clock::time_point now{};
  queue.push(create("a"));
  std::optional<KubeCall> made = queue.take(now);
  ASSERT_TRUE(made);
  queue.push(remove("a"));
  made->attempts = 1;
  queue.again(std::move(*made), now + 1s);  // no answer: it may have happened
  std::optional<KubeCall> next = queue.take(now);
  ASSERT_TRUE(next) << "the delete waits out a backoff that was its create's";
  EXPECT_EQ(next->kind, KubeCall::Kind::kDelete);
  queue.settled(*next);
  EXPECT_EQ(queue.size(), 0u) << "the create was made again after its delete";
  EXPECT_EQ(queue.broken_invariant(), "");
}

TEST(KubeCallQueueTest, ACallToRetryWaitsItsBackoffAndGoesBeforeItsPodsOthers) {
  KubeCallQueue queue;
  Clock::time_point now{};
  queue.push(create("a"));
  std::optional<KubeCall> made = queue.take(now);
  ASSERT_TRUE(made);
  queue.push(create("b"));
  queue.again(std::move(*made), now + 2s);
  EXPECT_EQ(queue.next_retry(), now + 2s);
  std::optional<KubeCall> other = queue.take(now + 1s);
  ASSERT_TRUE(other);
  EXPECT_EQ(other->name, "b");
  EXPECT_FALSE(queue.take(now + 1s)) << "a's backoff was not waited out";
  std::optional<KubeCall> again = queue.take(now + 2s);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->name, "a");
  EXPECT_FALSE(queue.next_retry());
  EXPECT_EQ(queue.broken_invariant(), "");
}

TEST(KubeCallQueueTest, ALogReadGoesFirstAndIsNotHeldBehindItsPodsCalls) {
  KubeCallQueue queue;
  Clock::time_point now{};
  queue.push(create("a"));
  queue.push(create("b"));
  std::optional<KubeCall> made = queue.take(now);
  ASSERT_TRUE(made);
  EXPECT_EQ(made->name, "a");
  queue.push(read_log("a"));
  std::optional<KubeCall> read = queue.take(now);
  ASSERT_TRUE(read);
  EXPECT_EQ(read->kind, KubeCall::Kind::kReadLog);
  EXPECT_EQ(read->name, "a");
  EXPECT_EQ(queue.broken_invariant(), "");
}

// Random pushes, takes, answers and retries: the invariant holds after each
// step; no pod ever has two calls out; each pod's creates and deletes go in
// the order they came, retries aside; no create goes after its pod's delete
// was pushed; every call pushed is made or, a create, dropped for a delete.
RC_GTEST_PROP(KubeCallQueueProperty, KeepsEachPodsOrderAndNeverCreatesAfterADelete, ()) {
  KubeCallQueue queue;
  Clock::time_point now{};
  const int pods = *rc::gen::inRange(1, 5);
  std::map<std::string, bool> deleted;  // a delete of the pod was pushed
  std::map<std::string, int> pushed, made_or_dropped;
  std::vector<KubeCall> out;
  for (int step = 0, steps = *rc::gen::inRange(1, 120); step < steps; ++step) {
    std::string pod = "p" + std::to_string(*rc::gen::inRange(0, pods));
    switch (*rc::gen::inRange(0, 6)) {
      case 0:
        if (!deleted[pod]) {
          queue.push(create(pod));
          ++pushed[pod];
        }
        break;
      case 1:
        queue.push(remove(pod));
        deleted[pod] = true;
        ++pushed[pod];
        break;
      case 2:
      case 3:
        if (std::optional<KubeCall> call = queue.take(now)) {
          RC_ASSERT(!(call->kind == KubeCall::Kind::kCreate && deleted[call->name]));
          for (const KubeCall& other : out) RC_ASSERT(other.name != call->name);
          out.push_back(std::move(*call));
        }
        break;
      case 4:
        if (!out.empty()) {
          size_t i = *rc::gen::inRange<size_t>(0, out.size());
          queue.settled(out[i]);
          ++made_or_dropped[out[i].name];
          out.erase(out.begin() + static_cast<long>(i));
        }
        break;
      case 5:
        if (!out.empty()) {
          size_t i = *rc::gen::inRange<size_t>(0, out.size());
          KubeCall call = std::move(out[i]);
          out.erase(out.begin() + static_cast<long>(i));
          ++call.attempts;
          queue.again(std::move(call), now + std::chrono::seconds(*rc::gen::inRange(0, 3)));
        }
        break;
    }
    now += 1s;
    RC_ASSERT(queue.broken_invariant() == "");
  }
  // Drained, every pod's calls are accounted for: made once each, or a
  // create dropped because its delete came.
  for (const KubeCall& call : out) {
    queue.settled(call);
    ++made_or_dropped[call.name];
  }
  out.clear();
  for (int i = 0; i < 1000 && queue.size() > 0; ++i) {
    now += 5s;
    while (std::optional<KubeCall> call = queue.take(now)) {
      RC_ASSERT(!(call->kind == KubeCall::Kind::kCreate && deleted[call->name]));
      queue.settled(*call);
      ++made_or_dropped[call->name];
    }
  }
  RC_ASSERT(queue.size() == 0u);
  for (const auto& [pod, count] : pushed) {
    if (!deleted[pod]) RC_ASSERT(made_or_dropped[pod] == count);
    else RC_ASSERT(made_or_dropped[pod] <= count);
  }
}

}  // namespace
}  // namespace shoal::cluster::kubernetes
