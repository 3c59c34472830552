// shoal-sim: the deterministic federation simulator (docs/simulation.md).
//
//   shoal-sim --seed 7 --agents 20 --faults          one run, invariants checked
//   shoal-sim --seeds 200 --agents 20 --faults       seeds 1..200, each on its own
//   shoal-sim --agents 100 --compare-ideal           quality against the ideal scheduler
//
// Exit status 0 when every run held every invariant. A failing seed prints
// the one command line that replays it exactly.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "common/time.h"
#include "crypto/identity.h"
#include "protocol/messages.h"
#include "tests/sim/ideal.h"
#include "tests/sim/scenario.h"
#include "tests/sim/simulation.h"

namespace {

using namespace shoal;
using namespace shoal::sim;

// A large run's state is gigabytes of small map nodes, each agent's
// scattered among every other's and read at random: with 4 KiB pages most
// of those reads miss the TLB as well as the cache (the 1,000-agent run is
// about 10 % faster on huge pages, docs/simulation.md). glibc's malloc backs
// its heap with transparent huge pages only when a tunable says so, and
// reads tunables only at start-up: so the simulator starts itself again,
// once, with it set. A GLIBC_TUNABLES already set is the caller's choice
// and left alone; if the exec fails the run goes on without.
void restart_on_huge_pages(char** argv) {
  if (std::getenv("GLIBC_TUNABLES") != nullptr) return;
  if (setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1", 1) != 0) return;
  execv("/proc/self/exe", argv);
}

// The process's peak resident memory, in MiB (VmHWM).
double peak_rss_mib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return 0;
}

std::string replay_command(const ScenarioOptions& o, const RunOptions& r, bool real_signatures) {
  std::ostringstream out;
  out << "shoal-sim --seed " << o.seed << " --agents " << o.agents << " --nodes " << o.nodes
      << " --node-cpu " << o.node_cpu_milli << " --graph " << graph_name(o.graph)
      << " --invited-by " << o.invited_by << " --orgs " << o.orgs << " --namespaces "
      << o.namespaces << " --workloads " << o.workloads << " --arrivals "
      << format_duration(o.arrivals) << " --load " << o.load << " --sigma " << o.duration_sigma;
  if (o.mean_duration.count() > 0) out << " --mean-duration " << format_duration(o.mean_duration);
  if (o.faults) out << " --faults";
  if (o.faults && !o.store_faults) out << " --no-store-faults";
  if (o.fast_timers) out << " --fast-timers";
  if (o.max_clock_skew.count() > 0) out << " --skew " << format_duration(o.max_clock_skew);
  if (o.dispatcher)
    out << " --dispatcher " << model::kDispatcherNames[static_cast<int>(*o.dispatcher)];
  if (o.ready_window.count() > 0) out << " --ready-window " << format_duration(o.ready_window);
  if (o.preemption) out << " --preemption";
  if (o.quota_cpu_milli > 0) out << " --quota-cpu " << o.quota_cpu_milli;
  out << " --group-commit " << (group_commit_on(o) ? "on" : "off");
  out << " --check-every " << format_duration(r.check_every);
  if (!r.check_agents) out << " --no-agent-checks";
  if (real_signatures) out << " --real-signatures";
  if (r.stop_at.count() > 0) out << " --stop-at " << format_duration(r.stop_at);
  return out.str();
}

nlohmann::json quality_json(const Quality& q) {
  return {{"jobs", q.jobs},
          {"meanJctSeconds", q.mean_jct_s},
          {"p99JctSeconds", q.p99_jct_s},
          {"meanWaitSeconds", q.mean_wait_s},
          {"makespanSeconds", q.makespan_s},
          {"utilization", q.utilization},
          {"shareError", q.share_error},
          {"highPriorityJobs", q.high_jobs},
          {"highPriorityMeanWaitSeconds", q.high_mean_wait_s},
          {"highPriorityP99WaitSeconds", q.high_p99_wait_s},
          {"lowPriorityMeanWaitSeconds", q.low_mean_wait_s}};
}

}  // namespace

int main(int argc, char** argv) {
  restart_on_huge_pages(argv);
  CLI::App app{
      "shoal-sim: N agents with the real core on a virtual clock, a seeded network and "
      "faults; checks the invariants as it runs and compares scheduling quality with an "
      "ideal central scheduler (docs/simulation.md)"};
  ScenarioOptions o;
  RunOptions r;
  int seeds = 1;
  std::string graph = "random", arrivals = "2m", mean_duration = "0s", skew = "0s",
              ready_window = "0s", check_every = "1s", dispatcher, output = "text";
  bool compare_ideal = false, no_agent_checks = false, keep_going = false, real_signatures = false;
  app.add_option("--seed", o.seed, "the run's seed (the first of --seeds)")->capture_default_str();
  app.add_option("--seeds", seeds, "run this many seeds, from --seed on")->capture_default_str();
  app.add_option("--agents", o.agents, "agents (clusters)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app.add_option("--nodes", o.nodes, "nodes per cluster")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  app.add_option("--node-cpu", o.node_cpu_milli, "millicores per node")->capture_default_str();
  app.add_option("--graph", graph, "invitations: full | random | orgs")->capture_default_str();
  app.add_option("--invited-by", o.invited_by, "random graph: each agent is invited by this many")
      ->capture_default_str();
  app.add_option("--orgs", o.orgs, "orgs graph: organizations")->capture_default_str();
  app.add_option("--namespaces", o.namespaces, "namespaces, equal fair-share weights")
      ->capture_default_str();
  app.add_option("--workloads", o.workloads, "jobs in the trace")->capture_default_str();
  app.add_option("--arrivals", arrivals, "Poisson arrivals spread over this window")
      ->capture_default_str();
  app.add_option("--load", o.load, "offered cpu load (sets the mean run time)")
      ->capture_default_str();
  app.add_option("--mean-duration", mean_duration, "mean run time instead of --load")
      ->capture_default_str();
  app.add_option("--sigma", o.duration_sigma, "lognormal shape of run times")
      ->capture_default_str();
  app.add_flag("--faults", o.faults,
               "crashes, pauses, partitions, cuts, lossy links, evictions and failing disks during "
               "arrivals");
  bool no_store_faults = false;
  app.add_flag("--no-store-faults", no_store_faults, "with --faults: no failing disks");
  app.add_flag("--fast-timers", o.fast_timers,
               "lifecycle timers in seconds (lease 2s, worker lost 6s)");
  app.add_option("--skew", skew, "clocks differ by up to this")->capture_default_str();
  app.add_option("--dispatcher", dispatcher,
                 "Preferred | AllAtOnce | Incremental | Sample (default: the agents', Preferred)");
  app.add_option("--ready-window", ready_window, "spec.placement.readyWindow of every job")
      ->capture_default_str();
  app.add_option("--check-every", check_every, "simulated time between invariant checks")
      ->capture_default_str();
  app.add_flag("--no-agent-checks", no_agent_checks,
               "skip each agent's own invariants (large runs)");
  app.add_flag("--compare-ideal", compare_ideal,
               "also run the ideal central scheduler and compare");
  app.add_flag("--preemption", o.preemption,
               "clusters preempt lower priority within queues; a fifth of the jobs have priority 100; "
               "invitations preemptible or not, ceiling 50");
  app.add_option("--quota-cpu", o.quota_cpu_milli,
                 "millicores: every agent's federation-wide quota for namespace ns-0 (0: none)");
  std::string group_commit = "by-seed";
  app.add_option("--group-commit", group_commit,
                 "quiet batches left open as shoald leaves them, lost by a crash: on, off, or by-seed "
                 "(on for odd seeds)")
      ->check(CLI::IsMember({"on", "off", "by-seed"}))
      ->capture_default_str();
  app.add_flag("--keep-going", keep_going, "with --seeds: run every seed even after one fails");
  app.add_flag("--real-signatures", real_signatures,
               "sign with Ed25519 as agents do (default: a keyed hash, hundreds of times cheaper; "
               "docs/simulation.md)");
  std::string stop_at = "0s";
  app.add_option("--stop-at", stop_at,
                 "end the run at this simulated time, finished or not (0s: when every job has "
                 "ended); skips the liveness bound and the final verdict, for timing")
      ->capture_default_str();
  Duration progress_every{0};
  std::string progress = "0s";
  app.add_option("--progress", progress,
                 "print how far the run got, and what the agents sent by message type, every this "
                 "much simulated time")
      ->capture_default_str();
  app.add_option("--threads", r.threads,
                 "threads that run the agents' steps; the run is the same for any count")
      ->capture_default_str();
  app.add_option("--explain", r.explain, "print every agent's events for this job (e.g. j58)");
  app.add_option("-o,--output", output, "text | json")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  auto fail = [](const std::string& message) {
    std::cerr << "shoal-sim: " << message << "\n";
    return 2;
  };
  o.store_faults = !no_store_faults;
  if (group_commit != "by-seed") o.group_commit = group_commit == "on";
  auto parsed_graph = graph_from_name(graph);
  if (!parsed_graph) return fail("--graph: expected full, random or orgs, got '" + graph + "'");
  o.graph = *parsed_graph;
  for (auto [text, field, target] :
       {std::tuple{&arrivals, "--arrivals", &o.arrivals},
        std::tuple{&mean_duration, "--mean-duration", &o.mean_duration},
        std::tuple{&skew, "--skew", &o.max_clock_skew},
        std::tuple{&ready_window, "--ready-window", &o.ready_window},
        std::tuple{&check_every, "--check-every", &r.check_every},
        std::tuple{&progress, "--progress", &progress_every},
        std::tuple{&stop_at, "--stop-at", &r.stop_at}}) {
    auto d = parse_duration(*text, field);
    if (!d.is_ok()) return fail(d.status().message());
    *target = *d;
  }
  if (r.check_every.count() <= 0) return fail("--check-every: expected a positive duration");
  if (r.stop_at.count() < 0) return fail("--stop-at: expected a duration of 0s or more");
  if (r.stop_at.count() > 0 && compare_ideal) {
    return fail("--stop-at: not with --compare-ideal, which needs every job ended");
  }
  if (r.threads < 1 || r.threads > 64) {
    return fail("--threads: expected 1 to 64, got " + std::to_string(r.threads));
  }
  // Fencing is sound only while clocks differ by less than the agents'
  // maxClockSkew (docs/lifecycle.md): a larger skew would report violations
  // the configuration itself allows.
  Duration allowed = agent_config_for(o).max_clock_skew;
  if (o.max_clock_skew > allowed) {
    return fail("--skew: expected at most the agents' maxClockSkew, " + format_duration(allowed) +
                (o.fast_timers ? " with --fast-timers" : ""));
  }
  if (!dispatcher.empty()) {
    // External would wait for nominations nobody makes.
    o.dispatcher = model::dispatcher_named(dispatcher);
    if (!o.dispatcher || *o.dispatcher == model::Dispatcher::kExternal)
      return fail("--dispatcher: expected Preferred, AllAtOnce, Incremental or Sample, got '" +
                  dispatcher + "'");
  }
  if (output != "text" && output != "json")
    return fail("-o: expected text or json, got '" + output + "'");
  r.check_agents = !no_agent_checks;
  if (progress_every.count() > 0) {
    auto wall_start = std::chrono::steady_clock::now();
    auto next = std::make_shared<Duration>(progress_every);
    r.progress = [=](Duration simulated, Federation& federation) {
      const Federation::Stats& stats = federation.stats();
      if (simulated + progress_every < *next) *next = progress_every;  // the next seed's run
      if (simulated < *next) return;
      *next = simulated + progress_every;
      double wall =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
      std::fprintf(
          stderr, "  %s simulated in %.1f s: %llu steps, %llu deliveries, peak RSS %.0f MiB\n",
          format_duration(simulated).c_str(), wall, static_cast<unsigned long long>(stats.steps),
          static_cast<unsigned long long>(stats.deliveries), peak_rss_mib());
      // What the agents sent, by message type, since their last boots: where
      // the traffic goes (envelopes carry one message, or a BATCH of several).
      std::array<uint64_t, protocol::kMaxMessageType + 1> sent{};
      uint64_t envelopes = 0;
      for (const auto& agent : federation.agents()) {
        if (!agent->up()) continue;
        const core::AgentStats& agent_stats = agent->agent->operations().stats();
        envelopes += agent_stats.envelopes_sent;
        for (size_t type = 0; type < sent.size(); ++type)
          sent[type] += agent_stats.sent_by_type[type];
      }
      std::string by_type;
      for (size_t type = 1; type < sent.size(); ++type) {
        if (sent[type] == 0) continue;
        by_type +=
            " " +
            std::string(protocol::message_type_name(static_cast<protocol::MessageType>(type))) +
            " " + std::to_string(sent[type]);
      }
      std::fprintf(stderr, "    sent: %llu envelopes;%s\n",
                   static_cast<unsigned long long>(envelopes), by_type.c_str());
    };
  }
  if (!crypto::initialize().is_ok()) return fail("libsodium did not initialize");
  r.real_signatures = real_signatures;

  int failed = 0;
  nlohmann::json runs = nlohmann::json::array();
  uint64_t first = o.seed;
  for (int i = 0; i < seeds; ++i) {
    o.seed = first + static_cast<uint64_t>(i);
    Scenario scenario = make_scenario(o);
    SimResult result = run_simulation(scenario, r);
    bool ok = result.findings.empty();
    nlohmann::json run = {
        {"seed", o.seed},
        {"ok", ok},
        {"digest", result.digest},
        {"agents", o.agents},
        {"groupCommit", group_commit_on(o)},
        {"batchesLeftOpen", result.engine.batches_left_open},
        {"openGroupsLost", result.engine.open_groups_lost},
        {"submitted", result.submitted},
        {"succeeded", result.succeeded},
        {"failed", result.failed},
        {"repeatedSuccesses", result.repeated_successes},
        {"simulatedSeconds", static_cast<double>(result.simulated.count()) / 1000.0},
        {"wallSeconds", result.wall_seconds},
        {"peakRssMiB", peak_rss_mib()},
        {"steps", result.engine.steps},
        {"deliveries", result.engine.deliveries},
        {"crashes", result.engine.crashes},
        {"readOnly", result.engine.read_only},
        {"evictions", result.evictions},
        {"preempted", result.preempted},
        {"messagesLost", result.network.dropped + result.network.dropped_by_cut},
        {"faults", scenario.faults.size()},
        {"findings", result.findings},
    };
    if (result.time_boxed) {
      run["stoppedAt"] = format_duration(r.stop_at);
      if (result.open_at_stop != SIZE_MAX) run["openAtStop"] = result.open_at_stop;
    }
    if (!r.explain.empty()) run["explanation"] = result.explanation;
    if (compare_ideal) {
      Quality shoal_quality = measure(scenario, result.jobs);
      Quality ideal_quality = measure(scenario, run_ideal(scenario));
      run["shoal"] = quality_json(shoal_quality);
      run["ideal"] = quality_json(ideal_quality);
      run["meanDurationSeconds"] = static_cast<double>(scenario.mean_duration.count()) / 1000.0;
    }
    if (!ok) {
      ++failed;
      run["replay"] = replay_command(o, r, real_signatures);
    }
    if (output == "text") {
      std::printf(
          "seed %llu: %s, %d/%d succeeded (%d failed), %.0f s simulated in %.1f s, %llu "
          "deliveries, "
          "%zu faults (%llu read-only), peak RSS %.0f MiB, digest %016llx\n",
          static_cast<unsigned long long>(o.seed), ok ? "ok" : "FAILED", result.succeeded,
          result.submitted, result.failed, static_cast<double>(result.simulated.count()) / 1000.0,
          result.wall_seconds, static_cast<unsigned long long>(result.engine.deliveries),
          scenario.faults.size(), static_cast<unsigned long long>(result.engine.read_only),
          peak_rss_mib(), static_cast<unsigned long long>(result.digest));
      if (compare_ideal) {
        for (const char* who : {"shoal", "ideal"}) {
          const auto& q = run[who];
          std::printf(
              "  %-5s mean JCT %.1f s, p99 JCT %.1f s, mean wait %.1f s, makespan %.0f s, "
              "utilization %.3f, share error %.3f\n",
              who, q["meanJctSeconds"].get<double>(), q["p99JctSeconds"].get<double>(),
              q["meanWaitSeconds"].get<double>(), q["makespanSeconds"].get<double>(),
              q["utilization"].get<double>(), q["shareError"].get<double>());
          if (q["highPriorityJobs"].get<int>() > 0) {
            std::printf("        priority 100: %d jobs, mean wait %.1f s, p99 wait %.1f s; the rest's mean wait %.1f s\n",
                        q["highPriorityJobs"].get<int>(), q["highPriorityMeanWaitSeconds"].get<double>(),
                        q["highPriorityP99WaitSeconds"].get<double>(),
                        q["lowPriorityMeanWaitSeconds"].get<double>());
          }
        }
      }
      if (result.time_boxed) {
        std::string open = result.open_at_stop == SIZE_MAX
                               ? "jobs still open unknown (an agent was down)"
                               : std::to_string(result.open_at_stop) + " jobs still open";
        std::printf("  time-boxed at %s: %s, final verdict skipped\n",
                    format_duration(r.stop_at).c_str(), open.c_str());
      }
      for (const std::string& finding : result.findings) std::printf("  %s\n", finding.c_str());
      for (const std::string& line : result.explanation) std::printf("  | %s\n", line.c_str());
      if (!r.explain.empty()) {
        for (const Fault& fault : scenario.faults)
          std::printf("  fault: %s\n", describe(fault).c_str());
      }
      if (!ok) std::printf("  replay: %s\n", replay_command(o, r, real_signatures).c_str());
      std::fflush(stdout);
    }
    runs.push_back(std::move(run));
    if (!ok && !keep_going) break;
  }
  if (output == "json") {
    std::cout << nlohmann::json{{"runs", runs}, {"failed", failed}}.dump(2) << "\n";
  } else if (seeds > 1) {
    std::printf("%zu seeds run, %d failed\n", runs.size(), failed);
  }
  return failed ? 1 : 0;
}
