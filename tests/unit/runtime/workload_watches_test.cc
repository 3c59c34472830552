// The watches of the agent's workloads on their own: who hears what after
// a batch, keepalives, a client that is gone, the cap, and the end.
#include "agent/runtime/workload_watches.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace shoal::runtime {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

store::WorkloadRecord workload(const std::string& namespace_name, const std::string& name) {
  store::WorkloadRecord record;
  record.uid = namespace_name + "-" + name;
  record.spec.namespace_name = namespace_name;
  record.spec.name = name;
  return record;
}

class WorkloadWatchesTest : public ::testing::Test {
 protected:
  // What each client was sent; clients in `gone_` fail every send.
  WorkloadWatches watches_{[this](const std::string& id, const json& message) {
    if (gone_.contains(id)) return false;
    sent_[id].push_back(message);
    return true;
  }};
  std::map<std::string, std::vector<json>> sent_;
  std::set<std::string> gone_;
  TimePoint t0_{std::chrono::hours(1000)};
};

TEST_F(WorkloadWatchesTest, EachWatcherHearsOfItsNamespaceOnly) {
  EXPECT_TRUE(watches_.start("all", "", t0_).value("ok", false));
  EXPECT_TRUE(watches_.start("team-a", "a", t0_).value("ok", false));
  watches_.tell({workload("a", "w1"), workload("b", "w2")}, t0_ + 1s);
  ASSERT_EQ(sent_["all"].size(), 1u);
  EXPECT_EQ(sent_["all"][0]["items"].size(), 2u);
  ASSERT_EQ(sent_["team-a"].size(), 1u);
  ASSERT_EQ(sent_["team-a"][0]["items"].size(), 1u);
  EXPECT_EQ(sent_["team-a"][0]["items"][0]["metadata"]["name"], "w1");

  watches_.tell({workload("b", "w3")}, t0_ + 2s);
  EXPECT_EQ(sent_["all"].size(), 2u);
  EXPECT_EQ(sent_["team-a"].size(), 1u) << "nothing of its changed, no keepalive due";
}

TEST_F(WorkloadWatchesTest, AKeepaliveFindsTheClientsThatAreGone) {
  watches_.start("stays", "", t0_);
  watches_.start("leaves", "", t0_);
  EXPECT_EQ(watches_.next_keepalive(), t0_ + WorkloadWatches::kKeepalive);
  gone_.insert("leaves");
  watches_.tell({}, t0_ + 1s);
  EXPECT_EQ(watches_.size(), 2u) << "no keepalive due yet";
  watches_.tell({}, t0_ + WorkloadWatches::kKeepalive);
  EXPECT_EQ(watches_.size(), 1u);
  ASSERT_EQ(sent_["stays"].size(), 1u);
  EXPECT_TRUE(sent_["stays"][0]["items"].empty());
  gone_.insert("stays");
  watches_.tell({}, t0_ + 3 * WorkloadWatches::kKeepalive);
  EXPECT_TRUE(watches_.empty());
  EXPECT_EQ(watches_.next_keepalive(), TimePoint::max());
}

TEST_F(WorkloadWatchesTest, TheCapRefusesAndTheEndTellsEveryoneWhy) {
  for (size_t i = 0; i < WorkloadWatches::kMaxWatches; ++i) {
    EXPECT_TRUE(watches_.start("c" + std::to_string(i), "", t0_).value("ok", false));
  }
  json refused = watches_.start("one-more", "", t0_);
  EXPECT_FALSE(refused.value("ok", true));
  EXPECT_EQ(refused.value("code", ""), "Unavailable");
  watches_.end_all("the agent is stopping");
  EXPECT_TRUE(watches_.empty());
  ASSERT_EQ(sent_["c0"].size(), 1u);
  EXPECT_FALSE(sent_["c0"][0].value("ok", true));
  EXPECT_EQ(sent_["c0"][0].value("error", ""), "the agent is stopping");
  EXPECT_FALSE(sent_.contains("one-more"));
}

}  // namespace
}  // namespace shoal::runtime
