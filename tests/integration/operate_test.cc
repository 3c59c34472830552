// Operating one agent with real agents: the HTTP endpoint's
// /metrics scraped during a placement run (read by a strict parser of the
// Prometheus text format), /healthz, /readyz and the routing counts.
#include <gtest/gtest.h>
#include <httplib.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <fstream>

#include "harness.h"

namespace shoal::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// One metric family as the exposition declared it, and its samples by
// series ("name{labels as written}").
struct Family {
  std::string type;
  bool has_help = false;
  std::map<std::string, double> samples;
};

// A strict reader of the Prometheus text format 0.0.4: every sample's family
// declared (# TYPE) before it and its samples together; names and labels as
// the format allows; no series twice; counters named *_total and never
// negative; histogram buckets ascending and cumulative, +Inf equal to _count.
// Returns the families, or fails the test naming the line.
std::map<std::string, Family> parse_exposition(const std::string& text) {
  static const std::regex kName("[a-zA-Z_:][a-zA-Z0-9_:]*");
  static const std::regex kSample(
      R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*",?)*)\})? ([^ ]+)( -?[0-9]+)?)");
  static const std::regex kLabel(R"(([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)\")");
  std::map<std::string, Family> families;
  std::set<std::string> closed;  // families whose samples have ended
  std::string current;
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  EXPECT_TRUE(!text.empty() && text.back() == '\n') << "the exposition must end with a newline";
  while (std::getline(lines, line)) {
    ++number;
    std::string where = "line " + std::to_string(number) + ": " + line;
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
      std::istringstream words(line.substr(7));
      std::string name, rest;
      words >> name;
      std::getline(words, rest);
      EXPECT_TRUE(std::regex_match(name, kName)) << where;
      EXPECT_FALSE(closed.count(name)) << "family declared again after its samples: " << where;
      if (name != current && !current.empty()) closed.insert(current);
      current = name;
      Family& family = families[name];
      if (line[2] == 'H') {
        EXPECT_FALSE(family.has_help) << "second HELP: " << where;
        family.has_help = true;
      } else {
        EXPECT_TRUE(family.type.empty()) << "second TYPE: " << where;
        family.type = rest.empty() ? "" : rest.substr(1);
        EXPECT_TRUE(family.type == "counter" || family.type == "gauge" || family.type == "histogram" ||
                    family.type == "summary" || family.type == "untyped")
            << where;
      }
      continue;
    }
    EXPECT_NE(line.rfind('#', 0), 0u) << "a comment other than HELP or TYPE: " << where;
    EXPECT_FALSE(line.empty()) << "empty line " << number;
    std::smatch match;
    if (!std::regex_match(line, match, kSample)) {
      ADD_FAILURE() << "not a sample: " << where;
      continue;
    }
    std::string name = match[1];
    std::string family_name = name;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      std::string s(suffix);
      if (!families.count(name) && name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
        family_name = name.substr(0, name.size() - s.size());
      }
    }
    EXPECT_EQ(family_name, current) << "a sample outside its family's block: " << where;
    auto it = families.find(family_name);
    if (it == families.end() || it->second.type.empty()) {
      ADD_FAILURE() << "a sample before its # TYPE: " << where;
      continue;
    }
    std::string value_text = match[4];
    double value = 0;
    if (value_text == "+Inf") value = INFINITY;
    else if (value_text == "-Inf") value = -INFINITY;
    else if (value_text == "NaN") value = NAN;
    else {
      size_t used = 0;
      try {
        value = std::stod(value_text, &used);
      } catch (...) {
      }
      EXPECT_EQ(used, value_text.size()) << "not a number: " << where;
    }
    std::string series = name + "{" + match[3].str() + "}";
    EXPECT_FALSE(it->second.samples.count(series)) << "series twice: " << where;
    it->second.samples[series] = value;
    if (it->second.type == "counter") {
      EXPECT_TRUE(name.size() > 6 && name.compare(name.size() - 6, 6, "_total") == 0) << where;
      EXPECT_GE(value, 0) << where;
    }
  }
  // Histograms: buckets by le ascending and cumulative; +Inf equals _count.
  for (const auto& [name, family] : families) {
    EXPECT_FALSE(family.type.empty()) << name << " has no TYPE";
    EXPECT_TRUE(family.has_help) << name << " has no HELP";
    if (family.type != "histogram") continue;
    std::vector<std::pair<double, double>> buckets;
    for (const auto& [series, value] : family.samples) {
      if (series.rfind(name + "_bucket{", 0) != 0) continue;
      std::smatch le;
      std::string labels = series.substr(name.size() + 8);
      if (!std::regex_search(labels, le, kLabel)) {
        ADD_FAILURE() << "a bucket without le: " << series;
        continue;
      }
      buckets.emplace_back(le[2] == "+Inf" ? INFINITY : std::stod(le[2]), value);
    }
    std::sort(buckets.begin(), buckets.end());
    if (buckets.empty()) {
      ADD_FAILURE() << name << " has no buckets";
      continue;
    }
    EXPECT_TRUE(std::isinf(buckets.back().first)) << name << " has no +Inf bucket";
    for (size_t i = 1; i < buckets.size(); ++i) EXPECT_LE(buckets[i - 1].second, buckets[i].second) << name;
    EXPECT_EQ(buckets.back().second, family.samples.at(name + "_count{}")) << name;
    EXPECT_TRUE(family.samples.count(name + "_sum{}")) << name;
  }
  return families;
}

class Operate : public ::testing::Test {
 protected:
  void SetUp() override {
    for (AgentProcess* agent : {&source_, &target_}) {
      agent->init();
      int port = free_port();
      ports_[agent] = port;
      agent->set_config("metricsListen", "127.0.0.1:" + std::to_string(port));
      agent->set_config("heartbeatInterval", "300ms");
      ASSERT_TRUE(agent->start()) << agent->name() << "\n" << agent->log();
    }
    invite_full_mesh({&source_, &target_}, "default");
    ASSERT_TRUE(wait_until(
        [&] {
          json peers = source_.ctl_json({"peers"});
          return !peers.is_null() && !peers["items"].empty() && peers["items"][0]["state"] == "Active";
        },
        20s));
  }

  httplib::Result get(AgentProcess& agent, const std::string& path) {
    httplib::Client client("127.0.0.1", ports_[&agent]);
    client.set_connection_timeout(5);
    client.set_read_timeout(10);
    return client.Get(path.c_str());
  }

  std::map<std::string, Family> scrape(AgentProcess& agent) {
    auto response = get(agent, "/metrics");
    EXPECT_TRUE(response) << "no answer from /metrics";
    if (!response) return {};
    EXPECT_EQ(response->status, 200);
    EXPECT_EQ(response->get_header_value("Content-Type").rfind("text/plain; version=0.0.4", 0), 0u);
    return parse_exposition(response->body);
  }

  static double value(const std::map<std::string, Family>& families, const std::string& family,
                      const std::string& series) {
    auto it = families.find(family);
    if (it == families.end()) return -1;
    auto sample = it->second.samples.find(series);
    return sample == it->second.samples.end() ? -1 : sample->second;
  }

  TempDir dir_;
  AgentProcess source_{"source", dir_.path()};
  AgentProcess target_{"target", dir_.path()};
  std::map<AgentProcess*, int> ports_;
};

TEST_F(Operate, MetricsScrapedDuringAPlacementRunParseAndMoveAsExpected) {
  auto before = scrape(source_);
  EXPECT_EQ(value(before, "shoal_placements_total", "shoal_placements_total{outcome=\"bound\"}"), 0);
  EXPECT_EQ(value(before, "shoal_peers", "shoal_peers{state=\"Active\"}"), 1);
  EXPECT_EQ(value(before, "shoal_store_writable", "shoal_store_writable{}"), 1);

  // 40 workloads of a whole node each over 8 nodes: some wait in line.
  std::string manifest = write_workloads(dir_.path(), "job", 40, "8", "1s");
  ASSERT_EQ(source_.ctl({"submit", "-f", manifest}).exit_code, 0);
  // Scraped while placing: still a valid exposition.
  auto during = scrape(source_);
  EXPECT_GE(value(during, "shoal_workloads", "shoal_workloads{phase=\"Succeeded\"}"), 0);
  scrape(target_);
  ASSERT_TRUE(wait_until(
      [&] {
        json list = source_.ctl_json({"get", "workloads"});
        if (list.is_null() || list["items"].size() != 40) return false;
        for (const auto& w : list["items"]) {
          if (w["status"]["phase"] != "Succeeded") return false;
        }
        return true;
      },
      60s));
  auto after = scrape(source_);
  EXPECT_EQ(value(after, "shoal_placements_total", "shoal_placements_total{outcome=\"bound\"}"), 40);
  EXPECT_EQ(value(after, "shoal_placement_duration_seconds", "shoal_placement_duration_seconds_count{}"), 40);
  EXPECT_GT(value(after, "shoal_placement_duration_seconds", "shoal_placement_duration_seconds_sum{}"), 0);
  EXPECT_EQ(value(after, "shoal_workloads", "shoal_workloads{phase=\"Succeeded\"}"), 40);
  // (Messages to its own cluster never reach the wire: APPROVEs counted are the target's share.)
  EXPECT_GT(value(after, "shoal_messages_sent_total", "shoal_messages_sent_total{type=\"APPROVE\"}"), 0);
  EXPECT_GT(value(after, "shoal_messages_sent_total", "shoal_messages_sent_total{type=\"CANDIDATE\"}"),
            value(before, "shoal_messages_sent_total", "shoal_messages_sent_total{type=\"CANDIDATE\"}"));
  EXPECT_GT(value(after, "shoal_store_commits_total", "shoal_store_commits_total{result=\"written\"}"),
            value(before, "shoal_store_commits_total", "shoal_store_commits_total{result=\"written\"}"));
  EXPECT_GT(value(after, "shoal_store_commit_duration_seconds", "shoal_store_commit_duration_seconds_count{}"), 0);
  EXPECT_EQ(value(after, "shoal_messages_dropped_total", "shoal_messages_dropped_total{reason=\"BadSignature\"}"), 0);
  // The target ran some of them: its side moved too.
  auto at_target = scrape(target_);
  EXPECT_GT(value(at_target, "shoal_messages_received_total", "shoal_messages_received_total{type=\"CANDIDATE\"}"), 0);
  EXPECT_GT(value(at_target, "shoal_messages_sent_total", "shoal_messages_sent_total{type=\"READY\"}"), 0);
}

// More than one request holds (control::kMaxWorkloadsPerSubmit): shoalctl
// sends the file in parts, each workload in exactly one of them.
TEST_F(Operate, ALargeFileIsSubmittedInPartsEachWorkloadOnce) {
  std::string manifest = write_workloads(dir_.path(), "many", 250, "100m", "0s");
  CommandResult submitted = source_.ctl({"submit", "-f", manifest});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  std::set<std::string> said;
  std::istringstream lines(submitted.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(" submitted (uid ") != std::string::npos) {
      EXPECT_TRUE(said.insert(line).second) << line;
    }
  }
  EXPECT_EQ(said.size(), 250u);
  std::set<std::string> names;
  json list = source_.ctl_json({"get", "workloads"});
  for (const auto& item : list["items"]) names.insert(item["metadata"]["name"].get<std::string>());
  EXPECT_EQ(names.size(), 250u);
  EXPECT_TRUE(names.count("many-0") && names.count("many-249"));

  // 650 more of the same names, in seven parts, four in flight at a time:
  // the first three hold names taken and are refused whole; the fourth
  // (documents 301-400, all new) was in flight and is submitted; after a
  // refusal nothing more is sent. Nothing is submitted twice.
  std::string more = write_workloads(dir_.path(), "many", 650, "100m", "0s");
  CommandResult again = source_.ctl({"submit", "-f", more});
  EXPECT_NE(again.exit_code, 0);
  EXPECT_NE(again.err.find("documents 1-100 of 650 were not submitted: "), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("; documents 401-650 were not sent"), std::string::npos) << again.err;
  EXPECT_NE(again.out.find("workload default/many-300 submitted"), std::string::npos) << again.out;
  EXPECT_EQ(again.out.find("workload default/many-250 submitted"), std::string::npos) << again.out;
  names.clear();
  json after = source_.ctl_json({"get", "workloads"});
  for (const auto& item : after["items"]) {
    EXPECT_TRUE(names.insert(item["metadata"]["name"].get<std::string>()).second);
  }
  EXPECT_EQ(names.size(), 350u);
  EXPECT_TRUE(names.count("many-399") && !names.count("many-400"));
}

TEST_F(Operate, HealthReadinessAndTheRoutingCountsAnswer) {
  auto health = get(target_, "/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto ready = get(target_, "/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200) << ready->body;
  // Long workloads of the source run at the target (more than fit): its
  // namespace and cluster counts agree on how many.
  std::string manifest = write_workloads(dir_.path(), "long", 12, "8", "60s");
  ASSERT_EQ(source_.ctl({"submit", "-f", manifest}).exit_code, 0);
  // Placements go on while the test reads, so the cluster's cpu is read
  // between two namespace reads that agree: all three saw the same copies.
  json namespaces;
  json cpu;
  auto read_namespaces = [&]() -> json {
    auto response = get(target_, "/v1/metrics/namespace/workloads");
    if (!response || response->status != 200) return json();
    return json::parse(response->body, nullptr, false);
  };
  ASSERT_TRUE(wait_until(
      [&] {
        namespaces = read_namespaces();
        if (!namespaces.is_object() || namespaces["values"].value("default", 0.0) < 1) return false;
        auto cluster = get(target_, "/v1/metrics/cluster/cpu");
        if (!cluster || cluster->status != 200) return false;
        cpu = json::parse(cluster->body, nullptr, false);
        return read_namespaces() == namespaces;
      },
      20s))
      << namespaces.dump();
  EXPECT_EQ(namespaces["cluster"], "target");
  EXPECT_EQ(namespaces["domain"], "namespace");
  EXPECT_EQ(cpu["value"].get<double>(), namespaces["values"]["default"].get<double>() * 8) << cpu.dump();
  auto unknown = get(target_, "/v1/metrics/namespace/latency");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 400);
  EXPECT_NE(unknown->body.find("metric \\\"latency\\\": expected workloads, cpu, memory or queue"),
            std::string::npos)
      << unknown->body;
  // A stopped agent is not ready, and the endpoint goes with it.
  target_.stop();
  EXPECT_FALSE(get(target_, "/healthz"));
}

// YAML as shoalctl prints it, read back into JSON: a quoted scalar is a
// string; a plain one null, a boolean or a number.
json yaml_to_json(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& item : node) out[item.first.as<std::string>()] = yaml_to_json(item.second);
      return out;
    }
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const auto& item : node) out.push_back(yaml_to_json(item));
      return out;
    }
    case YAML::NodeType::Scalar: {
      const std::string& text = node.Scalar();
      if (node.Tag() == "!") return text;
      if (text == "~" || text == "null") return nullptr;
      if (text == "true" || text == "false") return text == "true";
      size_t used = 0;
      try {
        int64_t integer = std::stoll(text, &used);
        if (used == text.size()) return integer;
      } catch (...) {
      }
      return std::stod(text);
    }
    default:
      return nullptr;
  }
}

// The same document with every number 0: its shape and its texts.
json numbers_zeroed(const json& value) {
  if (value.is_number()) return 0;
  if (value.is_object() || value.is_array()) {
    json out = value;
    for (auto& item : out) item = numbers_zeroed(item);
    return out;
  }
  return value;
}

// The times a heartbeat moves (a peer's last message, its lease) blanked,
// wherever they are: under the sanitizers three reads span a heartbeat.
json heartbeat_times_blanked(const json& value) {
  if (!value.is_object() && !value.is_array()) return value;
  json out = value;
  for (auto it = out.begin(); it != out.end(); ++it) {
    bool moves = value.is_object() && (it.key() == "lastSeen" || it.key() == "leaseUntil");
    *it = moves ? json("") : heartbeat_times_blanked(*it);
  }
  return out;
}

TEST_F(Operate, EveryCommandsJsonEqualsItsYamlReadBack) {
  std::string manifest = write_workloads(dir_.path(), "job", 6, "1", "1s");
  ASSERT_EQ(source_.ctl({"submit", "-f", manifest}).exit_code, 0);
  ASSERT_TRUE(wait_until(
      [&] {
        json list = source_.ctl_json({"get", "workloads"});
        return !list.is_null() && list["items"].size() == 6 &&
               std::all_of(list["items"].begin(), list["items"].end(),
                           [](const json& w) { return w["status"]["phase"] == "Succeeded"; });
      },
      30s));
  std::vector<std::vector<std::string>> commands = {
      {"get", "workloads"},   {"get", "reservations"}, {"get", "clusters"},
      {"peers"},              {"invite", "list"},      {"describe", "workload", "default/job-1"},
      {"describe", "peer", "target"}, {"status"}};
  for (const auto& command : commands) {
    std::string what;
    for (const auto& word : command) what += word + " ";
    auto with = [&](const char* format) {
      std::vector<std::string> args = command;
      args.insert(args.end(), {"-o", format});
      return source_.ctl(args);
    };
    // Counters and last-seen times move between calls: compare a YAML read
    // between two equal JSON reads. (status counts the very requests that
    // read it: there, numbers are compared as numbers, not by value.)
    bool volatile_numbers = command[0] == "status";
    bool heartbeat_times = command[0] == "peers" || command[0] == "describe";
    bool compared = false;
    for (int attempt = 0; attempt < 20 && !compared; ++attempt) {
      CommandResult before = with("json"), yaml = with("yaml"), after = with("json");
      ASSERT_EQ(before.exit_code, 0) << what << before.err;
      ASSERT_EQ(yaml.exit_code, 0) << what << yaml.err;
      json first = json::parse(before.out, nullptr, false), second = json::parse(after.out, nullptr, false);
      ASSERT_FALSE(first.is_discarded()) << what << before.out;
      json from_yaml = yaml_to_json(YAML::Load(yaml.out));
      if (volatile_numbers) {
        first = numbers_zeroed(first);
        second = numbers_zeroed(second);
        from_yaml = numbers_zeroed(from_yaml);
      }
      if (heartbeat_times) {
        first = heartbeat_times_blanked(first);
        second = heartbeat_times_blanked(second);
        from_yaml = heartbeat_times_blanked(from_yaml);
      }
      if (first != second) continue;
      EXPECT_EQ(from_yaml, first) << what << "\n" << yaml.out;
      compared = true;
    }
    EXPECT_TRUE(compared) << what << ": never two equal JSON reads in a row";
  }
  // -o name: one kind/name per item.
  CommandResult names = source_.ctl({"get", "workloads", "-o", "name"});
  EXPECT_EQ(names.exit_code, 0) << names.err;
  EXPECT_NE(names.out.find("workload/default/job-1\n"), std::string::npos) << names.out;
  EXPECT_EQ(std::count(names.out.begin(), names.out.end(), '\n'), 6);
  CommandResult peers = source_.ctl({"peers", "-o", "name"});
  EXPECT_EQ(peers.out, "peer/target\n");
  // -o wide adds columns, and every table fits 120 columns.
  for (const auto& command : commands) {
    if (command[0] == "describe" || command[0] == "status") continue;
    std::vector<std::string> args = command;
    args.insert(args.end(), {"-o", "wide"});
    CommandResult wide = source_.ctl(args);
    EXPECT_EQ(wide.exit_code, 0) << wide.err;
    CommandResult plain = source_.ctl(command);
    std::string plain_header = plain.out.substr(0, plain.out.find('\n'));
    EXPECT_LE(plain_header.size(), 120u) << plain.out;
    std::string header = wide.out.substr(0, wide.out.find('\n'));
    EXPECT_GT(header.size(), plain_header.size()) << header;
  }
}

TEST_F(Operate, WatchShowsAWorkloadsPhasesInOrderAsTheAgentPushesThem) {
  CommandResult watched;
  std::thread watcher([&] {
    watched = run_command({bin_path("shoalctl"), "--data", source_.data_dir(), "get", "workloads", "-w", "-o", "json"},
                          60s);
  });
  std::string manifest = dir_.path() + "/one.yaml";
  std::ofstream(manifest) << "apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: watched, namespace: default}\n"
                             "spec: {resources: {cpu: \"8\"}, sim: {duration: 1s}}\n";
  ASSERT_TRUE(wait_until(
      [&] {
        json status = source_.ctl_json({"status"});
        return !status.is_null() && status["watches"] == 1;
      },
      10s));
  ASSERT_EQ(source_.ctl({"submit", "-f", manifest}).exit_code, 0);
  ASSERT_TRUE(wait_until(
      [&] {
        json described = source_.ctl_json({"describe", "workload", "default/watched"});
        return !described.is_null() && described["status"]["phase"] == "Succeeded";
      },
      20s));
  // The watch ends when the agent stops, and says so.
  source_.stop();
  watcher.join();
  EXPECT_NE(watched.exit_code, 0);
  EXPECT_NE(watched.err.find("the agent is stopping"), std::string::npos) << watched.err;
  std::vector<std::string> phases;
  std::istringstream lines(watched.out);
  std::string line;
  while (std::getline(lines, line)) {
    json item = json::parse(line, nullptr, false);
    ASSERT_TRUE(item.is_object()) << line;
    if (item["metadata"]["name"] != "watched") continue;
    std::string phase = item["status"]["phase"];
    if (phases.empty() || phases.back() != phase) phases.push_back(phase);
  }
  // In lifecycle order, ending Succeeded, and seen on the way (a batch may
  // carry two steps at once, so not every phase need show).
  const std::vector<std::string> order = {"Pending", "Placing", "Bound", "Running", "Succeeded"};
  ASSERT_GE(phases.size(), 2u) << watched.out;
  EXPECT_EQ(phases.back(), "Succeeded") << watched.out;
  for (size_t i = 1; i < phases.size(); ++i) {
    auto before = std::find(order.begin(), order.end(), phases[i - 1]);
    auto after = std::find(order.begin(), order.end(), phases[i]);
    EXPECT_LT(before, after) << phases[i - 1] << " then " << phases[i] << "\n" << watched.out;
  }
}

// (uid, epoch) -> phase of every reservation the agent holds for sources.
std::map<std::pair<std::string, uint64_t>, std::string> held_for_sources(AgentProcess& agent) {
  std::map<std::pair<std::string, uint64_t>, std::string> out;
  json list = agent.ctl_json({"get", "reservations"});
  if (list.is_null()) return out;
  for (const auto& r : list["items"]) {
    if (r["sourceCluster"] == "(local)") continue;
    out[{r["uid"].get<std::string>(), r["epoch"].get<uint64_t>()}] = r["phase"].get<std::string>();
  }
  return out;
}

TEST_F(Operate, ABackupTakenWhileRunningRestoresEveryReservation) {
  // Four of the source's workloads run at the target (it has four nodes).
  std::string manifest = write_workloads(dir_.path(), "long", 12, "8", "10m");
  ASSERT_EQ(source_.ctl({"submit", "-f", manifest}).exit_code, 0);
  std::map<std::pair<std::string, uint64_t>, std::string> held;
  ASSERT_TRUE(wait_until(
      [&] {
        held = held_for_sources(target_);
        return held.size() == 4 && std::all_of(held.begin(), held.end(),
                                               [](const auto& r) { return r.second == "Running"; });
      },
      20s));
  std::string copy = dir_.path() + "/target-backup.db";
  CommandResult backed_up = target_.ctl({"backup", copy});
  ASSERT_EQ(backed_up.exit_code, 0) << backed_up.err;
  EXPECT_NE(backed_up.out.find(copy), std::string::npos) << backed_up.out;
  CommandResult again = target_.ctl({"backup", copy});
  EXPECT_NE(again.exit_code, 0) << "an existing file is never overwritten";
  EXPECT_NE(again.err.find("exists"), std::string::npos) << again.err;

  // The database is lost; the backup takes its place.
  target_.stop();
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::filesystem::remove(target_.data_dir() + "/state.db" + suffix);
  }
  std::filesystem::copy_file(copy, target_.data_dir() + "/state.db");
  ASSERT_TRUE(target_.start()) << target_.log();
  EXPECT_EQ(held_for_sources(target_), held);
}

}  // namespace
}  // namespace shoal::testing
