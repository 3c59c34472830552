// shoal-chaos: real shoald processes under a seeded schedule of faults.
//
// Five agents (two of them also submit work) invite each other in a full
// mesh with a cpu limit, as preemptible guests with a priority ceiling, and
// fencing timers of about a second; clusters preempt lower priority within
// a queue, and each source holds a federation-wide quota. While sources
// submit workloads of 0.5-15 s (restart policies, exit codes, replicas,
// groups of two clusters), the schedule SIGKILLs agents and restarts them,
// and SIGSTOPs them for less than a lease, past the lease, and past
// workerLostTimeout. Then every agent is healed, the work drains, the agents
// stop, and the checker (checker.h) judges the durable records. Live checks
// run meanwhile: no agent exits on its own, no unapproved reservation
// outlives its TTL, and a workload's terminal phase never changes.
//
// The seed prints first; the same seed replays the same schedule of faults
// and workloads (the timing of real processes varies around it). Exit code
// 0 when every invariant held, 1 with the findings otherwise (the agents'
// data directories are kept then), 2 on a usage or set-up error.
#include <CLI/CLI.hpp>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "common/time.h"
#include "tests/chaos/checker.h"
#include "tests/integration/harness.h"

namespace shoal::chaos {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using shoal::testing::AgentProcess;
using shoal::testing::CommandResult;
using Clock = std::chrono::steady_clock;

struct Options {
  uint64_t seed = 0;
  std::string duration_text = "3m";
  int kills = 0;  // > 0: run until this many SIGKILLs, whatever the duration
  int agents = 5;
  int sources = 2;
  bool quiet = false;
};

// Set by SIGINT/SIGTERM: end the faults early and still heal, drain and
// judge, so a long run cut short keeps its verdict.
volatile sig_atomic_t g_stop_requested = 0;
void request_stop(int) { g_stop_requested = 1; }

constexpr int64_t kInvitationCpuMilli = 6000;
// Every source's federation-wide quota of namespace default: well below
// what the mesh could run for it, so the quota is what holds work back.
constexpr int64_t kQuotaCpuMilli = 14000;
const model::Resources kNodeCapacity{4000, int64_t{16} << 30, 0};

// One agent and what the driver knows of it.
struct Member {
  std::unique_ptr<AgentProcess> process;
  std::string id;
  enum class State { kUp, kPaused, kDown } state = State::kUp;
  Clock::time_point up_since;  // running and not paused since
  Clock::time_point recover_at;
  bool source = false;
  int next_workload = 0;
  int in_flight = 0;  // not yet terminal, as last sampled
};

class ChaosRun {
 public:
  explicit ChaosRun(const Options& options)
      : options_(options), faults_(options.seed), work_(options.seed ^ 0x9e3779b97f4a7c15ULL) {}

  int run() {
    std::printf("shoal-chaos seed %llu (replay: scripts/chaos.sh --seed %llu%s)\n",
                static_cast<unsigned long long>(options_.seed),
                static_cast<unsigned long long>(options_.seed),
                options_.kills ? (" --kills " + std::to_string(options_.kills)).c_str()
                               : (" --duration " + options_.duration_text).c_str());
    std::fflush(stdout);
    if (!set_up()) return 2;
    inject_faults();
    heal_and_drain();
    for (auto& m : members_) m.process->stop();
    judge();
    print_summary();
    if (!findings_.empty()) {
      dir_.keep();
      std::printf("data directories kept in %s\n", dir_.path().c_str());
      return 1;
    }
    return 0;
  }

 private:
  bool set_up() {
    auto duration = parse_duration(options_.duration_text, "--duration");
    if (!duration.is_ok()) {
      std::fprintf(stderr, "shoal-chaos: %s\n", duration.status().message().c_str());
      return false;
    }
    duration_ = *duration;
    for (int i = 0; i < options_.agents; ++i) {
      std::string name = "c" + std::to_string(i);
      // Read again at every start: one file per agent.
      std::string cluster = dir_.path() + "/cluster-" + name + ".yaml";
      std::ofstream(cluster) << "apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: " << name
                             << "}\nspec:\n  preemption: {withinQueue: LowerPriority}\n"
                                "  nodes:\n  - {name: n, count: 2, capacity: {cpu: \"4\", memory: 16Gi}}\n";
      Member m;
      m.process = std::make_unique<AgentProcess>(name, dir_.path());
      m.process->init({"--cluster-config", cluster});
      // Fencing in about a second: renewals every 300ms, a copy stops 1s
      // after its source went quiet, the source re-places after 3s.
      for (auto [key, value] : {std::pair{"lease", "1s"}, {"maxClockSkew", "200ms"},
                                {"workerLostTimeout", "3s"}, {"gcInterval", "1s"},
                                {"heartbeatInterval", "300ms"}, {"pendingRetry", "500ms"},
                                {"pendingRetryMax", "2s"}, {"reservationTTL", "2s"}}) {
        m.process->set_config(key, value);
      }
      if (!m.process->start()) {
        std::fprintf(stderr, "shoal-chaos: %s did not start:\n%s\n", name.c_str(), m.process->log().c_str());
        return false;
      }
      m.id = m.process->ctl_json({"status"}).value("id", "");
      m.source = i < options_.sources;
      if (m.source) {
        CommandResult quota = m.process->ctl(
            {"quota", "set", "default", "--cpu", std::to_string(kQuotaCpuMilli) + "m"});
        if (quota.exit_code != 0) {
          std::fprintf(stderr, "shoal-chaos: quota at %s: %s\n", name.c_str(), quota.err.c_str());
          return false;
        }
      }
      m.up_since = Clock::now();
      members_.push_back(std::move(m));
    }
    std::vector<AgentProcess*> processes;
    for (auto& m : members_) processes.push_back(m.process.get());
    try {
      shoal::testing::invite_full_mesh(processes, "default",
                                       {"--cpu", std::to_string(kInvitationCpuMilli) + "m", "--preemptible",
                                        "--max-priority", "50"});
    } catch (const std::exception& e) {
      std::fprintf(stderr, "shoal-chaos: %s\n", e.what());
      return false;
    }
    return true;
  }

  // ---- the schedule ---------------------------------------------------------

  void inject_faults() {
    Clock::time_point start = Clock::now();
    Clock::time_point next_fault = start + 1s, next_submit = start, next_check = start + 1s;
    auto done = [&] {
      if (g_stop_requested) {
        log("asked to stop: ending the faults early");
        stopped_early_ = true;
        return true;
      }
      if (options_.kills > 0) return kills_ >= options_.kills;
      return Clock::now() - start >= duration_;
    };
    while (!done()) {
      Clock::time_point now = Clock::now();
      recover_due(now);
      if (now >= next_fault) {
        fault();
        next_fault = now + std::chrono::milliseconds(std::uniform_int_distribution<int>(300, 1500)(faults_));
      }
      if (now >= next_submit) {
        for (auto& m : members_) {
          if (m.source && m.state == Member::State::kUp) submit_batch(m);
        }
        next_submit = now + 700ms;
      }
      if (now >= next_check) {
        live_checks();
        next_check = now + 1s;
      }
      // The driver's own pace between scheduled actions, not a wait on the
      // agents: nothing here waits for them to reach a state.
      std::this_thread::sleep_for(50ms);
    }
  }

  void fault() {
    std::vector<Member*> up;
    int faulted = 0;
    for (auto& m : members_) {
      if (m.state == Member::State::kUp) up.push_back(&m);
      else ++faulted;
    }
    // Draw even when nothing can be faulted, so the schedule of draws stays
    // the same for a seed.
    size_t pick = std::uniform_int_distribution<size_t>(0, 1000)(faults_);
    int kind = std::uniform_int_distribution<int>(0, 3)(faults_);
    int64_t ms = 0;
    switch (kind) {
      case 0: ms = std::uniform_int_distribution<int64_t>(200, 5000)(faults_); break;  // killed
      case 1: ms = std::uniform_int_distribution<int64_t>(200, 800)(faults_); break;   // within a lease
      case 2: ms = std::uniform_int_distribution<int64_t>(1500, 2500)(faults_); break; // past the lease
      default: ms = std::uniform_int_distribution<int64_t>(3500, 6000)(faults_); break; // past workerLost
    }
    if (faulted >= 2 || up.empty()) return;  // keep a quorum of the mesh working
    Member& victim = *up[pick % up.size()];
    victim.recover_at = Clock::now() + std::chrono::milliseconds(ms);
    if (kind == 0) {
      victim.process->kill_hard();
      victim.state = Member::State::kDown;
      ++kills_;
      log("kill " + victim.process->name() + " for " + std::to_string(ms) + "ms");
    } else {
      victim.process->pause();
      victim.state = Member::State::kPaused;
      ++stops_;
      log("stop " + victim.process->name() + " for " + std::to_string(ms) + "ms");
    }
  }

  void recover_due(Clock::time_point now) {
    for (auto& m : members_) {
      if (m.state == Member::State::kUp || now < m.recover_at) continue;
      recover(m);
    }
  }

  void recover(Member& m) {
    if (m.state == Member::State::kPaused) {
      m.process->resume();
    } else if (m.state == Member::State::kDown) {
      if (!m.process->start()) {
        finding("liveness", m.process->name() + " did not restart:\n" + tail(m.process->log()));
      }
    }
    m.state = Member::State::kUp;
    m.up_since = Clock::now();
  }

  void submit_batch(Member& m) {
    if (m.in_flight > 40) return;  // a backlog past this only slows the run
    int count = std::uniform_int_distribution<int>(1, 3)(work_);
    std::ostringstream yaml;
    std::vector<std::string> names;
    for (int i = 0; i < count; ++i) {
      std::string name = "w" + std::to_string(m.next_workload++);
      names.push_back(name);
      static constexpr const char* kCpu[] = {"500m", "1", "1500m", "2"};
      const char* cpu = kCpu[std::uniform_int_distribution<int>(0, 3)(work_)];
      int duration_ms = std::uniform_int_distribution<int>(500, 15000)(work_);
      int shape = std::uniform_int_distribution<int>(0, 99)(work_);
      bool urgent = std::uniform_int_distribution<int>(0, 4)(work_) == 0;  // may preempt
      yaml << "---\napiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: " << name
           << ", namespace: default}\nspec:\n  resources: {cpu: \"" << cpu << "\", memory: 1Gi}\n"
           << "  duration: " << duration_ms << "ms\n  priority: " << (urgent ? 100 : 0) << "\n";
      if (shape < 10) {
        yaml << "  exitCode: 3\n  restartPolicy: Never\n";  // fails, and stays failed
      } else if (shape < 50) {
        yaml << "  restartPolicy: OnFailure\n";
      }
      if (shape >= 50 && shape < 65) yaml << "  placement: {numberOfClusters: 2}\n";
      if (shape >= 65 && shape < 75) yaml << "  replicas: 2\n";
    }
    std::string path = dir_.path() + "/submit-" + m.process->name() + ".yaml";
    std::ofstream(path) << yaml.str();
    CommandResult result = m.process->ctl({"submit", "-f", path});
    if (result.exit_code == 0) {
      submitted_[m.id].insert(names.begin(), names.end());
      m.in_flight += count;
    } else {
      log("submit at " + m.process->name() + " refused: " + result.err);
    }
  }

  // ---- live checks ----------------------------------------------------------

  void live_checks() {
    Clock::time_point now = Clock::now();
    for (auto& m : members_) {
      if (m.state == Member::State::kDown) continue;
      if (int status = m.process->reap_if_exited(); status != -1) {
        finding("no exit", m.process->name() + " exited on its own (wait status " +
                               std::to_string(status) + "):\n" + tail(m.process->log()));
        m.state = Member::State::kDown;
        m.recover_at = now;
        continue;
      }
      if (m.state != Member::State::kUp || now - m.up_since < 3s) continue;
      check_reservation_ttl(m);
      if (m.source) sample_phases(m);
    }
  }

  // An agent that has run for a while holds no unapproved reservation past
  // its TTL (2 s) by more than a tick and a commit.
  void check_reservation_ttl(Member& m) {
    json list = m.process->ctl_json({"get", "reservations"});
    if (list.is_null()) return;
    TimePoint wall = std::chrono::floor<std::chrono::milliseconds>(std::chrono::system_clock::now());
    for (const auto& r : list["items"]) {
      if (r.value("phase", "") != "Reserved") continue;
      auto expires = parse_time(r.value("expiresAt", ""), "expiresAt");
      if (expires.is_ok() && wall - *expires > 2s) {
        finding("reservation TTL", m.process->name() + " still holds " + r.value("name", "") +
                                       " reserved, expired at " + r.value("expiresAt", ""));
      }
    }
  }

  // A workload's terminal phase never changes once seen.
  void sample_phases(Member& m) {
    json list = m.process->ctl_json({"get", "workloads"});
    if (list.is_null()) return;
    int in_flight = 0;
    for (const auto& w : list["items"]) {
      std::string uid = w["metadata"].value("uid", "");
      std::string phase = w["status"].value("phase", "");
      bool terminal = phase == "Succeeded" || phase == "Failed";
      in_flight += !terminal;
      auto [seen, first] = terminal_phase_[m.id].try_emplace(uid, phase);
      if (!first && seen->second != phase) {
        finding("one terminal phase", m.process->name() + ": " + w["metadata"].value("name", "") +
                                          " was " + seen->second + ", now " + phase);
      }
      if (!terminal && first) terminal_phase_[m.id].erase(seen);
    }
    m.in_flight = in_flight;
  }

  // ---- the end --------------------------------------------------------------

  void heal_and_drain() {
    for (auto& m : members_) {
      if (m.state != Member::State::kUp) recover(m);
    }
    log("healed; draining");
    auto all_terminal = [&] {
      live_checks();
      for (auto& m : members_) {
        if (!m.source) continue;
        json list = m.process->ctl_json({"get", "workloads"});
        if (list.is_null()) return false;
        for (const auto& w : list["items"]) {
          std::string phase = w["status"].value("phase", "");
          if (phase != "Succeeded" && phase != "Failed") return false;
        }
      }
      return true;
    };
    if (!shoal::testing::wait_until(all_terminal, 180s)) {
      finding("liveness", "workloads still unfinished 180 s after the faults stopped");
    }
    // Copies still running where their source gave them up stop within a
    // lease; give them that, then the records decide.
    auto nothing_held = [&] {
      for (auto& m : members_) {
        json list = m.process->ctl_json({"get", "reservations"});
        if (list.is_null()) return false;
        for (const auto& r : list["items"]) {
          std::string phase = r.value("phase", "");
          if (phase == "Reserved" || phase == "Bound" || phase == "Running") return false;
        }
      }
      return true;
    };
    if (!shoal::testing::wait_until(nothing_held, 30s)) {
      finding("liveness", "reservations still held 30 s after every workload finished");
    }
  }

  void judge() {
    std::vector<AgentRecords> records;
    for (auto& m : members_) {
      auto loaded = load_records(m.process->name(), m.id, m.process->data_dir() + "/state.db");
      if (!loaded.is_ok()) {
        finding("integrity", m.process->name() + ": " + loaded.status().message());
        continue;
      }
      runs_ += loaded->runs.size();
      for (const auto& w : loaded->workloads) {
        if (!w.parent.empty()) continue;
        ++workloads_;
        succeeded_ += w.phase == model::Phase::kSucceeded;
      }
      records.push_back(std::move(loaded).value());
    }
    Expectations expected;
    expected.submitted = submitted_;
    expected.quota_cpu_milli = kQuotaCpuMilli;
    expected.node_capacity = kNodeCapacity;
    expected.invitation_cpu_milli = kInvitationCpuMilli;
    for (auto& f : check(records, expected, &repeated_successes_)) findings_.push_back(std::move(f));
    // A run that placed nothing, or killed nothing, tested nothing.
    if (workloads_ == 0) finding("coverage", "no workload was accepted, so none could be checked");
    if (kills_ == 0) finding("coverage", "no agent was killed; run longer (--duration) or ask for --kills");
    if (succeeded_ == 0 && workloads_ > 0) finding("coverage", "no workload succeeded");
  }

  void print_summary() {
    std::printf(
        "shoal-chaos seed %llu: %d agents, %d SIGKILLs, %d SIGSTOPs, %d workloads (%d succeeded), "
        "%zu runs, %d repeated successes%s; %s\n",
        static_cast<unsigned long long>(options_.seed), options_.agents, kills_, stops_, workloads_,
        succeeded_, runs_, repeated_successes_, stopped_early_ ? " (stopped early when asked)" : "",
        findings_.empty() ? "every invariant held" : "INVARIANTS BROKEN");
    for (const auto& f : findings_) std::printf("  [%s] %s\n", f.invariant.c_str(), f.detail.c_str());
  }

  void finding(const std::string& invariant, const std::string& detail) {
    findings_.push_back({invariant, detail});
    log("FINDING [" + invariant + "] " + detail);
  }

  void log(const std::string& text) {
    if (options_.quiet) return;
    std::printf("%s %s\n", format_time(std::chrono::floor<std::chrono::milliseconds>(std::chrono::system_clock::now())).c_str(), text.c_str());
    std::fflush(stdout);
  }

  static std::string tail(const std::string& text) {
    return text.size() > 2000 ? text.substr(text.size() - 2000) : text;
  }

  Options options_;
  std::mt19937_64 faults_, work_;
  Duration duration_{};
  shoal::testing::TempDir dir_;
  std::vector<Member> members_;
  std::map<std::string, std::set<std::string>> submitted_;
  std::map<std::string, std::map<std::string, std::string>> terminal_phase_;
  std::vector<Finding> findings_;
  int kills_ = 0, stops_ = 0, workloads_ = 0, succeeded_ = 0, repeated_successes_ = 0;
  size_t runs_ = 0;
  bool stopped_early_ = false;
};

}  // namespace
}  // namespace shoal::chaos

int main(int argc, char** argv) {
  shoal::chaos::Options options;
  options.seed = std::random_device{}();
  CLI::App app{"Runs real shoald agents under a seeded schedule of SIGKILL and SIGSTOP and checks "
               "exactly-once and the other invariants from their durable records."};
  app.add_option("--seed", options.seed, "Seed of the schedule (default: random; printed first)");
  app.add_option("--duration", options.duration_text, "How long to inject faults (e.g. 3m)");
  app.add_option("--kills", options.kills, "Inject faults until this many SIGKILLs instead");
  app.add_option("--agents", options.agents, "Agents in the mesh")->check(CLI::Range(3, 9));
  app.add_option("--sources", options.sources, "How many of them submit work")->check(CLI::Range(1, 9));
  app.add_flag("--quiet", options.quiet, "Print only the seed and the summary");
  CLI11_PARSE(app, argc, argv);
  if (options.sources > options.agents) {
    std::fprintf(stderr, "shoal-chaos: --sources %d: expected at most --agents (%d)\n", options.sources,
                 options.agents);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  // Send these to shoal-chaos alone (kill -INT PID): a terminal's Ctrl-C
  // also reaches the agents, which the checker then reports as exits.
  signal(SIGINT, shoal::chaos::request_stop);
  signal(SIGTERM, shoal::chaos::request_stop);
  return shoal::chaos::ChaosRun(options).run();
}
