#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>
#include <spdlog/sinks/ostream_sink.h>
#include <yaml-cpp/yaml.h>

#include "agent/runtime/config.h"
#include "agent/runtime/logging.h"
#include "agent/runtime/rate_limiter.h"

namespace shoal::runtime {
namespace {

using namespace std::chrono_literals;
using LimiterClock = PeerRateLimiter::Clock;

int admitted(PeerRateLimiter& limiter, const std::string& peer, int tries, LimiterClock::time_point at) {
  int count = 0;
  for (int i = 0; i < tries; ++i) count += limiter.admit(peer, at);
  return count;
}

TEST(PeerRateLimiterTest, ABurstIsAdmittedThenOnlyTheRate) {
  PeerRateLimiter limiter(/*rate=*/100, /*burst=*/10);
  LimiterClock::time_point t0{};
  EXPECT_EQ(admitted(limiter, "flooder", 50, t0), 10);
  EXPECT_EQ(limiter.limited(), 40u);
  // 100 a second: 50 ms refills 5 tokens, never more than the burst.
  EXPECT_EQ(admitted(limiter, "flooder", 50, t0 + 50ms), 5);
  EXPECT_EQ(admitted(limiter, "flooder", 50, t0 + 10s), 10);
}

TEST(PeerRateLimiterTest, OnePeersFloodLeavesAnotherPeersBucketFull) {
  PeerRateLimiter limiter(100, 10);
  LimiterClock::time_point t0{};
  EXPECT_EQ(admitted(limiter, "flooder", 1000, t0), 10);
  EXPECT_EQ(admitted(limiter, "honest", 10, t0), 10);
}

TEST(PeerRateLimiterTest, ManyConnectionsDoNotGrowItWithoutBound) {
  PeerRateLimiter limiter(100, 10);
  LimiterClock::time_point t0{};
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

TEST_F(AgentFileTest, StartTimeoutIsOffByDefaultRoundTripsAndABadOneIsNamed) {
  auto defaults = load("");
  ASSERT_TRUE(defaults.is_ok()) << defaults.status().message();
  EXPECT_EQ(defaults->timing.start_timeout, Duration(0)) << "a bound copy waits by default";
  auto custom = load("startTimeout: 15m\n");
  ASSERT_TRUE(custom.is_ok()) << custom.status().message();
  ASSERT_TRUE(write_agent_file(dir_, *custom).is_ok());
  auto again = load_agent_file(dir_);
  ASSERT_TRUE(again.is_ok()) << again.status().message();
  EXPECT_EQ(again->timing.start_timeout, std::chrono::minutes(15));
  auto bad = load("startTimeout: whenever\n");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("agent.yaml startTimeout"), std::string::npos)
      << bad.status().message();
}

TEST_F(AgentFileTest, MaxDisruptionsIsUnlimitedByDefaultRoundTripsAndABadOneIsNamed) {
  auto defaults = load("");
  ASSERT_TRUE(defaults.is_ok()) << defaults.status().message();
  EXPECT_EQ(defaults->timing.max_disruptions, -1) << "no budget unless the operator sets one";
  for (auto [text, expected] : {std::pair{"maxDisruptions: 3\n", 3}, std::pair{"maxDisruptions: 0\n", 0},
                                std::pair{"maxDisruptions: unlimited\n", -1}}) {
    auto custom = load(text);
    ASSERT_TRUE(custom.is_ok()) << custom.status().message();
    ASSERT_TRUE(write_agent_file(dir_, *custom).is_ok());
    auto again = load_agent_file(dir_);
    ASSERT_TRUE(again.is_ok()) << again.status().message();
    EXPECT_EQ(again->timing.max_disruptions, expected) << text;
  }
  for (const char* text : {"maxDisruptions: -1\n", "maxDisruptions: lots\n", "maxDisruptions: [1]\n"}) {
    auto bad = load(text);
    ASSERT_FALSE(bad.is_ok()) << text;
    EXPECT_NE(bad.status().message().find("agent.yaml maxDisruptions: expected unlimited or a whole number"),
              std::string::npos)
        << bad.status().message();
  }
}

TEST(LoggingTest, JsonLinesParseWhateverTheMessageHolds) {
  AgentFile file;
  file.cluster = "east";
  file.log_format = "json";
  std::ostringstream out;
  auto logger = make_logger(file, std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
  std::string tricky = "a \"quoted\" name, a back\\slash,\na newline and a tab\t";
  logger->warn("{}", tricky);
  logger->info("plain");
  std::istringstream lines(out.str());
  std::string line;
  std::vector<nlohmann::json> parsed;
  while (std::getline(lines, line)) {
    parsed.push_back(nlohmann::json::parse(line, nullptr, false));
    ASSERT_TRUE(parsed.back().is_object()) << line;
  }
  ASSERT_EQ(parsed.size(), 2u) << out.str();
  EXPECT_EQ(parsed[0]["msg"], tricky);
  EXPECT_EQ(parsed[0]["level"], "warning");
  EXPECT_EQ(parsed[0]["cluster"], "east");
  EXPECT_TRUE(std::regex_match(parsed[0]["time"].get<std::string>(),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")));
  EXPECT_EQ(parsed[1]["msg"], "plain");
}

TEST(LoggingTest, LogLevelsAreNamedAndABadOneIsRefusedNamingTheFlag) {
  EXPECT_EQ(*parse_log_level("debug"), spdlog::level::debug);
  EXPECT_EQ(*parse_log_level("warn"), spdlog::level::warn);
  EXPECT_EQ(*parse_log_level("error"), spdlog::level::err);
  auto bad = parse_log_level("loud");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("--log-level"), std::string::npos);
}

// docs/operating.md's configuration reference against what `shoald init`
// writes: the same fields (nested ones as `exec.logCap`), each default as
// written, and every documented one read back by the parser.
TEST(ConfigReference, EveryFieldIsDocumentedWithItsDefault) {
  std::ifstream doc(std::string(SHOAL_SOURCE_DIR) + "/docs/operating.md");
  ASSERT_TRUE(doc) << "docs/operating.md";
  std::string line;
  bool in_reference = false;
  std::map<std::string, std::string> documented;  // field -> default cell
  std::regex row(R"(^\| `([A-Za-z.]+)` \| ([^|]+) \| [^|]+ \| [^|]+ \|$)");
  while (std::getline(doc, line)) {
    if (line == "## Configuration reference") in_reference = true;
    else if (line.rfind("## ", 0) == 0) in_reference = false;
    std::smatch match;
    if (in_reference && std::regex_match(line, match, row)) {
      std::string value = match[2];
      value.erase(value.find_last_not_of(' ') + 1);
      if (value.size() >= 2 && value.front() == '`' && value.back() == '`') value = value.substr(1, value.size() - 2);
      documented[match[1]] = value;
    }
  }
  ASSERT_FALSE(documented.empty());

  char pattern[] = "/tmp/shoal-reference.XXXXXX";
  std::string dir = mkdtemp(pattern);
  AgentFile defaults;
  defaults.cluster = "east";
  defaults.org = "acme";
  defaults.listen = "tcp://127.0.0.1:7001";
  defaults.cluster_config = "/etc/shoal/cluster.yaml";
  ASSERT_TRUE(write_agent_file(dir, defaults).is_ok());
  YAML::Node written = YAML::LoadFile(config_path(dir));
  std::set<std::string> fields;
  for (const auto& item : written) {
    std::string key = item.first.as<std::string>();
    if (!item.second.IsMap()) {
      fields.insert(key);
      continue;
    }
    for (const auto& nested : item.second) fields.insert(key + "." + nested.first.as<std::string>());
  }
  std::set<std::string> documented_fields;
  for (const auto& [field, value] : documented) documented_fields.insert(field);
  EXPECT_EQ(documented_fields, fields);
  for (const auto& [field, value] : documented) {
    if (value.front() == '(') continue;  // required, or none by default
    size_t dot = field.find('.');
    YAML::Node actual = dot == std::string::npos ? written[field] : written[field.substr(0, dot)][field.substr(dot + 1)];
    YAML::Emitter as_written, as_documented;
    as_written << actual;
    as_documented << YAML::Load(value);
    EXPECT_EQ(std::string(as_documented.c_str()), std::string(as_written.c_str())) << field;
  }
  // And what is written reads back.
  EXPECT_TRUE(load_agent_file(dir).is_ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace shoal::runtime
