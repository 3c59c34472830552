#include "tests/sim/simulation.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <tuple>

#include "tests/chaos/checker.h"

namespace shoal::sim {

namespace {

using namespace std::chrono_literals;

// Lifecycle timers in seconds (as the unit simulation's): lease 2 s, a
// silent target's work re-placed after 6 s. They keep check_fencing_timers'
// contract: 6 s > 2 s + 0.5 s skew + 2 × 1 s heartbeat.
void fast_timers(core::AgentConfig& config) {
  config.lease = 2s;
  config.max_clock_skew = 500ms;
  config.heartbeat_interval = 1s;
  config.worker_lost_timeout = 6s;
  config.gc_interval = 1s;
  config.pending_retry = 1s;
  config.pending_retry_max = 4s;
  config.reservation_ttl = 5s;
}

class Run {
 public:
  Run(const Scenario& scenario, const RunOptions& options)
      : scenario_(scenario), options_(options), federation_(federation_options()) {}

  SimResult go();

 private:
  FederationOptions federation_options() const {
    FederationOptions out;
    out.seed = scenario_.options.seed;
    out.threads = options_.threads;
    out.real_signatures = options_.real_signatures;
    out.group_commit = group_commit_on(scenario_.options);
    bool fast = scenario_.options.fast_timers;
    out.configure = [fast](core::AgentConfig& config) {
      if (fast) fast_timers(config);
    };
    return out;
  }
  void report(const std::string& invariant, const std::string& detail) {
    result_.findings.push_back(invariant + ": " + detail);
  }
  bool stopped() const { return options_.stop_at_first_finding && !result_.findings.empty(); }
  core::AgentConfig config() const { return agent_config_for(scenario_.options); }
  void build();
  // Submits job `job` of the trace at `when`, through its source; then
  // submitted() takes the answer (and retries a second later when there
  // was none).
  void submit(size_t job, TimePoint when);
  void submitted(size_t job, bool ran, const Result<std::vector<std::string>>& uids);
  void schedule_faults();
  void check_now();
  // Every preemption since the last check: asked for by its source's
  // APPROVE, and no more than one per placement across the federation.
  void check_preemptions();
  // Jobs by how they stand, summed over the agents that are up; `open` is
  // SIZE_MAX (unknown) while any agent is down.
  struct JobTotals {
    size_t open = 0, succeeded = 0, failed = 0;
  };
  JobTotals job_totals();
  size_t unfinished();  // job_totals().open
  std::string unfinished_sample();
  void final_verdict();
  void explain(const std::string& name);

  const Scenario& scenario_;
  RunOptions options_;
  Federation federation_;
  SimResult result_;
  std::vector<std::string> uid_of_;                                // by trace index
  std::map<std::string, std::set<std::string>> accepted_;          // source id -> names
  std::map<std::pair<uint32_t, std::string>, int64_t> cpu_limit_;  // (target, source id)
  std::map<std::pair<std::string, std::string>, int64_t> quota_cpu_;  // (source id, namespace)
  size_t submissions_done_ = 0;
  // (source id, uid, epoch) -> the target that preempted for it.
  std::map<std::tuple<std::string, std::string, uint64_t>, uint32_t> preempted_for_;
};

void Run::build() {
  const ScenarioOptions& o = scenario_.options;
  std::mt19937_64 skews(mix(o.seed, 0x736b6577));
  int64_t half = o.max_clock_skew.count() / 2;
  for (size_t i = 0; i < scenario_.clusters.size(); ++i) {
    Duration skew(half > 0 ? std::uniform_int_distribution<int64_t>(-half, half)(skews) : 0);
    federation_.add_agent(scenario_.clusters[i], scenario_.org_of[i], skew);
  }
  auto& agents = federation_.agents();
  for (const Invite& invite : scenario_.invites) {
    core::InvitationOptions options;
    options.namespaces = invite.namespaces;
    options.limits = invite.limits;
    Status invited = federation_.invite(*agents[invite.target], *agents[invite.source], options);
    if (!invited.is_ok()) report("setup", "invitation refused: " + invited.message());
    if (invite.limits.cpu_milli) {
      cpu_limit_[{invite.target, agents[invite.source]->id}] = *invite.limits.cpu_milli;
    }
  }
  for (const auto& agent : agents) {
    for (const model::QuotaSpec& quota : scenario_.quotas) {
      bool set = federation_.control(*agent, [&](core::Agent& a) {
        if (Status status = a.operations().set_quota(quota); !status.is_ok())
          report("setup", "quota refused: " + status.message());
      });
      if (!set) report("setup", "quota not set at " + agent->name);
      quota_cpu_[{agent->id, quota.namespace_name}] = quota.cpu_milli.value_or(INT64_MAX);
    }
  }
}

void Run::submit(size_t job, TimePoint when) {
  const TraceJob& traced = scenario_.trace[job];
  SimAgent& source = *federation_.agents()[traced.source];
  auto uids = std::make_shared<Result<std::vector<std::string>>>(internal_error("not run"));
  federation_.at_control(
      when, source,
      [uids, &traced](core::Agent& agent) { *uids = agent.operations().submit({traced.spec}); },
      [this, job, uids](bool ran) { submitted(job, ran, *uids); });
}

void Run::submitted(size_t job, bool ran, const Result<std::vector<std::string>>& uids) {
  const TraceJob& traced = scenario_.trace[job];
  SimAgent& source = *federation_.agents()[traced.source];
  // Down, frozen, or died inside the step before answering: the user never
  // heard back, and tries again a second later.
  if (!ran) {
    submit(job, federation_.now() + 1s);
    return;
  }
  ++submissions_done_;
  if (!uids.is_ok()) {
    report("submit", source.name + " refused " + traced.spec.name + ": " + uids.status().message());
    return;
  }
  uid_of_[job] = uids->front();
  accepted_[source.id].insert(traced.spec.name);
  ++result_.submitted;
}

void Run::schedule_faults() {
  TimePoint start = federation_.start_time();
  uint32_t partition_id = 0;
  for (const Fault& fault : scenario_.faults) {
    TimePoint at = start + fault.at, until = start + fault.at + fault.length;
    SimAgent* agent = federation_.agents()[fault.agent].get();
    switch (fault.kind) {
      case Fault::Kind::kCrash:
        federation_.at(at, [this, agent] { federation_.crash(*agent); });
        federation_.at(until, [this, agent] { federation_.restart(*agent); });
        break;
      case Fault::Kind::kCrashInStep:
        federation_.at(at, [agent] { agent->crash_in_next_step = true; });
        break;
      case Fault::Kind::kFreeze:
        federation_.at(at, [this, agent] { federation_.freeze(*agent); });
        federation_.at(until, [this, agent] { federation_.thaw(*agent); });
        break;
      case Fault::Kind::kPartition: {
        uint32_t id = ++partition_id;
        federation_.at(
            at, [this, id, side = fault.side] { federation_.network().partition(id, side); });
        federation_.at(until, [this, id] { federation_.network().heal_partition(id); });
        break;
      }
      case Fault::Kind::kCut:
        federation_.at(
            at, [this, f = fault.agent, t = fault.other] { federation_.network().cut(f, t); });
        federation_.at(
            until, [this, f = fault.agent, t = fault.other] { federation_.network().heal(f, t); });
        break;
      case Fault::Kind::kEvict: {
        // The operator at `agent` deletes the first copy it runs for
        // another agent (DeletedAtTarget), naming its source's cluster.
        std::map<std::string, std::string> cluster_of;
        for (const auto& other : federation_.agents()) cluster_of[other->id] = other->name;
        auto evicted = std::make_shared<bool>(false);
        federation_.at_control(
            at, *agent,
            [cluster_of = std::move(cluster_of), evicted](core::Agent& target) {
              for (const store::ReservationRecord& r : target.operations().reservations()) {
                if (r.phase != store::ReservationPhase::kRunning ||
                    r.source == target.operations().self_id())
                  continue;
                auto source = cluster_of.find(r.source);
                if (source == cluster_of.end()) continue;
                *evicted = target.operations()
                               .stop_hosted(r.spec.namespace_name, r.spec.name, source->second)
                               .is_ok();
                if (*evicted) return;
              }
            },
            [this, evicted](bool) { result_.evictions += *evicted ? 1 : 0; });
        break;
      }
      case Fault::Kind::kStoreFault: {
        auto failure = fault.at_commit ? MemoryStore::Failure::kCommit : MemoryStore::Failure::kWrites;
        federation_.at(at, [this, agent, failure] { federation_.fail_store(*agent, failure); });
        federation_.at(until, [this, agent] { federation_.fail_store(*agent, MemoryStore::Failure::kNone); });
        break;
      }
      case Fault::Kind::kLossyLinks:
        federation_.at(at, [this, link = fault.link] { federation_.network().set_faults(link); });
        federation_.at(until, [this, link = fault.link] {
          // A later lossy period that already replaced this one keeps going.
          if (federation_.network().faults() == link) federation_.network().set_faults({});
        });
        break;
    }
  }
}

void Run::check_now() {
  core::AgentConfig timers = config();
  Duration expiry_slack = timers.heartbeat_interval + 1s;
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> holders;
  for (auto& agent : federation_.agents()) {
    // A frozen or read-only agent's records are as old as its pause, and a restarted
    // one's as old as its crash until its first tick: it stops what its
    // lapsed leases covered when it wakes, dated at the lease's end
    // (docs/lifecycle.md), and the run records judge that at the end.
    if (!agent->up() || agent->paused() || !agent->ticked_since_boot) continue;
    if (options_.check_agents) {
      if (std::string broken = agent->agent->broken_invariant(); !broken.empty()) {
        report("agent invariants",
               agent->name + " at " + format_time(federation_.now()) + ": " + broken);
      }
      if (!agent->cluster->check_invariants()) {
        report("cluster invariants",
               agent->name + "'s local scheduler at " + format_time(federation_.now()));
      }
    }
    std::map<std::string, int64_t> cpu_by_source;
    for (const store::ReservationRecord& r : agent->agent->operations().reservations()) {
      if (r.phase == store::ReservationPhase::kBound ||
          r.phase == store::ReservationPhase::kRunning) {
        holders[{r.source, r.spec.key() + " (" + r.uid + ")"}].push_back(agent->name);
      }
      if (r.phase == store::ReservationPhase::kReserved &&
          r.expires_at + expiry_slack < agent->clock->now()) {
        report("reservation expiry", agent->name + " still holds " + r.spec.key() + " reserved " +
                                         format_duration(agent->clock->now() - r.expires_at) +
                                         " after it expired");
      }
      if (store::holds_resources(r.phase)) cpu_by_source[r.source] += r.spec.total().cpu_milli;
    }
    for (const auto& [source, cpu] : cpu_by_source) {
      auto limit = cpu_limit_.find({agent->index, source});
      if (limit != cpu_limit_.end() && cpu > limit->second) {
        report("invitation limit", agent->name + " holds " + std::to_string(cpu) + "m cpu for " +
                                       source.substr(0, 8) + ", over its limit of " +
                                       std::to_string(limit->second) + "m");
      }
    }
    for (const cluster::NodeUsage& node : agent->cluster->nodes()) {
      if (node.peak_allocated.cpu_milli > node.capacity.cpu_milli ||
          node.peak_allocated.memory_bytes > node.capacity.memory_bytes) {
        report("node capacity", agent->name + "/" + node.name + " was allocated " +
                                    std::to_string(node.peak_allocated.cpu_milli) + "m cpu of " +
                                    std::to_string(node.capacity.cpu_milli) + "m");
      }
    }
  }
  // A source's federation-wide quota: what its namespace runs anywhere.
  if (!quota_cpu_.empty()) {
    std::map<std::pair<std::string, std::string>, int64_t> running;  // (source, namespace)
    for (auto& agent : federation_.agents()) {
      if (!agent->up() || agent->paused() || !agent->ticked_since_boot) continue;
      for (const store::ReservationRecord& r : agent->agent->operations().reservations()) {
        if (r.phase == store::ReservationPhase::kBound || r.phase == store::ReservationPhase::kRunning) {
          running[{r.source, r.spec.namespace_name}] += r.spec.total().cpu_milli;
        }
      }
    }
    for (const auto& [key, cpu] : running) {
      auto limit = quota_cpu_.find(key);
      if (limit != quota_cpu_.end() && cpu > limit->second) {
        report("federation quota", key.first.substr(0, 8) + "'s namespace " + key.second + " runs " +
                                       std::to_string(cpu) + "m cpu across the federation, over its quota of " +
                                       std::to_string(limit->second) + "m");
      }
    }
  }
  for (const auto& [copy, clusters] : holders) {
    if (clusters.size() > 1) {
      report("exactly-once", copy.second + " of " + copy.first.substr(0, 8) +
                                 " holds resources on " + clusters[0] + " and " + clusters[1] +
                                 " at " + format_time(federation_.now()));
    }
  }
  for (const std::string& finding : federation_.take_engine_findings()) report("engine", finding);
  check_preemptions();
}

void Run::check_preemptions() {
  auto& agents = federation_.agents();
  for (const PreemptionSeen& seen : federation_.take_preemptions()) {
    std::string what = agents[seen.target]->name + " stopped " + std::to_string(seen.victims.size()) +
                       " workload(s) for " + seen.uid + " of " + seen.source.substr(0, 8) + " at " +
                       format_time(seen.at);
    if (!seen.approved_epoch) {
      report("preemption approved", what + ", in a step that delivered no APPROVE of it from its source");
      continue;
    }
    // One placement (an epoch of a copy) is approved at one target: no
    // other target, and no second pass at the same one, stops anything for it.
    auto [first, fresh] = preempted_for_.try_emplace({seen.source, seen.uid, *seen.approved_epoch}, seen.target);
    if (!fresh) {
      report("one preemption per placement", what + " (epoch " + std::to_string(*seen.approved_epoch) +
                                                  "), which " + agents[first->second]->name +
                                                  " had already preempted for");
    }
  }
}

Run::JobTotals Run::job_totals() {
  JobTotals totals;
  for (const auto& agent : federation_.agents()) {
    if (!agent->up()) {
      totals.open = SIZE_MAX;  // unknown while it is down
      continue;
    }
    core::WorkloadCounts counts = agent->agent->operations().workload_counts();
    size_t succeeded = counts.by_phase[static_cast<size_t>(model::Phase::kSucceeded)];
    size_t failed = counts.by_phase[static_cast<size_t>(model::Phase::kFailed)];
    totals.succeeded += succeeded;
    totals.failed += failed;
    if (totals.open != SIZE_MAX) totals.open += counts.total - succeeded - failed;
  }
  return totals;
}

size_t Run::unfinished() { return job_totals().open; }

std::string Run::unfinished_sample() {
  std::string out;
  int shown = 0;
  for (auto& agent : federation_.agents()) {
    if (!agent->up()) {
      out += " " + agent->name + " is down;";
      continue;
    }
    for (const auto& w : agent->agent->operations().workloads()) {
      if (model::is_finished(w.phase) || shown >= 3) continue;
      ++shown;
      out += " " + agent->name + ":" + w.spec.name + " " + std::string(model::phase_name(w.phase)) +
             " (" + w.reason + ");";
    }
  }
  return out;
}

void Run::final_verdict() {
  std::vector<chaos::AgentRecords> records;
  std::map<std::string, const SimAgent*> by_id;
  for (auto& agent : federation_.agents()) {
    chaos::AgentRecords r;
    r.cluster = agent->name;
    r.id = agent->id;
    auto workloads = agent->store->load_workloads();
    auto runs = agent->store->load_runs();
    if (!workloads.is_ok() || !runs.is_ok()) {
      report("store", agent->name + ": its records do not load");
      continue;
    }
    r.workloads = std::move(workloads).value();
    r.runs = std::move(runs).value();
    // Run times are the target's own clock: back to world time, so runs on
    // two clusters compare.
    int64_t skew = agent->clock->skew().count();
    for (auto& run : r.runs) {
      run.started_at_ms -= skew;
      if (run.finished_at_ms) run.finished_at_ms -= skew;
    }
    by_id[agent->id] = agent.get();
    records.push_back(std::move(r));
  }
  chaos::Expectations expected;
  expected.submitted = accepted_;
  if (!scenario_.clusters.empty() && !scenario_.clusters.front().nodes.empty()) {
    expected.node_capacity = scenario_.clusters.front().nodes.front().capacity;
  }
  for (const chaos::Finding& f : chaos::check(records, expected, &result_.repeated_successes)) {
    report(f.invariant, f.detail);
  }

  // Each traced job's outcome, from its source's records.
  std::map<std::string, const store::WorkloadRecord*> by_uid;
  std::map<std::string, uint32_t> index_by_name;
  for (auto& agent : federation_.agents()) index_by_name[agent->name] = agent->index;
  for (const auto& r : records) {
    for (const auto& w : r.workloads) by_uid[w.uid] = &w;
  }
  int64_t start_ms = to_millis(federation_.start_time());
  result_.jobs.resize(scenario_.trace.size());
  for (size_t j = 0; j < scenario_.trace.size(); ++j) {
    JobOutcome& out = result_.jobs[j];
    out.arrival = scenario_.trace[j].arrival;
    auto it = by_uid.find(uid_of_[j]);
    if (uid_of_[j].empty() || it == by_uid.end()) continue;
    const store::WorkloadRecord& w = *it->second;
    if (w.started_at_ms) out.started_ms = w.started_at_ms - start_ms;
    if (w.finished_at_ms) out.finished_ms = w.finished_at_ms - start_ms;
    out.succeeded = w.phase == model::Phase::kSucceeded;
    result_.succeeded += out.succeeded;
    result_.failed += w.phase == model::Phase::kFailed;
    if (auto c = index_by_name.find(w.cluster); c != index_by_name.end()) out.cluster = c->second;
  }
}

void Run::explain(const std::string& name) {
  std::set<std::string> uids;
  for (size_t j = 0; j < scenario_.trace.size(); ++j) {
    if (scenario_.trace[j].spec.name == name && !uid_of_[j].empty()) uids.insert(uid_of_[j]);
  }
  std::vector<std::pair<TimePoint, std::string>> story;
  for (auto& agent : federation_.agents()) {
    for (const std::string& uid : uids) {
      auto events = agent->store->load_events(uid);
      if (!events.is_ok()) continue;
      for (const store::EventRecord& e : *events) {
        story.emplace_back(e.at - agent->clock->skew(), agent->name + ": " + e.text);
      }
    }
  }
  std::stable_sort(story.begin(), story.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [at, text] : story) result_.explanation.push_back(format_time(at) + " " + text);
  if (uids.empty()) result_.explanation.push_back("no job named " + name + " was submitted");
}

SimResult Run::go() {
  auto wall_start = std::chrono::steady_clock::now();
  uid_of_.resize(scenario_.trace.size());
  build();
  TimePoint start = federation_.start_time();
  for (size_t j = 0; j < scenario_.trace.size(); ++j) {
    submit(j, start + scenario_.trace[j].arrival);
  }
  schedule_faults();

  // Liveness: once everything has healed (and the last job arrived), the
  // work left must end within the time needed to drain all of it, plus the
  // longest job, plus the lifecycle's own timers. What drains it is the
  // federation's whole capacity, or, slower, a source namespace's quota,
  // which lets no more than itself run at once, and less: its line is
  // strict (the first waits until it fits, what is behind it waits too)
  // and a round holds its share before it finds room. Half the quota is
  // the rate counted on.
  Duration last_arrival = scenario_.trace.empty() ? Duration(0) : scenario_.trace.back().arrival;
  Duration healed = std::max(scenario_.warmup + scenario_.options.arrivals, last_arrival);
  double work = 0;
  std::map<std::pair<uint32_t, std::string>, double> work_under_quota;  // (source, namespace)
  Duration longest{0};
  for (const TraceJob& job : scenario_.trace) {
    double cpu_time = static_cast<double>(job.spec.total().cpu_milli) *
                      static_cast<double>(job.spec.sim.duration.count());
    work += cpu_time;
    work_under_quota[{job.source, job.spec.namespace_name}] += cpu_time;
    longest = std::max(longest, job.spec.sim.duration);
  }
  double drain_ms = work / std::max<double>(1, static_cast<double>(scenario_.total_cpu_milli()));
  for (const model::QuotaSpec& quota : scenario_.quotas) {
    if (!quota.cpu_milli || *quota.cpu_milli <= 0) continue;
    for (const auto& [key, cpu_time] : work_under_quota) {
      if (key.second != quota.namespace_name) continue;
      drain_ms = std::max(drain_ms, 2 * cpu_time / static_cast<double>(*quota.cpu_milli));
    }
  }
  core::AgentConfig timers = config();
  Duration drain(static_cast<int64_t>(drain_ms));
  Duration slack = timers.worker_lost_timeout + timers.lease + timers.pending_retry_max * 2 + 30s;
  TimePoint deadline = start + healed + drain + longest + slack;

  auto stop = [this] { return stopped(); };
  while (!stopped()) {
    TimePoint next = federation_.now() + options_.check_every;
    if (!federation_.run_until(next, stop)) break;
    check_now();
    if (options_.progress) options_.progress(federation_.now() - start, federation_);
    if (options_.stop_at.count() > 0 && federation_.now() - start >= options_.stop_at) {
      result_.time_boxed = true;
      JobTotals totals = job_totals();
      result_.open_at_stop = totals.open;
      result_.succeeded += static_cast<int>(totals.succeeded);
      result_.failed += static_cast<int>(totals.failed);
      break;
    }
    bool all_in = submissions_done_ == scenario_.trace.size();
    if (all_in && federation_.now() >= start + healed && unfinished() == 0) break;
    if (federation_.now() > deadline) {
      report("liveness", std::to_string(unfinished()) + " workloads still open " +
                             format_duration(federation_.now() - start - healed) +
                             " after the network healed:" + unfinished_sample());
      break;
    }
  }
  if (!stopped() && !result_.time_boxed) {
    federation_.commit_open_groups();
    final_verdict();
  }
  if (!options_.explain.empty()) explain(options_.explain);
  result_.digest = federation_.digest();
  for (const auto& agent : federation_.agents()) {
    if (agent->up()) result_.preempted += agent->agent->operations().stats().preempted_victims;
  }
  result_.engine = federation_.stats();
  result_.network = federation_.network().stats();
  result_.simulated = federation_.now() - start;
  result_.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return result_;
}

}  // namespace

core::AgentConfig agent_config_for(const ScenarioOptions& options) {
  core::AgentConfig config;
  if (options.fast_timers) fast_timers(config);
  return config;
}

SimResult run_simulation(const Scenario& scenario, const RunOptions& options) {
  Run run(scenario, options);
  return run.go();
}

}  // namespace shoal::sim
