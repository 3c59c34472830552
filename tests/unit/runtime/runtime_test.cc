#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "agent/runtime/config.h"
#include "agent/runtime/rate_limiter.h"

namespace shoal::runtime {
namespace {

using namespace std::chrono_literals;
using Clock = PeerRateLimiter::Clock;

int admitted(PeerRateLimiter& limiter, const std::string& peer, int tries, Clock::time_point at) {
  int count = 0;
  for (int i = 0; i < tries; ++i) count += limiter.admit(peer, at);
  return count;
}

TEST(PeerRateLimiterTest, ABurstIsAdmittedThenOnlyTheRate) {
  PeerRateLimiter limiter(/*rate=*/100, /*burst=*/10);
  Clock::time_point t0{};
  EXPECT_EQ(admitted(limiter, "flooder", 50, t0), 10);
  EXPECT_EQ(limiter.limited(), 40u);
  // 100 a second: 50 ms refills 5 tokens, never more than the burst.
  EXPECT_EQ(admitted(limiter, "flooder", 50, t0 + 50ms), 5);
  EXPECT_EQ(admitted(limiter, "flooder", 50, t0 + 10s), 10);
}

TEST(PeerRateLimiterTest, OnePeersFloodLeavesAnotherPeersBucketFull) {
  PeerRateLimiter limiter(100, 10);
  Clock::time_point t0{};
  EXPECT_EQ(admitted(limiter, "flooder", 1000, t0), 10);
  EXPECT_EQ(admitted(limiter, "honest", 10, t0), 10);
}

TEST(PeerRateLimiterTest, ManyConnectionsDoNotGrowItWithoutBound) {
  PeerRateLimiter limiter(100, 10);
  Clock::time_point t0{};
  // Connection ids a stranger mints: idle buckets are forgotten, and a
  // forgotten one starts full again, which is what it would have refilled to.
  for (int i = 0; i < 20000; ++i) {
    EXPECT_TRUE(limiter.admit("connection:" + std::to_string(i), t0 + std::chrono::seconds(i)));
  }
  EXPECT_EQ(limiter.limited(), 0u);
}

class AgentFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/shoal-config.XXXXXX";
    dir_ = mkdtemp(pattern);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  Result<AgentFile> load(const std::string& extra) {
    std::ofstream(config_path(dir_)) << "cluster: east\norg: acme\nlisten: tcp://127.0.0.1:7001\n"
                                     << extra;
    return load_agent_file(dir_);
  }
  std::string dir_;
};

TEST_F(AgentFileTest, PeerMessageLimitsDefaultAndRoundTrip) {
  auto defaults = load("");
  ASSERT_TRUE(defaults.is_ok()) << defaults.status().message();
  EXPECT_EQ(defaults->peer_message_rate, 2000);
  EXPECT_EQ(defaults->peer_message_burst, 4000);
  auto custom = load("peerMessageRate: 50\npeerMessageBurst: 70\n");
  ASSERT_TRUE(custom.is_ok()) << custom.status().message();
  ASSERT_TRUE(write_agent_file(dir_, *custom).is_ok());
  auto again = load_agent_file(dir_);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(again->peer_message_rate, 50);
  EXPECT_EQ(again->peer_message_burst, 70);
}

TEST_F(AgentFileTest, ABadPeerMessageLimitIsRefusedNamingTheField) {
  for (const char* bad : {"peerMessageRate: 0\n", "peerMessageRate: lots\n",
                          "peerMessageBurst: -5\n", "peerMessageBurst: [1]\n"}) {
    auto file = load(bad);
    ASSERT_FALSE(file.is_ok()) << bad;
    EXPECT_EQ(file.status().code(), ErrorCode::kInvalidArgument);
    std::string key = std::string(bad).substr(0, std::string(bad).find(':'));
    EXPECT_NE(file.status().message().find("agent.yaml " + key + ": expected a whole number"),
              std::string::npos)
        << file.status().message();
  }
}

TEST_F(AgentFileTest, ExecSettingsDefaultRoundTripAndABadOneIsNamed) {
  auto defaults = load("");
  ASSERT_TRUE(defaults.is_ok()) << defaults.status().message();
  EXPECT_EQ(defaults->exec_log_cap_bytes, 10 << 20);
  EXPECT_EQ(defaults->exec_keep_finished, std::chrono::hours(1));
  auto custom = load("exec: {logCap: 64Ki, keepFinished: 5m}\n");
  ASSERT_TRUE(custom.is_ok()) << custom.status().message();
  ASSERT_TRUE(write_agent_file(dir_, *custom).is_ok());
  auto again = load_agent_file(dir_);
  ASSERT_TRUE(again.is_ok()) << again.status().message();
  EXPECT_EQ(again->exec_log_cap_bytes, 64 << 10);
  EXPECT_EQ(again->exec_keep_finished, std::chrono::minutes(5));
  for (auto [bad, field] : {std::pair{"exec: {logCap: 1}\n", "exec.logCap"},
                            std::pair{"exec: {logCap: lots}\n", "exec.logCap"},
                            std::pair{"exec: {keepFinished: soon}\n", "exec.keepFinished"},
                            std::pair{"exec: {logcap: 1Mi}\n", "exec.logcap: unknown field"},
                            std::pair{"exec: 5\n", "exec: expected a mapping"}}) {
    auto file = load(bad);
    ASSERT_FALSE(file.is_ok()) << bad;
    EXPECT_EQ(file.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(file.status().message().find(std::string("agent.yaml ") + field), std::string::npos)
        << file.status().message();
  }
}

}  // namespace
}  // namespace shoal::runtime
