// An invited peer gone bad floods a target with validly signed messages
// ("abusive peers"). Per-peer rate limits and bounded queues keep
// the target's other sources going: their placements there may slow, but
// by no more than 2x. Latency is taken from the agents' own timestamps
// (creation at the source, start at the target), and the bound is a ratio
// against the same federation without the flood, measured in the same run.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <thread>

#include <zmq.hpp>

#include "common/time.h"
#include "crypto/id_card.h"
#include "crypto/identity.h"
#include "harness.h"
#include "protocol/envelope.h"

namespace shoal::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

int64_t millis_of(const json& rfc3339) {
  auto parsed = parse_time(rfc3339.get<std::string>(), "time");
  return parsed.is_ok() ? to_millis(*parsed) : -1;
}

// Sends validly signed HELLOs from `flooder`'s key as fast as the target
// takes them, over `connections` CURVE connections, until stopped.
class Flood {
 public:
  Flood(const crypto::Identity& flooder, const crypto::PublicKey& target,
        const std::string& endpoint, int connections)
      : context_(1) {
    for (int i = 0; i < connections; ++i) {
      auto& socket = sockets_.emplace_back(context_, zmq::socket_type::dealer);
      socket.set(zmq::sockopt::linger, 0);
      make_curve_client(socket, flooder, target);
      socket.connect(endpoint);
    }
    thread_ = std::thread([this, &flooder, target] { run(flooder, target); });
  }
  ~Flood() {
    stop_ = true;
    thread_.join();
  }
  uint64_t sent() const { return sent_; }

 private:
  void run(const crypto::Identity& flooder, const crypto::PublicKey& target) {
    uint64_t seq = 0;
    while (!stop_) {
      std::vector<uint8_t> wire = sealed_hello(flooder, target, ++seq, "flood");
      auto& socket = sockets_[seq % sockets_.size()];
      // A full queue (the target reads slower than this) is the point; the
      // message is dropped here and the loop goes on, so stop_ is seen.
      if (socket.send(zmq::buffer(wire), zmq::send_flags::dontwait))
        ++sent_;
      else
        std::this_thread::yield();
    }
  }

  zmq::context_t context_;
  std::vector<zmq::socket_t> sockets_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> sent_{0};
};

constexpr int kPeerMessageRate = 300;

class FloodTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(crypto::initialize().is_ok());
    target_.init();
    source_.init();
    // Low enough that even a flooder slowed by the sanitizers outruns it,
    // and far above what one placement at a time needs from the source.
    target_.set_config("peerMessageRate", std::to_string(kPeerMessageRate));
    ASSERT_TRUE(target_.start());
    ASSERT_TRUE(source_.start());
    invite_full_mesh({&target_, &source_}, "default");
    auto card = crypto::parse_id_card(target_.identity());
    ASSERT_TRUE(card.is_ok());
    target_key_ = card->public_key;
    crypto::IdCard flooder_card{"flooder", "bad", flooder_.public_key(), "tcp://127.0.0.1:1"};
    ASSERT_EQ(
        target_
            .ctl({"invite", "create", "--to", flooder_card.to_string(), "--namespace", "default"})
            .exit_code,
        0);
  }

  // Places `count` workloads one after another at the target; returns each
  // one's creation-to-start time in ms, by the agents' clocks.
  std::vector<int64_t> place_one_by_one(const std::string& prefix, int count) {
    std::vector<int64_t> latencies;
    for (int i = 0; i < count; ++i) {
      std::string name = prefix + std::to_string(i);
      std::string path = dir_.path() + "/" + name + ".yaml";
      {
        std::ofstream out(path);
        out << "apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: " << name
            << ", namespace: default}\nspec: {resources: {cpu: 100m}, duration: 50ms, "
               "placement: {clusters: [target]}}\n";
      }
      if (source_.ctl({"submit", "-f", path}).exit_code != 0) return {};
      json workload;
      bool started = wait_until(
          [&] {
            workload = source_.ctl_json({"describe", "workload", "default/" + name});
            return !workload.is_null() &&
                   !workload["status"]["startedAt"].get<std::string>().empty();
          },
          30s);
      if (!started) return {};
      latencies.push_back(millis_of(workload["status"]["startedAt"]) -
                          millis_of(workload["metadata"]["creationTimestamp"]));
    }
    return latencies;
  }

  static int64_t median(std::vector<int64_t> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
  }

  TempDir dir_;
  AgentProcess target_{"target", dir_.path()};
  AgentProcess source_{"source", dir_.path()};
  crypto::Identity flooder_ = crypto::Identity::generate();
  crypto::PublicKey target_key_{};
};

// Runs alone (RUN_SERIAL in tests/CMakeLists.txt): the two medians compare
// the same machine at two moments, which other tests' load would skew.
TEST_F(FloodTest, AFloodingPeerDelaysAnotherPeersPlacementsByAtMostTwice) {
  constexpr int kPlacements = 15;
  std::vector<int64_t> calm = place_one_by_one("calm-", kPlacements);
  ASSERT_EQ(calm.size(), static_cast<size_t>(kPlacements));
  std::vector<int64_t> flooded;
  uint64_t flood_sent = 0;
  {
    Flood flood(flooder_, target_key_, target_.endpoint(), 4);
    // The flood is under way before the first placement is measured.
    ASSERT_TRUE(wait_until([&] { return flood.sent() > 10000; }, 20s));
    flooded = place_one_by_one("flooded-", kPlacements);
    flood_sent = flood.sent();
  }
  ASSERT_EQ(flooded.size(), static_cast<size_t>(kPlacements));
  json status = target_.ctl_json({"status"});
  ASSERT_FALSE(status.is_null());
  int64_t calm_median = median(calm), flooded_median = median(flooded);
  std::printf(
      "placement latency at the target, median of %d: calm %lld ms, flooded %lld ms "
      "(flood sent %llu, rate-limited %llu)\n",
      kPlacements, static_cast<long long>(calm_median), static_cast<long long>(flooded_median),
      static_cast<unsigned long long>(flood_sent),
      static_cast<unsigned long long>(status["messages"]["dropped"].value("RateLimited", 0ULL)));
  // 2x the calm median, and never less than a few ms over it: on a calm
  // loopback a placement takes a few ms, below what a shared machine's
  // scheduling noise can promise.
  EXPECT_GT(status["messages"]["dropped"].value("RateLimited", 0ULL), 0u);
  EXPECT_LE(flooded_median, std::max<int64_t>(2 * calm_median, calm_median + 15));
  EXPECT_EQ(target_.reap_if_exited(), -1);
}

}  // namespace
}  // namespace shoal::testing
