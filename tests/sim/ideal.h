// The yardstick for scheduling quality: an ideal central
// scheduler that sees every node of every cluster at every instant and
// places with no message delay. It runs the same trace under the same
// rules as the federation — a job of source S in namespace N may run on S's
// own cluster or on any cluster that invited S into N, within the
// invitation's cpu limit — and serves namespaces by weighted fair share
// (the one with the least cpu allocated goes next), each namespace in
// arrival order with backfill, each job on the node it fits most tightly
// (greedy best fit). With priorities and preemption (--preemption), each
// namespace's line puts the highest priority first, and when nothing fits,
// its first job stops, under the clusters' own rules (lower priority only,
// the invitations' ceilings and preemptible terms), the fewest jobs of the
// lowest priority on one node; a stopped job goes back in line and starts
// over, as a preempted copy is placed again.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tests/sim/scenario.h"
#include "tests/sim/simulation.h"

namespace shoal::sim {

std::vector<JobOutcome> run_ideal(const Scenario& scenario);

// What a schedule achieved, comparable between the federation and the ideal.
struct Quality {
  int jobs = 0;           // that finished
  double mean_jct_s = 0;  // job completion time: finish - arrival
  double p99_jct_s = 0;
  double mean_wait_s = 0;  // start - arrival
  double makespan_s = 0;   // last finish - first arrival
  double utilization =
      0;  // cpu-seconds used / capacity, while jobs arrive (else over the makespan)
  // Mean over moments when work waits of sum_n |allocated_n - deserved_n| /
  // (2 × capacity): 0 is a perfect weighted max-min fair split of the
  // federation's cpu among the namespaces' demands.
  double share_error = 0;
  // Jobs of priority above 0 (the high class, with --preemption): their
  // count and wait (start - arrival); and the rest's mean wait.
  int high_jobs = 0;
  double high_mean_wait_s = 0;
  double high_p99_wait_s = 0;
  double low_mean_wait_s = 0;
};

Quality measure(const Scenario& scenario, const std::vector<JobOutcome>& jobs);

}  // namespace shoal::sim
