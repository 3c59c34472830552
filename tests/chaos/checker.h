// The chaos run's verdict from durable records only: each agent's state
// database (workloads it owns, the run history of copies it hosted), read
// after every agent has stopped. Log text and rows that garbage collection
// may remove are never evidence.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/resources.h"
#include "store/records.h"

namespace shoal::chaos {

// What one agent left behind.
struct AgentRecords {
  std::string cluster;  // its cluster's name
  std::string id;       // its peer id (the `source` of the runs it owns)
  std::vector<store::WorkloadRecord> workloads;
  std::vector<store::RunRecord> runs;
  std::string integrity = "ok";  // PRAGMA integrity_check's answer
};

// Opens a stopped agent's state.db (load_records.cc, library
// shoal_chaos_loader: the only part that links SQLite).
Result<AgentRecords> load_records(const std::string& cluster, const std::string& id,
                                  const std::string& db_path);

// What the run set up, to hold the records against.
struct Expectations {
  // Per source id, the names (namespace default) it accepted at submit.
  std::map<std::string, std::set<std::string>> submitted;
  model::Resources node_capacity;  // every node of every cluster is this size
  int64_t invitation_cpu_milli = 0;  // every invitation's cpu limit; 0: none
  int64_t quota_cpu_milli = 0;  // every source's federation-wide quota of namespace default; 0: none
};

struct Finding {
  std::string invariant;  // e.g. "exactly-once"
  std::string detail;     // which workload, where, when
};

// Every invariant the chaos run must hold:
// - every submitted workload exists at its source, and every workload there
//   ended in Succeeded or Failed, as its own exit code says (spec.sim: 0
//   Succeeded, any other Failed with that code);
// - exactly once: a copy's runs never overlap in time (on any clusters), a
//   Succeeded copy has a successful run, and no run still holds its nodes at
//   the end. Successes after a copy's first are counted in
//   `repeated_successes` (a lost copy that had finished, placed again before
//   its result arrived; docs/reliability.md), not reported;
// - no node over-committed; no invitation's cpu limit exceeded; no source's
//   runs of namespace default, on every cluster at once, above its quota;
// - copies of one group never share a cluster (running, or finished);
// - every database passes PRAGMA integrity_check.
std::vector<Finding> check(const std::vector<AgentRecords>& agents, const Expectations& expected,
                           int* repeated_successes = nullptr);

}  // namespace shoal::chaos
