// shoal-bench-e2e: real agents on loopback, one source and N targets,
// W workloads submitted at once (closed loop) or at a fixed rate (open loop,
// --rate), measured from the agents' own timestamps. Each run is
// a fresh federation; min / median / max over runs are printed, since this
// machine is shared and noisy. Several --workloads sizes print the ratio of
// the largest's median rate to the smallest's (no collapse: >= 0.9).
//
// Reported per run:
//   placements/s   W / (last start - first creation), both agent timestamps
//   p50/p99/max    creation at the source -> start at the target, per workload
//   balance        placements at the target with the fewest and the most
//   msgs/placement every message every agent sent, over W
//   sigs/placement every envelope every agent signed (a BATCH carries many
//                  messages under one signature), over W
//   CPU ms/placement  the source's user+system CPU over W (and the busiest target's,
//                  and all agents' together)
//   commits/placement  written batches (each one fsync of the WAL) of every agent, over W
//   bound          what this machine allows, measured in the same run: every signature,
//                  verification and commit the run needed, at the rates this process
//                  measures for them just before, spread over every core
//                  (cores / (sigs*t_sign + verifies*t_verify + commits*t_commit) per
//                  placement); the rate's ratio to it says how much of the machine
//                  the protocol's own cost leaves to everything else
//   CPU bound      cores / all agents' CPU per placement: what this run's own CPU
//                  cost allows when every agent shares this machine (rate at it: the
//                  machine, not the protocol, is the limit)
//   own-core bound 1 / the busiest agent's CPU per placement: the rate if each agent
//                  had a core of its own, as it does beside a real cluster
//                  (CPU is counted over the whole run, the rate only until the last
//                  start: a short run leaves most CANCEL/RELEASED work after its
//                  window, so its rate can exceed the CPU bound; compare long runs)
//
// --mesh: targets + 1 agents that all invite each other, each submitting its
// share with every other agent allowed ("9 agents, all submit");
// the "source" figures are then the busiest agent's.
//   src RSS MB     the source's VmRSS once every workload started: what holding W
//                  workloads costs (before the bench lists them)
//   peak MB        VmHWM of the source (listing W workloads as JSON included) and of
//                  the largest target
//   submit s       until `shoalctl submit` of all W answered (the one figure its user
//                  times: the wait at the prompt)
//
// --queue N measures the other scale: one agent whose own
// cluster (4 nodes x 8 cpu) runs 100 ms workloads, N of them submitted in
// manifests of 20,000 (a manifest is at most 4 MiB). While they drain it
// reports each submit's wait, the latency of a status request and of one
// `get workloads` page of 500 (sent on the control socket as shoalctl sends
// them, timed to the microsecond: the agent's answer, without starting a
// process; shoalctl adds about a millisecond), the drain rate against the cluster's (32 cpus /
// 100 ms = 320/s, from the agent's own counts), RSS, and how long SIGTERM
// takes to stop the agent.
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
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/time.h"
#include "crypto/identity.h"
#include "integration/harness.h"
#include "model/manifest.h"
#include "store/sqlite/database.h"

namespace shoal::bench {
namespace {

using nlohmann::json;
using shoal::testing::AgentProcess;
using shoal::testing::ControlClient;
using shoal::testing::invite_full_mesh;
using namespace std::chrono_literals;

struct Options {
  int targets = 8;
  std::vector<int> workloads{2000};
  int runs = 3;
  int timeout_seconds = 600;
  double rate = 0;  // workloads submitted per second (open loop); 0: all at once
  bool mesh = false;  // every agent invites every other and submits a share
  int queue = 0;    // > 0: the one-agent queue bench with this many workloads
  int queue_seconds = 20;  // how long the queue bench samples while draining
  std::vector<std::pair<std::string, std::string>> settings;  // agent.yaml KEY=VALUE for every agent
  int idle = 0;  // > 0: instead, this many agents in a full mesh, idle
  int idle_seconds = 30;
};

// This machine's speed at what the protocol pays per message and batch,
// measured now (the host is shared: a figure from another hour says little).
struct MachineSpeed {
  double signs_per_second = 0;
  double verifies_per_second = 0;
  double commits_per_second = 0;  // one-row WAL commits, synchronous=FULL (as the agents)
};

template <typename Step>
double rate_of(Step step, std::chrono::milliseconds budget) {
  auto began = std::chrono::steady_clock::now();
  uint64_t done = 0;
  std::chrono::duration<double> spent{};
  while (spent < budget) {
    for (int i = 0; i < 16; ++i) step();
    done += 16;
    spent = std::chrono::steady_clock::now() - began;
  }
  return static_cast<double>(done) / spent.count();
}

MachineSpeed measure_machine(const std::string& dir) {
  MachineSpeed speed;
  if (!crypto::initialize().is_ok()) return speed;
  crypto::Identity identity = crypto::Identity::generate();
  std::vector<uint8_t> envelope(512, 0x5a);  // about one BATCH of a few messages
  crypto::Signature signature = identity.sign(envelope);
  speed.signs_per_second = rate_of([&] { signature = identity.sign(envelope); }, 300ms);
  bool all_valid = true;
  speed.verifies_per_second = rate_of(
      [&] { all_valid &= crypto::verify(identity.public_key(), envelope, signature); }, 300ms);
  if (!all_valid) speed.verifies_per_second = 0;
  auto db = store::sqlite::Database::open(dir + "/commit-speed.db");
  if (db.is_ok() && (*db)->execute("CREATE TABLE t (v INTEGER)").is_ok()) {
    int64_t value = 0;
    speed.commits_per_second = rate_of(
        [&] {
          (void)(*db)->execute("BEGIN IMMEDIATE");
          (void)(*db)->execute("INSERT INTO t VALUES (" + std::to_string(++value) + ")");
          (void)(*db)->execute("COMMIT");
        },
        500ms);
  }
  return speed;
}

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
  int workloads = 0;
  double placements_per_second = 0;
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
  double messages_per_placement = 0;
  double signatures_per_placement = 0;
  double submit_seconds = 0;             // until `shoalctl submit` answered (what its user waits)
  std::map<std::string, int> placed_at;  // placements by cluster: the balance
  double source_cpu_ms_per_placement = 0, target_cpu_ms_per_placement = 0;
  double all_cpu_ms_per_placement = 0;    // over the agents' lives, start-up included
  double run_cpu_ms_per_placement = 0;    // from the first submission on
  double busiest_cpu_ms_per_placement = 0;  // of any one agent
  double commits_per_placement = 0;
  double verifies_per_placement = 0;
  double bound_placements_per_second = 0;
  double source_rss_mb = 0, source_peak_mb = 0, target_rss_mb = 0;
  std::map<std::string, uint64_t> sent_by_type;  // every agent's, by message type
};

// Whether each of `agents` soon sees `peers_each` peers Active (and, with
// `with_capacity`, advertising room to it).
bool all_see_active(const std::vector<AgentProcess*>& agents, int peers_each, bool with_capacity,
                    std::chrono::milliseconds timeout) {
  return shoal::testing::wait_until(
      [&] {
        for (AgentProcess* agent : agents) {
          json peers = agent->ctl_json({"peers"});
          if (peers.is_null()) return false;
          int active = 0;
          for (const auto& p : peers["items"]) {
            active += p.value("state", "") == "Active" && (!with_capacity || !p["capacity"].empty());
          }
          if (active < peers_each) return false;
        }
        return true;
      },
      timeout);
}

RunResult run_once(const Options& options, int workloads) {
  RunResult result;
  result.workloads = workloads;
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
  for (auto& agent : agents) {
    agent->init({"--cluster-config", cluster_file(agent->name())});
    for (const auto& [key, value] : options.settings) agent->set_config(key, value);
    if (!agent->start()) {
      std::fprintf(stderr, "%s did not start:\n%s\n", agent->name().c_str(), agent->log().c_str());
      return result;
    }
  }
  // Who submits: the one source, or (--mesh) every agent, each its share.
  std::vector<AgentProcess*> sources = {agents[0].get()};
  if (options.mesh) {
    std::vector<AgentProcess*> all;
    for (auto& agent : agents) all.push_back(agent.get());
    sources = all;
    invite_full_mesh(all, "default");
  } else {
    for (size_t i = 1; i < agents.size(); ++i) {
      // Only the targets invite the source.
      auto token = agents[i]->ctl(
          {"invite", "create", "--to", agents[0]->identity(), "--namespace", "default"});
      if (token.exit_code != 0 ||
          agents[0]->ctl({"invite", "accept", token.out.substr(0, token.out.find('\n'))})
                  .exit_code != 0) {
        std::fprintf(stderr, "invitation %s -> source failed: %s\n", agents[i]->name().c_str(),
                     token.err.c_str());
        return result;
      }
    }
  }
  // Every target Active, with capacity, at each source before the clock starts.
  int peers_each = options.targets;  // with --mesh, every other agent
  if (!all_see_active(sources, peers_each, /*with_capacity=*/true, 60s)) {
    std::fprintf(stderr, "targets did not all connect\n");
    return result;
  }
  // Closed loop: one manifest of every workload per source. Open loop: a
  // manifest per hundredth of a second, each submitted when its time comes
  // on the control socket (a shoalctl process per 10 ms would cost more
  // than the work).
  // A source's allow list is every agent but itself.
  std::vector<std::vector<std::string>> manifests(sources.size());
  std::vector<int> shares(sources.size(), workloads / static_cast<int>(sources.size()));
  shares[0] += workloads % static_cast<int>(sources.size());
  for (size_t s = 0; s < sources.size(); ++s) {
    std::string allow;
    for (auto& agent : agents) {
      if (agent.get() != sources[s]) allow += (allow.empty() ? "" : ", ") + agent->name();
    }
    double rate = options.rate / static_cast<double>(sources.size());
    int per_manifest = rate > 0 ? std::max(1, static_cast<int>(rate / 100)) : shares[s];
    for (int first = 0; first < shares[s]; first += per_manifest) {
      manifests[s].push_back(dir.path() + "/load-" + sources[s]->name() + "-" +
                             std::to_string(manifests[s].size()) + ".yaml");
      std::ofstream out(manifests[s].back());
      for (int i = first; i < std::min(shares[s], first + per_manifest); ++i) {
        out << "---\napiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: w" << i
            << ", namespace: default}\nspec: {resources: {cpu: \"1\"}, duration: 0s, placement: "
               "{clusters: ["
            << allow << "]}}\n";
      }
    }
  }
  // Open loop: each manifest as the request shoalctl submit sends (its
  // documents, checked, in JSON form), made before the clock starts as
  // shoalctl makes it before it sends.
  std::vector<std::vector<std::string>> open_loop_requests(sources.size());
  for (size_t s = 0; s < sources.size() && options.rate > 0; ++s) {
    for (const std::string& path : manifests[s]) {
      std::ifstream in(path);
      std::string text((std::istreambuf_iterator<char>(in)), {});
      auto documents = shoal::model::workload_documents_as_json(text);
      if (!documents.is_ok()) {
        std::fprintf(stderr, "%s: %s\n", path.c_str(), documents.status().message().c_str());
        return result;
      }
      json request{{"command", "submit"}, {"workloads", *documents}};
      open_loop_requests[s].push_back(request.dump());
    }
  }
  // What starting, inviting and connecting cost is not a placement's.
  std::vector<double> cpu_before_run;
  for (auto& agent : agents) cpu_before_run.push_back(use_of(agent->pid()).cpu_seconds);
  auto submit_began = std::chrono::steady_clock::now();
  std::vector<std::thread> submitters;
  std::vector<std::string> submit_errors(sources.size());
  for (size_t s = 0; s < sources.size(); ++s) {
    submitters.emplace_back([&, s] {
      if (options.rate <= 0) {
        auto submitted = sources[s]->ctl({"submit", "-f", manifests[s][0]});
        if (submitted.exit_code != 0) submit_errors[s] = submitted.err;
        return;
      }
      ControlClient control(sources[s]->data_dir());
      for (size_t i = 0; i < open_loop_requests[s].size(); ++i) {
        std::this_thread::sleep_until(submit_began + std::chrono::milliseconds(10 * i));
        json reply = json::parse(control.ask(open_loop_requests[s][i]), nullptr, false);
        if (!reply.is_object() || !reply.value("ok", false)) {
          submit_errors[s] = reply.is_object() ? reply.value("error", "?") : "no answer";
          return;
        }
      }
    });
  }
  for (auto& submitter : submitters) submitter.join();
  result.submit_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - submit_began).count();
  for (const auto& error : submit_errors) {
    if (!error.empty()) {
      std::fprintf(stderr, "submit failed: %s\n", error.c_str());
      return result;
    }
  }
  // Polls the counts (cheap), not the list: listing 20,000 workloads costs
  // the source more than placing them, and would be measured with them.
  bool done = shoal::testing::wait_until(
      [&] {
        size_t started = 0;
        for (AgentProcess* source : sources) {
          json status = source->ctl_json({"status"});
          if (status.is_null()) return false;
          started += status["workloads"]["started"].get<size_t>();
        }
        return started == static_cast<size_t>(workloads);
      },
      std::chrono::seconds(options.timeout_seconds));
  if (!done) {
    std::fprintf(stderr, "not every workload started within %d s\n", options.timeout_seconds);
    return result;
  }
  for (AgentProcess* source : sources) {
    result.source_rss_mb = std::max(result.source_rss_mb, use_of(source->pid()).rss_mb);
  }
  std::vector<int64_t> latencies;
  int64_t first_created = INT64_MAX, last_started = 0;
  for (AgentProcess* source : sources) {
    json list = source->ctl_json({"get", "workloads"});
    for (const auto& w : list["items"]) {
      int64_t created = millis_of(w["metadata"]["creationTimestamp"]);
      int64_t started = millis_of(w["status"]["startedAt"]);
      first_created = std::min(first_created, created);
      last_started = std::max(last_started, started);
      latencies.push_back(started - created);
      ++result.placed_at[w["status"]["cluster"].get<std::string>()];
    }
  }
  double seconds = static_cast<double>(std::max<int64_t>(1, last_started - first_created)) / 1000.0;
  result.placements_per_second = workloads / seconds;
  result.p50_ms = percentile(latencies, 0.50);
  result.p99_ms = percentile(latencies, 0.99);
  result.max_ms = percentile(latencies, 1.0);
  uint64_t sent = 0, signed_envelopes = 0, verified_envelopes = 0, commits = 0;
  for (auto& agent : agents) {
    json status = agent->ctl_json({"status"});
    if (status.is_null()) continue;
    sent += status["messages"]["sent"].get<uint64_t>();
    signed_envelopes += status["messages"]["envelopesSent"].get<uint64_t>();
    verified_envelopes += status["messages"]["envelopesReceived"].get<uint64_t>();
    commits += status["storage"]["commits"].get<uint64_t>();
    for (const auto& [type, count] : status["messages"]["sentByType"].items()) {
      result.sent_by_type[type] += count.get<uint64_t>();
    }
  }
  result.messages_per_placement = static_cast<double>(sent) / workloads;
  result.signatures_per_placement = static_cast<double>(signed_envelopes) / workloads;
  result.verifies_per_placement = static_cast<double>(verified_envelopes) / workloads;
  result.commits_per_placement = static_cast<double>(commits) / workloads;
  // Per agent; with --mesh every agent is a source, and the "source"
  // figures are the busiest agent's.
  for (size_t i = 0; i < agents.size(); ++i) {
    ProcessUse use = use_of(agents[i]->pid());
    double cpu_ms = use.cpu_seconds * 1000.0 / workloads;
    result.all_cpu_ms_per_placement += cpu_ms;
    result.run_cpu_ms_per_placement += (use.cpu_seconds - cpu_before_run[i]) * 1000.0 / workloads;
    result.busiest_cpu_ms_per_placement = std::max(result.busiest_cpu_ms_per_placement, cpu_ms);
    bool submits = i == 0 || options.mesh;
    if (submits) {
      result.source_cpu_ms_per_placement = std::max(result.source_cpu_ms_per_placement, cpu_ms);
      result.source_peak_mb = std::max(result.source_peak_mb, use.peak_rss_mb);
    }
    if (i > 0 || options.mesh) {
      result.target_cpu_ms_per_placement = std::max(result.target_cpu_ms_per_placement, cpu_ms);
      result.target_rss_mb = std::max(result.target_rss_mb, use.peak_rss_mb);
    }
  }
  result.complete = true;
  return result;
}

// An idle federation's cost: `options.idle` agents that all invite each
// other, connected, then left alone for idle_seconds (heartbeats, capacity,
// digests: what a federation pays when nothing is placed). Prints each
// agent's share of a core over that window.
int run_idle(const Options& options) {
  shoal::testing::TempDir dir;
  std::vector<std::unique_ptr<AgentProcess>> agents;
  std::vector<AgentProcess*> all;
  for (int i = 0; i < options.idle; ++i) {
    agents.push_back(std::make_unique<AgentProcess>("a" + std::to_string(i), dir.path()));
    AgentProcess& agent = *agents.back();
    agent.init();
    for (const auto& [key, value] : options.settings) agent.set_config(key, value);
    if (!agent.start()) {
      std::fprintf(stderr, "%s did not start:\n%s\n", agent.name().c_str(), agent.log().c_str());
      return 1;
    }
    all.push_back(&agent);
  }
  invite_full_mesh(all, "default");
  if (!all_see_active(all, options.idle - 1, /*with_capacity=*/false, 120s)) {
    std::fprintf(stderr, "the mesh did not connect within 120 s\n");
    return 1;
  }
  // Past the greetings and first advertisements of a fresh mesh.
  std::this_thread::sleep_for(std::chrono::seconds(5));
  auto sent_by_type = [&] {
    std::map<std::string, double> sent;
    for (AgentProcess* agent : all) {
      json status = agent->ctl_json({"status"});
      if (status.is_null()) continue;
      for (const auto& [type, count] : status["messages"]["sentByType"].items()) {
        sent[type] += count.get<double>();
      }
      sent["(envelopes)"] += status["messages"]["envelopesSent"].get<double>();
      sent["(commits)"] += status["storage"]["commits"].get<double>();
    }
    return sent;
  };
  std::map<std::string, double> sent_before = sent_by_type();
  std::vector<double> before;
  for (AgentProcess* agent : all) before.push_back(use_of(agent->pid()).cpu_seconds);
  auto began = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(options.idle_seconds));
  double window = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  std::vector<double> shares;
  for (size_t i = 0; i < all.size(); ++i) {
    shares.push_back(100.0 * (use_of(all[i]->pid()).cpu_seconds - before[i]) / window);
  }
  std::sort(shares.begin(), shares.end());
  double mean = 0;
  for (double share : shares) mean += share / static_cast<double>(shares.size());
  std::printf("%d agents in a full mesh, idle for %.0f s: CPU per agent mean %.2f %%, median %.2f %%, "
              "max %.2f %% of a core\n",
              options.idle, window, mean, shares[shares.size() / 2], shares.back());
  std::printf("  per agent per second:");
  for (const auto& [type, count] : sent_by_type()) {
    std::printf(" %s %.2f", type.c_str(), (count - sent_before[type]) / window / options.idle);
  }
  std::printf("\n");
  return 0;
}

double seconds_since(std::chrono::steady_clock::time_point began) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
}

int run_queue(const Options& options) {
  shoal::testing::TempDir dir;
  std::string cluster = dir.path() + "/cluster.yaml";
  std::ofstream(cluster) << "apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: solo}\n"
                            "spec:\n  nodes:\n  - {name: n, count: 4, capacity: {cpu: \"8\", "
                            "memory: 64Gi}}\n";
  AgentProcess agent("solo", dir.path());
  agent.init({"--cluster-config", cluster});
  if (!agent.start()) {
    std::fprintf(stderr, "the agent did not start:\n%s\n", agent.log().c_str());
    return 1;
  }
  const double cluster_rate = 32 / 0.1;
  std::printf("1 agent, %d workloads of 100 ms queued on 4 x 8 cpu (cluster rate %.0f/s)\n",
              options.queue, cluster_rate);
  constexpr int kPerManifest = 20000;
  for (int first = 0, part = 0; first < options.queue; first += kPerManifest, ++part) {
    std::string path = dir.path() + "/part-" + std::to_string(part) + ".yaml";
    {
      std::ofstream out(path);
      for (int i = first; i < std::min(options.queue, first + kPerManifest); ++i) {
        out << "---\napiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: w" << i
            << ", namespace: default}\nspec: {resources: {cpu: \"1\"}, duration: 100ms}\n";
      }
    }
    auto began = std::chrono::steady_clock::now();
    auto submitted = agent.ctl({"submit", "-f", path});
    if (submitted.exit_code != 0) {
      std::fprintf(stderr, "submit failed: %s\n", submitted.err.c_str());
      return 1;
    }
    std::printf("  submit of workloads %d-%d: %.2f s\n", first,
                std::min(options.queue, first + kPerManifest) - 1, seconds_since(began));
  }
  auto succeeded = [&]() -> int64_t {
    json status = agent.ctl_json({"status"});
    if (status.is_null()) return -1;
    return status["workloads"]["byPhase"].value("Succeeded", int64_t{0});
  };
  // Samples until the time is up: each control request's wait, alternating
  // the counts and one page of the list, ten times a second, the way an
  // operator's dashboard would watch.
  std::vector<int64_t> status_us, page_us;
  int64_t done_before = succeeded();
  ControlClient control(agent.data_dir());
  auto window_began = std::chrono::steady_clock::now();
  for (int sample = 0; seconds_since(window_began) < options.queue_seconds; ++sample) {
    std::this_thread::sleep_until(window_began + std::chrono::milliseconds(100) * sample);
    auto began = std::chrono::steady_clock::now();
    std::string status_text = control.ask(json{{"command", "status"}}.dump());
    status_us.push_back(static_cast<int64_t>(seconds_since(began) * 1e6));
    began = std::chrono::steady_clock::now();
    std::string page_text =
        control.ask(json{{"command", "get-workloads"}, {"limit", 500}}.dump());
    page_us.push_back(static_cast<int64_t>(seconds_since(began) * 1e6));
    json status = json::parse(status_text, nullptr, false);
    json page = json::parse(page_text, nullptr, false);
    if (!status.value("ok", false) || !page.value("ok", false) || page["items"].size() != 500) {
      std::fprintf(stderr, "a control request failed while the queue drained\n");
      return 1;
    }
  }
  int64_t done_after = succeeded();
  double window = seconds_since(window_began);
  double drained = static_cast<double>(done_after - done_before) / window;
  ProcessUse use = use_of(agent.pid());
  std::printf("  drain: %.0f/s over %.0f s (%.2f of the cluster's rate); %lld finished, %lld queued\n",
              drained, window, drained / cluster_rate, static_cast<long long>(done_after),
              static_cast<long long>(options.queue - done_after));
  std::printf("  status:                  p50 %.1f ms, p99 %.1f ms, max %.1f ms (%zu asked)\n",
              percentile(status_us, 0.5) / 1000, percentile(status_us, 0.99) / 1000,
              percentile(status_us, 1.0) / 1000, status_us.size());
  std::printf("  get workloads, 500 of them: p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
              percentile(page_us, 0.5) / 1000, percentile(page_us, 0.99) / 1000,
              percentile(page_us, 1.0) / 1000);
  std::printf("  RSS %.0f MB (peak %.0f MB)\n", use.rss_mb, use.peak_rss_mb);
  auto stop_began = std::chrono::steady_clock::now();
  agent.stop();
  std::printf("  SIGTERM -> exit: %.2f s (polled every 50 ms)\n", seconds_since(stop_began));
  return 0;
}

}  // namespace
}  // namespace shoal::bench

int main(int argc, char** argv) {
  using namespace shoal::bench;
  Options options;
  CLI::App app{
      "End-to-end placement load on real agents: one source, N targets, W workloads at once "
      "(or at --rate per second)."};
  app.add_option("--targets", options.targets, "Targets (the source invites none; each invites it)")
      ->check(CLI::Range(1, 16));
  app.add_option("--workloads", options.workloads,
                 "Workloads per run; several (2000,20000) compare the largest's rate with the "
                 "smallest's")
      ->delimiter(',')
      ->check(CLI::Range(1, 1000000));
  app.add_option("--runs", options.runs, "Fresh federations to measure")->check(CLI::Range(1, 20));
  app.add_option("--rate", options.rate,
                 "Open loop: submit this many workloads per second (every 10 ms); "
                 "0 submits all at once")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--timeout", options.timeout_seconds,
                 "Seconds a run may take to start every workload");
  app.add_flag("--mesh", options.mesh,
               "Targets + 1 agents that all invite each other and all submit (9 x 8: --targets 8)");
  app.add_option("--queue", options.queue,
                 "Instead: one agent with this many 100 ms workloads queued on its own 32 cpus "
                 "(control latency, drain rate, SIGTERM)")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--queue-seconds", options.queue_seconds,
                 "How long --queue samples while the queue drains")
      ->check(CLI::Range(1, 3600));
  app.add_option("--idle", options.idle,
                 "Instead: this many agents that all invite each other, left idle; prints each "
                 "agent's CPU")
      ->check(CLI::Range(2, 100));
  app.add_option("--idle-seconds", options.idle_seconds, "How long --idle measures")
      ->check(CLI::Range(1, 3600));
  std::vector<std::string> settings;
  app.add_option("--set", settings, "agent.yaml KEY=VALUE for every agent of the federation (repeatable), "
                                    "e.g. preferredWait=0s");
  CLI11_PARSE(app, argc, argv);
  for (const auto& setting : settings) {
    size_t equals = setting.find('=');
    if (equals == std::string::npos) {
      std::fprintf(stderr, "--set: expected KEY=VALUE, got \"%s\"\n", setting.c_str());
      return 2;
    }
    options.settings.emplace_back(setting.substr(0, equals), setting.substr(equals + 1));
  }
  if (options.queue > 0) return run_queue(options);
  if (options.idle > 0) return run_idle(options);
  shoal::testing::TempDir scratch;
  MachineSpeed speed = measure_machine(scratch.path());
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  std::printf("this machine now: %ld cores, Ed25519 sign %.0f/s, verify %.0f/s, WAL commit %.0f/s\n",
              cores, speed.signs_per_second, speed.verifies_per_second, speed.commits_per_second);
  std::vector<double> medians;
  for (int workloads : options.workloads) {
    std::printf("%s x %d targets, %d workloads, %s, %d runs\n",
                options.mesh ? std::to_string(options.targets + 1).c_str() : "1 source",
                options.targets, workloads,
                options.rate > 0 ? ("open loop at " + std::to_string(static_cast<int>(options.rate)) +
                                    "/s")
                                       .c_str()
                                 : "closed loop",
                options.runs);
    std::printf("%-6s %12s %7s %7s %7s %7s %9s %9s %10s %10s %10s %10s %9s %9s %9s %8s\n", "run",
                "placements/s", "bound", "p50 ms", "p99 ms", "max ms", "msgs/pl", "sigs/pl",
                "commits/pl", "src CPUms", "tgt CPUms", "all CPUms", "src RSS", "src peak",
                "tgt peak", "submit s");
    std::vector<double> rates;
    for (int run = 1; run <= options.runs; ++run) {
      RunResult r = run_once(options, workloads);
      if (!r.complete) {
        std::printf("%-6d incomplete\n", run);
        continue;
      }
      double seconds_per_placement =
          (speed.signs_per_second > 0 ? r.signatures_per_placement / speed.signs_per_second : 0) +
          (speed.verifies_per_second > 0 ? r.verifies_per_placement / speed.verifies_per_second
                                         : 0) +
          (speed.commits_per_second > 0 ? r.commits_per_placement / speed.commits_per_second : 0);
      double bound = seconds_per_placement > 0 ? static_cast<double>(cores) / seconds_per_placement
                                               : 0;
      rates.push_back(r.placements_per_second);
      std::printf(
          "%-6d %12.1f %6.2fx %7.0f %7.0f %7.0f %9.1f %9.2f %10.2f %10.2f %10.2f %10.2f %9.1f "
          "%9.1f %9.1f %8.2f\n",
          run, r.placements_per_second, bound > 0 ? r.placements_per_second / bound : 0, r.p50_ms,
          r.p99_ms, r.max_ms, r.messages_per_placement, r.signatures_per_placement,
          r.commits_per_placement, r.source_cpu_ms_per_placement, r.target_cpu_ms_per_placement,
          r.all_cpu_ms_per_placement, r.source_rss_mb, r.source_peak_mb, r.target_rss_mb,
          r.submit_seconds);
      int fewest = INT32_MAX, most = 0;
      for (const auto& [cluster, count] : r.placed_at) {
        fewest = std::min(fewest, count);
        most = std::max(most, count);
      }
      int clusters = options.targets + (options.mesh ? 1 : 0);
      if (static_cast<int>(r.placed_at.size()) < clusters) fewest = 0;
      double cpu_bound = static_cast<double>(cores) * 1000.0 / r.all_cpu_ms_per_placement;
      double own_core_bound = 1000.0 / r.busiest_cpu_ms_per_placement;
      std::printf(
          "       bounds (placements/s): sign/verify/commit %.0f, CPU %.0f (rate at %.2f of it), "
          "own-core %.0f\n",
          bound, cpu_bound, r.placements_per_second / cpu_bound, own_core_bound);
      std::printf("       all agents' CPU per placement from the first submission on: %.2f ms "
                  "(start-up and connecting: %.2f ms more)\n",
                  r.run_cpu_ms_per_placement, r.all_cpu_ms_per_placement - r.run_cpu_ms_per_placement);
      std::printf("       placements per cluster: fewest %d, most %d (of %d over %d clusters)\n",
                  fewest, most, workloads, clusters);
      std::printf("       messages per placement by type:");
      for (const auto& [type, count] : r.sent_by_type) {
        std::printf(" %s %.1f", type.c_str(), static_cast<double>(count) / workloads);
      }
      std::printf("\n");
      std::fflush(stdout);
    }
    if (rates.empty()) return 1;
    std::sort(rates.begin(), rates.end());
    medians.push_back(rates[rates.size() / 2]);
    std::printf("placements/s min / median / max: %.1f / %.1f / %.1f\n\n", rates.front(),
                rates[rates.size() / 2], rates.back());
  }
  if (medians.size() > 1) {
    std::printf("median rate at %d workloads / at %d: %.2f (no collapse: >= 0.90)\n",
                options.workloads.back(), options.workloads.front(),
                medians.back() / medians.front());
  }
  return 0;
}
