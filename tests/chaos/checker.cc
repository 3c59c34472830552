#include "tests/chaos/checker.h"

#include <algorithm>
#include <limits>
#include <tuple>

#include "common/time.h"

namespace shoal::chaos {
namespace {

constexpr int64_t kOpen = std::numeric_limits<int64_t>::max();

// A run and where it happened.
struct Placed {
  const store::RunRecord* run;
  std::string cluster;
  int64_t start() const { return run->started_at_ms; }
  int64_t end() const { return run->finished_at_ms ? run->finished_at_ms : kOpen; }
  bool overlaps(const Placed& other) const {
    return start() < other.end() && other.start() < end();
  }
  std::string describe() const {
    return run->name + " epoch " + std::to_string(run->epoch) + " at " + cluster + " [" +
           format_time(from_millis(start())) + ", " +
           (run->finished_at_ms ? format_time(from_millis(end())) : std::string("still holding")) +
           ") " + run->phase + (run->message.empty() ? "" : " (" + run->message + ")");
  }
};

// Sweeps intervals (finishes before starts at the same instant) and reports
// the first moment the summed amount passes `limit`.
struct Interval {
  int64_t start, end, amount;
  std::string what;
};
std::optional<std::string> first_excess(std::vector<Interval> intervals, int64_t limit) {
  std::vector<std::tuple<int64_t, int, int64_t, const std::string*>> edges;
  for (const auto& i : intervals) {
    edges.emplace_back(i.start, 1, i.amount, &i.what);
    if (i.end != kOpen) edges.emplace_back(i.end, 0, -i.amount, &i.what);
  }
  std::sort(edges.begin(), edges.end(), [](const auto& a, const auto& b) {
    return std::tie(std::get<0>(a), std::get<1>(a)) < std::tie(std::get<0>(b), std::get<1>(b));
  });
  int64_t sum = 0;
  for (const auto& [at, kind, amount, what] : edges) {
    sum += amount;
    if (sum > limit) {
      return std::to_string(sum) + " > " + std::to_string(limit) + " at " +
             format_time(from_millis(at)) + " when " + *what + " started";
    }
  }
  return std::nullopt;
}

}  // namespace

std::vector<Finding> check(const std::vector<AgentRecords>& agents, const Expectations& expected,
                           int* repeated_successes) {
  std::vector<Finding> findings;
  auto report = [&](const std::string& invariant, const std::string& detail) {
    findings.push_back({invariant, detail});
  };

  // Runs by the copy they belong to: (source id, uid).
  std::map<std::pair<std::string, std::string>, std::vector<Placed>> runs_of;
  for (const auto& agent : agents) {
    if (agent.integrity != "ok") report("integrity", agent.cluster + ": " + agent.integrity);
    for (const auto& run : agent.runs) runs_of[{run.source, run.uid}].push_back({&run, agent.cluster});
  }

  for (const auto& agent : agents) {
    // Every accepted workload is there and finished.
    std::set<std::string> present;
    for (const auto& w : agent.workloads) {
      if (!w.parent.empty()) continue;
      present.insert(w.spec.name);
      if (!model::is_finished(w.phase)) {
        report("terminal", agent.cluster + ": " + w.spec.name + " ended the run " +
                               std::string(model::phase_name(w.phase)) + " (" + w.reason + ")");
      }
    }
    if (auto it = expected.submitted.find(agent.id); it != expected.submitted.end()) {
      for (const auto& name : it->second) {
        if (!present.count(name)) report("no loss", agent.cluster + ": " + name + " was accepted and is gone");
      }
    }
    // A copy that Succeeded at its source ran successfully exactly once.
    // (Group rows have no runs of their own; their copies are rows too.)
    std::map<std::string, std::vector<const store::WorkloadRecord*>> copies_of;
    for (const auto& w : agent.workloads) {
      if (!w.parent.empty()) copies_of[w.parent].push_back(&w);
    }
    // Each workload (or copy) ends as its own exit code says: exit 0
    // Succeeded, any other Failed with that code. An end it did not cause
    // (its cluster lost, killed or restarted) is the scheduler's to undo.
    for (const auto& w : agent.workloads) {
      if (copies_of.count(w.uid) || !model::is_finished(w.phase)) continue;
      const int32_t own_exit = w.spec.sim.exit_code;
      if (own_exit == 0 && w.phase != model::Phase::kSucceeded) {
        report("outcome", agent.cluster + ": " + w.spec.name + " exits 0 but ended " +
                              std::string(model::phase_name(w.phase)) + " (" + w.reason + ")");
      } else if (own_exit != 0 && (w.phase != model::Phase::kFailed || w.exit_code != own_exit)) {
        report("outcome", agent.cluster + ": " + w.spec.name + " exits " + std::to_string(own_exit) +
                              " but ended " + std::string(model::phase_name(w.phase)) + " with exit code " +
                              std::to_string(w.exit_code) + " (" + w.reason + ")");
      }
    }
    for (const auto& w : agent.workloads) {
      if (copies_of.count(w.uid) || w.phase != model::Phase::kSucceeded) continue;
      const auto& runs = runs_of[{agent.id, w.uid}];
      auto succeeded = std::count_if(runs.begin(), runs.end(),
                                     [](const Placed& p) { return p.run->phase == "Succeeded"; });
      if (succeeded == 0) {
        report("exactly-once", agent.cluster + ": " + w.spec.name + " is Succeeded with no successful run");
      }
    }
    // Copies of one group: never two on one cluster at once, and never two
    // that succeeded on the same cluster.
    for (const auto& [parent, copies] : copies_of) {
      for (size_t a = 0; a < copies.size(); ++a) {
        for (size_t b = a + 1; b < copies.size(); ++b) {
          for (const auto& x : runs_of[{agent.id, copies[a]->uid}]) {
            for (const auto& y : runs_of[{agent.id, copies[b]->uid}]) {
              if (x.cluster != y.cluster) continue;
              bool both_succeeded = x.run->phase == "Succeeded" && y.run->phase == "Succeeded";
              if (x.overlaps(y) || both_succeeded) {
                report("group spread", agent.cluster + ": copies " +
                                           std::to_string(copies[a]->copy_index) + " and " +
                                           std::to_string(copies[b]->copy_index) + " of " +
                                           copies[a]->spec.name + " both on " + x.cluster + ": " +
                                           x.describe() + " / " + y.describe());
              }
            }
          }
        }
      }
    }
  }

  // Exactly once, per copy: runs never overlap and none still holds its
  // nodes. A second success after the first (a copy cut off with its
  // cluster finished before its lease ended, but the source had placed it
  // again before it could hear) is the price of re-placing lost work at all:
  // counted, not a violation (docs/reliability.md).
  for (auto& [key, runs] : runs_of) {
    std::sort(runs.begin(), runs.end(),
              [](const Placed& a, const Placed& b) { return a.start() < b.start(); });
    int succeeded = 0;
    for (size_t i = 0; i < runs.size(); ++i) {
      succeeded += runs[i].run->phase == "Succeeded";
      if (!runs[i].run->finished_at_ms) {
        report("exactly-once", "a run outlived the chaos run: " + runs[i].describe());
      }
      for (size_t j = i + 1; j < runs.size(); ++j) {
        if (runs[i].overlaps(runs[j])) {
          report("exactly-once", "two runs at once: " + runs[i].describe() + " and " + runs[j].describe());
        }
      }
    }
    if (succeeded > 1 && repeated_successes) *repeated_successes += succeeded - 1;
  }

  // A source's federation-wide quota: its runs of the namespace on every cluster at once.
  if (expected.quota_cpu_milli > 0) {
    std::map<std::string, std::vector<Interval>> cpu_of_source;
    for (const auto& agent : agents) {
      for (const auto& run : agent.runs) {
        if (run.namespace_name != "default") continue;
        Placed placed{&run, agent.cluster};
        cpu_of_source[run.source].push_back(
            {placed.start(), placed.end(), run.per_replica.cpu_milli * static_cast<int64_t>(run.nodes.size()),
             placed.describe()});
      }
    }
    for (auto& [source, intervals] : cpu_of_source) {
      if (auto excess = first_excess(intervals, expected.quota_cpu_milli)) {
        report("federation quota", "source " + source.substr(0, 8) + ": cpu " + *excess);
      }
    }
  }

  // Capacity: every node of every cluster, and every invitation's cpu limit.
  for (const auto& agent : agents) {
    std::map<std::string, std::vector<Interval>> cpu_on, memory_on;
    std::map<std::string, std::vector<Interval>> cpu_of_source;
    for (const auto& run : agent.runs) {
      Placed placed{&run, agent.cluster};
      std::string what = placed.describe();
      for (const auto& node : run.nodes) {
        cpu_on[node].push_back({placed.start(), placed.end(), run.per_replica.cpu_milli, what});
        memory_on[node].push_back({placed.start(), placed.end(), run.per_replica.memory_bytes, what});
      }
      if (run.source != agent.id) {
        cpu_of_source[run.source].push_back(
            {placed.start(), placed.end(),
             run.per_replica.cpu_milli * static_cast<int64_t>(run.nodes.size()), what});
      }
    }
    for (auto& [node, intervals] : cpu_on) {
      if (auto excess = first_excess(intervals, expected.node_capacity.cpu_milli)) {
        report("node capacity", agent.cluster + "/" + node + " cpu " + *excess);
      }
    }
    for (auto& [node, intervals] : memory_on) {
      if (auto excess = first_excess(intervals, expected.node_capacity.memory_bytes)) {
        report("node capacity", agent.cluster + "/" + node + " memory " + *excess);
      }
    }
    if (expected.invitation_cpu_milli > 0) {
      for (auto& [source, intervals] : cpu_of_source) {
        if (auto excess = first_excess(intervals, expected.invitation_cpu_milli)) {
          report("invitation limit", agent.cluster + " for source " + source.substr(0, 8) + ": cpu " + *excess);
        }
      }
    }
  }
  return findings;
}

}  // namespace shoal::chaos
