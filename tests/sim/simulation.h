// One simulation from a Scenario: builds the federation, submits
// the trace, injects the faults, checks the invariants as it goes (not only
// at the end), and reports what happened — findings, a digest that replays
// bit for bit, and every job's times for the quality comparison with the
// ideal scheduler (ideal.h).
//
// Invariants, continuously (every `check_every` of simulated time):
// - each live agent's own invariants (Agent::broken_invariant);
// - never one copy holding resources (Bound or Running) on two clusters;
// - no node allocated beyond its capacity, ever (peak allocation);
// - an unapproved reservation is gone within its TTL (plus a tick);
// - a source never holds more at a target than its invitation's cpu limit;
// - liveness: once the network has healed, every workload ends within a
//   bound (the work left, drained at full capacity, plus the lifecycle
//   timers).
// And at the end, the chaos checker's verdict over every agent's committed
// records (tests/chaos/checker.h): no loss, exactly-once runs, capacity.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tests/sim/federation.h"
#include "tests/sim/scenario.h"

namespace shoal::sim {

struct JobOutcome {
  Duration arrival{0};       // after the start, as traced
  int64_t started_ms = -1;   // after the start; -1: never started
  int64_t finished_ms = -1;  // after the start; -1: never finished
  bool succeeded = false;
  uint32_t cluster = 0;  // where it (last) ran
};

struct RunOptions {
  Duration check_every = std::chrono::seconds(1);
  // Every agent's check_invariants() at each check (its cost grows with the
  // agent's state; large runs may sample instead).
  bool check_agents = true;
  // Stop at the first finding (a failing seed is replayed, not read twice).
  bool stop_at_first_finding = true;
  // A traced job's name (e.g. "j58"): its story — every event each agent
  // recorded for it, in world time — goes into SimResult::explanation.
  std::string explain;
  // Threads that run the agents' steps (FederationOptions::threads): the
  // same run for every count, in less wall time on more cores.
  int threads = 1;
  // FederationOptions::real_signatures: Ed25519 rather than the stand-in.
  bool real_signatures = false;
  // End the run at this much simulated time, finished or not (0: run until
  // every job has ended). A time-boxed run measures speed: it skips the
  // liveness bound and the final verdict over the records, which need every
  // job ended; the continuous checks still run.
  Duration stop_at{0};
  // Called after each check with the simulated time so far (for --progress).
  std::function<void(Duration simulated, Federation&)> progress;
};

struct SimResult {
  std::vector<std::string> findings;  // "invariant: detail"
  uint64_t digest = 0;
  Federation::Stats engine;
  Network::Stats network;
  Duration simulated{0};
  double wall_seconds = 0;
  std::vector<JobOutcome> jobs;  // by trace index
  int submitted = 0;
  int succeeded = 0;
  int failed = 0;
  int repeated_successes = 0;            // see chaos::check
  int evictions = 0;                     // copies the faults deleted at their targets
  // Workloads stopped by preemption, as the agents up at the end count them
  // (a restart forgets an agent's count).
  uint64_t preempted = 0;
  bool time_boxed = false;               // stopped at RunOptions::stop_at
  size_t open_at_stop = 0;               // jobs not yet ended then; SIZE_MAX: unknown
  std::vector<std::string> explanation;  // RunOptions::explain
};

SimResult run_simulation(const Scenario& scenario, const RunOptions& options);

// The timers every agent of a run gets: the defaults, or with
// `fast_timers` lease 2 s, worker lost 6 s, heartbeat 1 s (docs/simulation.md).
core::AgentConfig agent_config_for(const ScenarioOptions& options);

}  // namespace shoal::sim
