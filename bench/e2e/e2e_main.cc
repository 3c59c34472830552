// shoal-bench-e2e: real agents on loopback, one source and N targets,
// W workloads submitted at once (closed loop), measured from the agents'
// own timestamps (issue 14). Each run is a fresh federation; min / median /
// max over runs are printed, since this machine is shared and noisy.
//
// Reported per run:
//   placements/s   W / (last start - first creation), both agent timestamps
//   p50/p99/max    creation at the source -> start at the target, per workload
//   balance        placements at the target with the fewest and the most
//   msgs/placement every message every agent sent, over W
//   sigs/placement every envelope every agent signed (a BATCH carries many
//                  messages under one signature), over W
//   CPU ms/placement  the source's user+system CPU over W (and the busiest target's)
//   src RSS MB     the source's VmRSS once every workload started: what holding W
//                  workloads costs (before the bench lists them)
//   peak MB        VmHWM of the source (listing W workloads as JSON included) and of
//                  the largest target
//   submit s       until `shoalctl submit` of all W answered (the one figure its user
//                  times: the wait at the prompt)
//
// The bench reports; it never passes or fails on a time.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/time.h"
#include "integration/harness.h"

namespace shoal::bench {
namespace {

using nlohmann::json;
using shoal::testing::AgentProcess;
using namespace std::chrono_literals;

struct Options {
  int targets = 8;
  int workloads = 2000;
  int runs = 3;
  int timeout_seconds = 600;
};

struct ProcessUse {
  double cpu_seconds = 0;
  double peak_rss_mb = 0;
  double rss_mb = 0;
};

ProcessUse use_of(int pid) {
  ProcessUse use;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  // Fields after the command name (which may hold spaces) start after ')'.
  size_t close = text.rfind(')');
  if (close != std::string::npos) {
    std::istringstream fields(text.substr(close + 2));
    std::string field;
    std::vector<std::string> values;
    while (fields >> field) values.push_back(field);
    // utime and stime are fields 14 and 15 of stat; values[0] is field 3.
    if (values.size() > 13) {
      double ticks = std::stod(values[11]) + std::stod(values[12]);
      use.cpu_seconds = ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
    }
  }
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) use.peak_rss_mb = std::stod(line.substr(6)) / 1024.0;
    if (line.rfind("VmRSS:", 0) == 0) use.rss_mb = std::stod(line.substr(6)) / 1024.0;
  }
  return use;
}

int64_t millis_of(const json& text) {
  auto parsed = parse_time(text.get<std::string>(), "time");
  return parsed.is_ok() ? to_millis(*parsed) : -1;
}

double percentile(std::vector<int64_t> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t index = static_cast<size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  return static_cast<double>(values[index]);
}

struct RunResult {
  bool complete = false;
  double placements_per_second = 0;
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
  double messages_per_placement = 0;
  double signatures_per_placement = 0;
  double submit_seconds = 0;             // until `shoalctl submit` answered (what its user waits)
  std::map<std::string, int> placed_at;  // placements by cluster: the balance
  double source_cpu_ms_per_placement = 0, target_cpu_ms_per_placement = 0;
  double source_rss_mb = 0, source_peak_mb = 0, target_rss_mb = 0;
  std::map<std::string, uint64_t> sent_by_type;  // every agent's, by message type
};

RunResult run_once(const Options& options) {
  RunResult result;
  shoal::testing::TempDir dir;
  std::vector<std::unique_ptr<AgentProcess>> agents;
  // The source's own cluster is kept out by the allow list; targets are
  // large enough that nothing waits.
  auto cluster_file = [&](const std::string& name) {
    std::string path = dir.path() + "/cluster-" + name + ".yaml";
    std::ofstream(path) << "apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: " << name
                        << "}\nspec:\n  nodes:\n  - {name: n, count: 8, capacity: {cpu: "
                           "\"100000\", memory: 100000Gi}}\n";
    return path;
  };
  agents.push_back(std::make_unique<AgentProcess>("source", dir.path()));
  for (int i = 0; i < options.targets; ++i) {
    agents.push_back(std::make_unique<AgentProcess>("t" + std::to_string(i), dir.path()));
  }
  std::string allow;
  for (size_t i = 0; i < agents.size(); ++i) {
    agents[i]->init({"--cluster-config", cluster_file(agents[i]->name())});
    if (!agents[i]->start()) {
      std::fprintf(stderr, "%s did not start:\n%s\n", agents[i]->name().c_str(),
                   agents[i]->log().c_str());
      return result;
    }
    if (i > 0) allow += (allow.empty() ? "" : ", ") + agents[i]->name();
  }
  AgentProcess& source = *agents[0];
  for (size_t i = 1; i < agents.size(); ++i) {
    // Only the targets invite the source.
    auto token =
        agents[i]->ctl({"invite", "create", "--to", source.identity(), "--namespace", "default"});
    if (token.exit_code != 0 ||
        source.ctl({"invite", "accept", token.out.substr(0, token.out.find('\n'))}).exit_code !=
            0) {
      std::fprintf(stderr, "invitation %s -> source failed: %s\n", agents[i]->name().c_str(),
                   token.err.c_str());
      return result;
    }
  }
  // Every target Active at the source before the clock starts.
  bool connected = shoal::testing::wait_until(
      [&] {
        json peers = source.ctl_json({"peers"});
        if (peers.is_null()) return false;
        int active = 0;
        for (const auto& p : peers["items"])
          active += p.value("state", "") == "Active" && !p["capacity"].empty();
        return active == options.targets;
      },
      60s);
  if (!connected) {
    std::fprintf(stderr, "targets did not all connect\n");
    return result;
  }
  std::string manifest = dir.path() + "/load.yaml";
  {
    std::ofstream out(manifest);
    for (int i = 0; i < options.workloads; ++i) {
      out << "---\napiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: w" << i
          << ", namespace: default}\nspec: {resources: {cpu: \"1\"}, duration: 0s, placement: "
             "{clusters: ["
          << allow << "]}}\n";
    }
  }
  auto submit_began = std::chrono::steady_clock::now();
  auto submitted = source.ctl({"submit", "-f", manifest});
  result.submit_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - submit_began).count();
  if (submitted.exit_code != 0) {
    std::fprintf(stderr, "submit failed: %s\n", submitted.err.c_str());
    return result;
  }
  // Polls the counts (cheap), not the list: listing 20,000 workloads costs
  // the source more than placing them, and would be measured with them.
  bool done = shoal::testing::wait_until(
      [&] {
        json status = source.ctl_json({"status"});
        return !status.is_null() && status["workloads"]["started"].get<size_t>() ==
                                        static_cast<size_t>(options.workloads);
      },
      std::chrono::seconds(options.timeout_seconds));
  if (!done) {
    std::fprintf(stderr, "not every workload started within %d s\n", options.timeout_seconds);
    return result;
  }
  result.source_rss_mb = use_of(source.pid()).rss_mb;
  json list = source.ctl_json({"get", "workloads"});
  std::vector<int64_t> latencies;
  int64_t first_created = INT64_MAX, last_started = 0;
  for (const auto& w : list["items"]) {
    int64_t created = millis_of(w["metadata"]["creationTimestamp"]);
    int64_t started = millis_of(w["status"]["startedAt"]);
    first_created = std::min(first_created, created);
    last_started = std::max(last_started, started);
    latencies.push_back(started - created);
    ++result.placed_at[w["status"]["cluster"].get<std::string>()];
  }
  double seconds = static_cast<double>(std::max<int64_t>(1, last_started - first_created)) / 1000.0;
  result.placements_per_second = options.workloads / seconds;
  result.p50_ms = percentile(latencies, 0.50);
  result.p99_ms = percentile(latencies, 0.99);
  result.max_ms = percentile(latencies, 1.0);
  uint64_t sent = 0, signed_envelopes = 0;
  for (auto& agent : agents) {
    json status = agent->ctl_json({"status"});
    if (status.is_null()) continue;
    sent += status["messages"]["sent"].get<uint64_t>();
    signed_envelopes += status["messages"]["envelopesSent"].get<uint64_t>();
    for (const auto& [type, count] : status["messages"]["sentByType"].items()) {
      result.sent_by_type[type] += count.get<uint64_t>();
    }
  }
  result.messages_per_placement = static_cast<double>(sent) / options.workloads;
  result.signatures_per_placement = static_cast<double>(signed_envelopes) / options.workloads;
  ProcessUse source_use = use_of(source.pid());
  result.source_cpu_ms_per_placement = source_use.cpu_seconds * 1000.0 / options.workloads;
  result.source_peak_mb = source_use.peak_rss_mb;
  for (size_t i = 1; i < agents.size(); ++i) {
    ProcessUse use = use_of(agents[i]->pid());
    result.target_cpu_ms_per_placement =
        std::max(result.target_cpu_ms_per_placement, use.cpu_seconds * 1000.0 / options.workloads);
    result.target_rss_mb = std::max(result.target_rss_mb, use.peak_rss_mb);
  }
  result.complete = true;
  return result;
}

}  // namespace
}  // namespace shoal::bench

int main(int argc, char** argv) {
  using namespace shoal::bench;
  Options options;
  CLI::App app{
      "End-to-end placement load on real agents: one source, N targets, W workloads at once."};
  app.add_option("--targets", options.targets, "Targets (the source invites none; each invites it)")
      ->check(CLI::Range(1, 16));
  app.add_option("--workloads", options.workloads, "Workloads submitted at once")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--runs", options.runs, "Fresh federations to measure")->check(CLI::Range(1, 20));
  app.add_option("--timeout", options.timeout_seconds,
                 "Seconds a run may take to start every workload");
  CLI11_PARSE(app, argc, argv);
  std::printf("1 source x %d targets, %d workloads, %d runs\n", options.targets, options.workloads,
              options.runs);
  std::printf("%-6s %14s %8s %8s %8s %14s %14s %14s %14s %12s %12s %12s %9s\n", "run",
              "placements/s", "p50 ms", "p99 ms", "max ms", "msgs/placement", "sigs/placement",
              "src CPU ms/pl", "tgt CPU ms/pl", "src RSS MB", "src peak MB", "tgt peak MB",
              "submit s");
  std::vector<double> rates;
  for (int run = 1; run <= options.runs; ++run) {
    RunResult r = run_once(options);
    if (!r.complete) {
      std::printf("%-6d incomplete\n", run);
      continue;
    }
    rates.push_back(r.placements_per_second);
    std::printf(
        "%-6d %14.1f %8.0f %8.0f %8.0f %14.1f %14.1f %14.2f %14.2f %12.1f %12.1f %12.1f %9.2f\n",
        run, r.placements_per_second, r.p50_ms, r.p99_ms, r.max_ms, r.messages_per_placement,
        r.signatures_per_placement, r.source_cpu_ms_per_placement, r.target_cpu_ms_per_placement,
        r.source_rss_mb, r.source_peak_mb, r.target_rss_mb, r.submit_seconds);
    int fewest = INT32_MAX, most = 0;
    for (const auto& [cluster, count] : r.placed_at) {
      fewest = std::min(fewest, count);
      most = std::max(most, count);
    }
    if (static_cast<int>(r.placed_at.size()) < options.targets) fewest = 0;
    std::printf("       placements per target: fewest %d, most %d (of %d over %d targets)\n",
                fewest, most, options.workloads, options.targets);
    std::printf("       messages per placement by type:");
    for (const auto& [type, count] : r.sent_by_type) {
      std::printf(" %s %.1f", type.c_str(), static_cast<double>(count) / options.workloads);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  if (rates.empty()) return 1;
  std::sort(rates.begin(), rates.end());
  std::printf("placements/s min / median / max: %.1f / %.1f / %.1f\n", rates.front(),
              rates[rates.size() / 2], rates.back());
  return 0;
}
