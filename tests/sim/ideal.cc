#include "tests/sim/ideal.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <queue>
#include <set>

namespace shoal::sim {

namespace {

// How far into a namespace's queue one pass looks for a job that fits
// (backfill), so a pass costs the same whatever the queue's length.
constexpr size_t kBackfillDepth = 16;

struct Allowed {
  uint32_t cluster;
  int limit = -1;  // index into the limits table, or -1: none
  const Invite* invite = nullptr;  // null: the source's own cluster
};

class Ideal {
 public:
  explicit Ideal(const Scenario& scenario) : scenario_(scenario) {
    for (uint32_t c = 0; c < scenario.clusters.size(); ++c) {
      first_node_.push_back(static_cast<uint32_t>(free_.size()));
      for (const auto& node : scenario.clusters[c].nodes) {
        free_.push_back(node.capacity.cpu_milli);
        cluster_of_.push_back(c);
        frees_.insert(node.capacity.cpu_milli);
      }
    }
    first_node_.push_back(static_cast<uint32_t>(free_.size()));
    on_node_.resize(free_.size());
    for (int i = 0; i < std::max(1, scenario.options.namespaces); ++i) {
      namespace_index_["ns-" + std::to_string(i)] = size_t(i);
    }
    queues_.resize(namespace_index_.size());
    allocated_.resize(namespace_index_.size(), 0);
    // Who may run where: own cluster, and every inviter for its namespaces.
    allowed_.resize(scenario.clusters.size(),
                    std::vector<std::vector<Allowed>>(namespace_index_.size()));
    for (uint32_t s = 0; s < scenario.clusters.size(); ++s) {
      for (auto& list : allowed_[s]) list.push_back({s, -1, nullptr});
    }
    for (const Invite& invite : scenario.invites) {
      int limit = -1;
      if (invite.limits.cpu_milli) {
        limit = static_cast<int>(limit_left_.size());
        limit_left_.push_back(*invite.limits.cpu_milli);
      }
      for (const std::string& ns : invite.namespaces) {
        auto it = namespace_index_.find(ns);
        if (it != namespace_index_.end())
          allowed_[invite.source][it->second].push_back({invite.target, limit, &invite});
      }
    }
  }

  std::vector<JobOutcome> run() {
    const auto& trace = scenario_.trace;
    std::vector<JobOutcome> out(trace.size());
    for (size_t j = 0; j < trace.size(); ++j) out[j].arrival = trace[j].arrival;
    placed_node_.assign(trace.size(), 0);
    placed_limit_.assign(trace.size(), -1);
    run_gen_.assign(trace.size(), 0);
    started_at_.assign(trace.size(), 0);
    // (finish, job, its run's generation): a preempted run's entry is stale.
    using Finish = std::tuple<int64_t, size_t, uint32_t>;
    std::priority_queue<Finish, std::vector<Finish>, std::greater<>> running;
    size_t next = 0;
    while (next < trace.size() || !running.empty()) {
      int64_t now = std::numeric_limits<int64_t>::max();
      if (next < trace.size()) now = trace[next].arrival.count();
      if (!running.empty()) now = std::min(now, std::get<0>(running.top()));
      while (!running.empty() && std::get<0>(running.top()) <= now) {
        auto [at, j, gen] = running.top();
        running.pop();
        if (gen == run_gen_[j]) unplace(j);
      }
      while (next < trace.size() && trace[next].arrival.count() <= now) {
        enqueue(next);
        ++next;
      }
      // Fair share: the namespace with the least allocated goes next, while
      // any has a job that fits.
      std::vector<bool> blocked(queues_.size(), false);
      while (true) {
        int pick = -1;
        for (size_t n = 0; n < queues_.size(); ++n) {
          if (blocked[n] || queues_[n].empty()) continue;
          if (pick < 0 || allocated_[n] < allocated_[size_t(pick)]) pick = static_cast<int>(n);
        }
        if (pick < 0) break;
        auto& queue = queues_[size_t(pick)];
        auto start = [&](size_t k) {
          size_t j = queue[k];
          queue.erase(queue.begin() + static_cast<std::ptrdiff_t>(k));
          out[j].started_ms = now;
          started_at_[j] = now;
          out[j].finished_ms = now + trace[j].spec.sim.duration.count();
          out[j].succeeded = true;
          out[j].cluster = cluster_of_[placed_node_[j]];
          running.push({out[j].finished_ms, j, run_gen_[j]});
        };
        bool placed = false;
        for (size_t k = 0; k < queue.size() && k < kBackfillDepth; ++k) {
          if (!place(queue[k])) continue;
          start(k);
          placed = true;
          break;
        }
        // The first in line (the highest priority) makes room by stopping
        // lower-priority work, as the clusters do with preemption on.
        std::vector<size_t> victims;
        if (!placed && preemption_ && place_by_preempting(queue.front(), &victims)) {
          start(0);
          placed = true;
          for (size_t v : victims) {
            out[v] = JobOutcome{trace[v].arrival};  // placed again: it starts over
            enqueue(v);
            blocked[ns_of(v)] = false;
          }
        }
        if (!placed) blocked[size_t(pick)] = true;
      }
    }
    return out;
  }

 private:
  // Into its namespace's line: the highest priority first, then by arrival.
  void enqueue(size_t j) {
    auto& queue = queues_[ns_of(j)];
    auto key = [&](size_t k) {
      return std::make_tuple(-scenario_.trace[k].spec.priority, scenario_.trace[k].arrival, k);
    };
    auto at = std::upper_bound(queue.begin(), queue.end(), j,
                               [&](size_t a, size_t b) { return key(a) < key(b); });
    queue.insert(at, j);
  }

  // Job `j`'s priority at the cluster `allowed` names: an invitation's
  // ceiling holds a guest to it.
  int32_t priority_at(size_t j, const Allowed& allowed) const {
    int32_t priority = scenario_.trace[j].spec.priority;
    if (allowed.invite && allowed.invite->limits.max_priority) {
      priority = std::min(priority, *allowed.invite->limits.max_priority);
    }
    return priority;
  }
  const Allowed* allowed_for(size_t j, uint32_t cluster) const {
    for (const Allowed& allowed : allowed_[scenario_.trace[j].source][ns_of(j)]) {
      if (allowed.cluster == cluster) return &allowed;
    }
    return nullptr;
  }

  // The target's rules (TargetRole::may_preempt_for, withinQueue:
  // LowerPriority): only work of lower priority there; a source's own work
  // at once; others' only for the cluster's own work or a guest not
  // preemptible, and only a preemptible guest's.
  bool may_stop(size_t j, const Allowed& at, size_t victim) const {
    const Allowed* victim_at = allowed_for(victim, at.cluster);
    if (!victim_at || priority_at(victim, *victim_at) >= priority_at(j, at)) return false;
    if (scenario_.trace[victim].source == scenario_.trace[j].source) return true;
    bool ranks_above_guests = !at.invite || !at.invite->limits.preemptible;
    return ranks_above_guests && victim_at->invite && victim_at->invite->limits.preemptible;
  }

  // Places `j` on the node where the fewest victims (then the lowest
  // priority ones) make room, stopping them; false when none would.
  bool place_by_preempting(size_t j, std::vector<size_t>* victims) {
    int64_t cpu = cpu_of(j);
    std::vector<size_t> best;
    uint32_t best_node = UINT32_MAX;
    int32_t best_top = 0;
    const Allowed* best_at = nullptr;
    for (const Allowed& allowed : allowed_[scenario_.trace[j].source][ns_of(j)]) {
      for (uint32_t node = first_node_[allowed.cluster]; node < first_node_[allowed.cluster + 1];
           ++node) {
        std::vector<size_t> stoppable;
        for (size_t v : on_node_[node]) {
          if (may_stop(j, allowed, v)) stoppable.push_back(v);
        }
        // Lowest priority first, then the most recently started.
        std::sort(stoppable.begin(), stoppable.end(), [&](size_t a, size_t b) {
          int32_t pa = priority_at(a, *allowed_for(a, allowed.cluster));
          int32_t pb = priority_at(b, *allowed_for(b, allowed.cluster));
          return pa != pb ? pa < pb : started_at_[a] > started_at_[b];
        });
        int64_t room = free_[node];
        int64_t limit_room = allowed.limit >= 0 ? limit_left_[size_t(allowed.limit)] : INT64_MAX;
        std::vector<size_t> chosen;
        for (size_t v : stoppable) {
          if (room >= cpu && limit_room >= cpu) break;
          chosen.push_back(v);
          room += cpu_of(v);
          if (allowed.limit >= 0 && placed_limit_[v] == allowed.limit) limit_room += cpu_of(v);
        }
        if (room < cpu || limit_room < cpu || chosen.empty()) continue;
        int32_t top = 0;
        for (size_t v : chosen) top = std::max(top, priority_at(v, *allowed_for(v, allowed.cluster)));
        if (best_node == UINT32_MAX || chosen.size() < best.size() ||
            (chosen.size() == best.size() && top < best_top)) {
          best = std::move(chosen);
          best_node = node;
          best_top = top;
          best_at = &allowed;
        }
      }
    }
    if (best_node == UINT32_MAX) return false;
    for (size_t v : best) {
      unplace(v);
      ++run_gen_[v];
    }
    place_on(j, best_node, best_at->limit);
    *victims = std::move(best);
    return true;
  }

  size_t ns_of(size_t j) const {
    auto it = namespace_index_.find(scenario_.trace[j].spec.namespace_name);
    return it == namespace_index_.end() ? 0 : it->second;
  }
  int64_t cpu_of(size_t j) const { return scenario_.trace[j].spec.total().cpu_milli; }

  // Best fit among the nodes job `j` may use: the least cpu left over.
  bool place(size_t j) {
    int64_t cpu = cpu_of(j);
    if (frees_.empty() || *frees_.rbegin() < cpu) return false;  // fits nowhere at all
    int64_t best_left = std::numeric_limits<int64_t>::max();
    uint32_t best = UINT32_MAX;
    int best_limit = -1;
    for (const Allowed& allowed : allowed_[scenario_.trace[j].source][ns_of(j)]) {
      if (allowed.limit >= 0 && limit_left_[size_t(allowed.limit)] < cpu) continue;
      for (uint32_t node = first_node_[allowed.cluster]; node < first_node_[allowed.cluster + 1];
           ++node) {
        int64_t left = free_[node] - cpu;
        if (left >= 0 && left < best_left) {
          best_left = left;
          best = node;
          best_limit = allowed.limit;
        }
      }
    }
    if (best == UINT32_MAX) return false;
    place_on(j, best, best_limit);
    return true;
  }

  void place_on(size_t j, uint32_t node, int limit) {
    int64_t cpu = cpu_of(j);
    set_free(node, free_[node] - cpu);
    if (limit >= 0) limit_left_[size_t(limit)] -= cpu;
    placed_node_[j] = node;
    placed_limit_[j] = limit;
    allocated_[ns_of(j)] += cpu;
    on_node_[node].push_back(j);
  }

  void unplace(size_t j) {
    int64_t cpu = cpu_of(j);
    uint32_t node = placed_node_[j];
    set_free(node, free_[node] + cpu);
    if (placed_limit_[j] >= 0) limit_left_[size_t(placed_limit_[j])] += cpu;
    allocated_[ns_of(j)] -= cpu;
    std::erase(on_node_[node], j);
  }

  void set_free(uint32_t node, int64_t value) {
    frees_.erase(frees_.find(free_[node]));
    free_[node] = value;
    frees_.insert(value);
  }

  const Scenario& scenario_;
  std::vector<int64_t> free_;         // per node
  std::vector<uint32_t> cluster_of_;  // per node
  std::vector<uint32_t> first_node_;  // per cluster, and one past the last
  std::multiset<int64_t> frees_;      // every node's free cpu: "fits anywhere?" at once
  std::map<std::string, size_t> namespace_index_;
  std::vector<std::vector<size_t>> queues_;                 // per namespace, by arrival
  std::vector<int64_t> allocated_;                          // per namespace
  std::vector<std::vector<std::vector<Allowed>>> allowed_;  // [source][namespace]
  std::vector<int64_t> limit_left_;
  std::vector<uint32_t> placed_node_;
  std::vector<int> placed_limit_;
  // With preemption (ScenarioOptions::preemption): who runs on each node,
  // each job's run generation and its last start.
  bool preemption_ = scenario_.options.preemption;
  std::vector<std::vector<size_t>> on_node_;
  std::vector<uint32_t> run_gen_;
  std::vector<int64_t> started_at_;
};

// Weighted (here equal) max-min fair split of `capacity` among `demand`.
std::vector<double> fair_split(const std::vector<double>& demand, double capacity) {
  std::vector<double> out(demand.size(), 0);
  std::vector<size_t> open;
  for (size_t n = 0; n < demand.size(); ++n) {
    if (demand[n] > 0) open.push_back(n);
  }
  double left = capacity;
  while (!open.empty() && left > 1e-9) {
    double level = left / static_cast<double>(open.size());
    std::vector<size_t> still;
    for (size_t n : open) {
      double want = demand[n] - out[n];
      double give = std::min(want, level);
      out[n] += give;
      left -= give;
      if (demand[n] - out[n] > 1e-9) still.push_back(n);
    }
    if (still.size() == open.size()) break;  // everyone took a full level
    open = std::move(still);
  }
  return out;
}

}  // namespace

std::vector<JobOutcome> run_ideal(const Scenario& scenario) { return Ideal(scenario).run(); }

Quality measure(const Scenario& scenario, const std::vector<JobOutcome>& jobs) {
  Quality q;
  std::vector<double> jct;
  double wait_sum = 0, cpu_seconds = 0;
  int64_t first_arrival = std::numeric_limits<int64_t>::max(), last_finish = 0, last_arrival = 0;
  for (const JobOutcome& o : jobs) {
    first_arrival = std::min(first_arrival, o.arrival.count());
    last_arrival = std::max(last_arrival, o.arrival.count());
  }
  // Utilization is measured while work arrives (the steady state), not
  // over the drain after the last arrival, whose long tail says nothing
  // about the scheduler; when all arrive at once, over the makespan.
  auto window_end = [&] { return last_arrival > first_arrival ? last_arrival : last_finish; };
  std::map<std::string, size_t> ns_index;
  for (int i = 0; i < std::max(1, scenario.options.namespaces); ++i)
    ns_index["ns-" + std::to_string(i)] = size_t(i);
  // (time, namespace, delta allocated, delta demand)
  std::vector<std::tuple<int64_t, size_t, double, double>> deltas;
  for (size_t j = 0; j < jobs.size() && j < scenario.trace.size(); ++j) {
    const JobOutcome& o = jobs[j];
    int64_t arrival = o.arrival.count();
    if (o.finished_ms < 0 || o.started_ms < 0) continue;
    double cpu = static_cast<double>(scenario.trace[j].spec.total().cpu_milli);
    size_t n = ns_index.count(scenario.trace[j].spec.namespace_name)
                   ? ns_index[scenario.trace[j].spec.namespace_name]
                   : 0;
    jct.push_back(static_cast<double>(o.finished_ms - arrival) / 1000.0);
    wait_sum += static_cast<double>(o.started_ms - arrival) / 1000.0;
    last_finish = std::max(last_finish, o.finished_ms);
    deltas.emplace_back(arrival, n, 0.0, cpu);
    deltas.emplace_back(o.started_ms, n, cpu, 0.0);
    deltas.emplace_back(o.finished_ms, n, -cpu, -cpu);
  }
  q.jobs = static_cast<int>(jct.size());
  if (jct.empty()) return q;
  std::vector<double> high_waits;
  double low_wait_sum = 0;
  int low_jobs = 0;
  for (size_t j = 0; j < jobs.size() && j < scenario.trace.size(); ++j) {
    const JobOutcome& o = jobs[j];
    if (o.finished_ms < 0 || o.started_ms < 0) continue;
    double wait = static_cast<double>(o.started_ms - o.arrival.count()) / 1000.0;
    if (scenario.trace[j].spec.priority > 0) {
      high_waits.push_back(wait);
    } else {
      low_wait_sum += wait;
      ++low_jobs;
    }
  }
  if (!high_waits.empty()) {
    std::sort(high_waits.begin(), high_waits.end());
    q.high_jobs = static_cast<int>(high_waits.size());
    double high_sum = 0;
    for (double x : high_waits) high_sum += x;
    q.high_mean_wait_s = high_sum / static_cast<double>(high_waits.size());
    q.high_p99_wait_s = high_waits[std::min(
        high_waits.size() - 1,
        static_cast<size_t>(std::ceil(0.99 * static_cast<double>(high_waits.size()))) - 1)];
    q.low_mean_wait_s = low_jobs ? low_wait_sum / low_jobs : 0;
  }
  std::sort(jct.begin(), jct.end());
  double sum = 0;
  for (double x : jct) sum += x;
  q.mean_jct_s = sum / static_cast<double>(jct.size());
  q.p99_jct_s = jct[std::min(
      jct.size() - 1, static_cast<size_t>(std::ceil(0.99 * static_cast<double>(jct.size()))) - 1)];
  q.mean_wait_s = wait_sum / static_cast<double>(jct.size());
  q.makespan_s = static_cast<double>(last_finish - first_arrival) / 1000.0;
  double capacity = static_cast<double>(scenario.total_cpu_milli());
  int64_t from = first_arrival, to = window_end();
  for (size_t j = 0; j < jobs.size() && j < scenario.trace.size(); ++j) {
    const JobOutcome& o = jobs[j];
    if (o.finished_ms < 0 || o.started_ms < 0) continue;
    int64_t overlap = std::min(o.finished_ms, to) - std::max(o.started_ms, from);
    if (overlap > 0) {
      cpu_seconds += static_cast<double>(scenario.trace[j].spec.total().cpu_milli) / 1000.0 *
                     static_cast<double>(overlap) / 1000.0;
    }
  }
  double window_s = static_cast<double>(to - from) / 1000.0;
  q.utilization = window_s > 0 ? cpu_seconds * 1000.0 / (capacity * window_s) : 0;

  // Share error, sampled every 10 s over the run.
  std::sort(deltas.begin(), deltas.end(),
            [](const auto& a, const auto& b) { return std::get<0>(a) < std::get<0>(b); });
  std::vector<double> allocated(ns_index.size(), 0), demand(ns_index.size(), 0);
  size_t next = 0;
  double error_sum = 0;
  int samples = 0;
  for (int64_t t = first_arrival; t <= last_finish; t += 10'000) {
    while (next < deltas.size() && std::get<0>(deltas[next]) <= t) {
      auto [at, n, da, dd] = deltas[next++];
      allocated[n] += da;
      demand[n] += dd;
    }
    double total_allocated = 0, total_demand = 0;
    for (size_t n = 0; n < demand.size(); ++n)
      total_allocated += allocated[n], total_demand += demand[n];
    if (total_demand <= total_allocated + 1e-9) continue;  // nothing waits
    std::vector<double> deserved = fair_split(demand, capacity);
    double error = 0;
    for (size_t n = 0; n < demand.size(); ++n) error += std::abs(allocated[n] - deserved[n]);
    error_sum += error / (2 * capacity);
    ++samples;
  }
  q.share_error = samples ? error_sum / samples : 0;
  return q;
}

}  // namespace shoal::sim
