#include "tests/sim/scenario.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

namespace shoal::sim {

namespace {

using namespace std::chrono_literals;

struct Size {
  int64_t cpu_milli;
  double weight;
};
// A mix of small and large jobs (cpu per replica); memory 2 GiB per cpu.
constexpr Size kSizes[] = {{1000, 0.4}, {2000, 0.3}, {4000, 0.2}, {8000, 0.1}};

double mean_cpu_milli() {
  double sum = 0;
  for (const Size& s : kSizes) sum += static_cast<double>(s.cpu_milli) * s.weight;
  return sum;
}

std::string ns(int i) { return "ns-" + std::to_string(i); }

}  // namespace

std::optional<Graph> graph_from_name(const std::string& name) {
  if (name == "full") return Graph::kFullMesh;
  if (name == "random") return Graph::kRandom;
  if (name == "orgs") return Graph::kOrgs;
  return std::nullopt;
}

std::string graph_name(Graph graph) {
  switch (graph) {
    case Graph::kFullMesh:
      return "full";
    case Graph::kRandom:
      return "random";
    case Graph::kOrgs:
      return "orgs";
  }
  return "?";
}

int64_t Scenario::total_cpu_milli() const {
  int64_t total = 0;
  for (const auto& cluster : clusters) {
    for (const auto& node : cluster.nodes) total += node.capacity.cpu_milli;
  }
  return total;
}

std::string describe(const Fault& fault) {
  std::string out = std::to_string(fault.at.count()) + "ms ";
  std::string length = " for " + std::to_string(fault.length.count()) + "ms";
  switch (fault.kind) {
    case Fault::Kind::kCrash:
      return out + "crash a" + std::to_string(fault.agent) + length;
    case Fault::Kind::kCrashInStep:
      return out + "crash inside a step a" + std::to_string(fault.agent);
    case Fault::Kind::kFreeze:
      return out + "freeze a" + std::to_string(fault.agent) + length;
    case Fault::Kind::kPartition:
      return out + "partition of " + std::to_string(fault.side.size()) + " agents" + length;
    case Fault::Kind::kCut:
      return out + "cut a" + std::to_string(fault.agent) + "->a" + std::to_string(fault.other) +
             length;
    case Fault::Kind::kLossyLinks:
      return out + "lossy links (drop " + std::to_string(fault.link.drop) + ", duplicate " +
             std::to_string(fault.link.duplicate) + ", reorder " +
             std::to_string(fault.link.reorder) + ")" + length;
    case Fault::Kind::kEvict:
      return out + "a" + std::to_string(fault.agent) + " evicts a copy it runs for another agent";
    case Fault::Kind::kStoreFault:
      return out + "a" + std::to_string(fault.agent) + "'s disk fails " +
             (fault.at_commit ? "commits" : "writes") + length;
  }
  return out;
}

namespace {

// Faults of one kind from a seeded stream of their own, so that adding a
// kind leaves the others of a seed as they were: the first `lo`–`hi` ms
// after the warm-up, then every `lo`–`hi` ms until `end`; `fill` sets the
// kind and what it needs, drawing from the same stream.
template <typename Fill>
void add_fault_stream(Scenario& out, uint64_t stream_seed, int64_t lo, int64_t hi, int64_t end,
                      Fill fill) {
  std::mt19937_64 stream(stream_seed);
  auto uniform_in_stream = [&](int64_t from, int64_t to) {
    return std::uniform_int_distribution<int64_t>(from, to)(stream);
  };
  for (int64_t at = out.warmup.count() + uniform_in_stream(lo, hi); at < end;
       at += uniform_in_stream(lo, hi)) {
    Fault fault;
    fault.at = Duration(at);
    fill(fault, uniform_in_stream);
    out.faults.push_back(std::move(fault));
  }
}

}  // namespace

Scenario make_scenario(const ScenarioOptions& options) {
  Scenario out;
  out.options = options;
  std::mt19937_64 rng(options.seed);
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  const int n = std::max(1, options.agents);
  const int orgs = std::clamp(options.orgs, 1, n);

  for (int i = 0; i < n; ++i) {
    model::ClusterSpec spec;
    spec.name = "c" + std::to_string(i);
    for (int k = 0; k < options.nodes; ++k) {
      spec.nodes.push_back(
          {"n" + std::to_string(k),
           {options.node_cpu_milli, options.node_cpu_milli * (int64_t{2} << 30) / 1000, 0},
           {}});
    }
    spec.queues = {{"default", 1}};
    out.clusters.push_back(std::move(spec));
    out.org_of.push_back(options.graph == Graph::kOrgs ? static_cast<uint32_t>(i % orgs) : 0);
  }

  std::vector<std::string> all_namespaces;
  for (int i = 0; i < std::max(1, options.namespaces); ++i) all_namespaces.push_back(ns(i));
  switch (options.graph) {
    case Graph::kFullMesh:
      for (int t = 0; t < n; ++t) {
        for (int s = 0; s < n; ++s) {
          if (s != t) out.invites.push_back({uint32_t(t), uint32_t(s), all_namespaces, {}});
        }
      }
      break;
    case Graph::kRandom: {
      int degree = std::min(options.invited_by, n - 1);
      for (int s = 0; s < n; ++s) {
        std::set<int> targets;
        while (static_cast<int>(targets.size()) < degree) {
          int t = static_cast<int>(uniform(0, n - 1));
          if (t != s) targets.insert(t);
        }
        for (int t : targets) out.invites.push_back({uint32_t(t), uint32_t(s), all_namespaces, {}});
      }
      break;
    }
    case Graph::kOrgs: {
      int64_t cluster_cpu = options.node_cpu_milli * options.nodes;
      for (int t = 0; t < n; ++t) {
        for (int s = 0; s < n; ++s) {
          if (s != t && out.org_of[size_t(s)] == out.org_of[size_t(t)]) {
            out.invites.push_back({uint32_t(t), uint32_t(s), all_namespaces, {}});
          }
        }
        // Partial trust across organizations: two outsiders, one namespace,
        // a quarter of the cluster at most.
        if (orgs < 2) continue;
        std::set<int> outsiders;
        for (int tries = 0; tries < 100 && outsiders.size() < 2; ++tries) {
          int s = static_cast<int>(uniform(0, n - 1));
          if (out.org_of[size_t(s)] != out.org_of[size_t(t)]) outsiders.insert(s);
        }
        for (int s : outsiders) {
          crypto::InvitationLimits limits;
          limits.cpu_milli = cluster_cpu / 4;
          out.invites.push_back({uint32_t(t), uint32_t(s), {ns(0)}, limits});
        }
      }
      break;
    }
  }

  // The trace: Poisson arrivals over the window, lognormal run times whose
  // mean gives the offered load asked for.
  const int jobs = std::max(0, options.workloads);
  double window_ms = std::max<double>(1, static_cast<double>(options.arrivals.count()));
  double rate_per_ms = jobs / window_ms;
  double mean_ms = options.mean_duration.count() > 0
                       ? static_cast<double>(options.mean_duration.count())
                       : options.load * static_cast<double>(out.total_cpu_milli()) /
                             (rate_per_ms * mean_cpu_milli());
  out.mean_duration = Duration(static_cast<int64_t>(mean_ms));
  double sigma = options.duration_sigma;
  std::lognormal_distribution<double> duration(std::log(mean_ms) - sigma * sigma / 2, sigma);
  std::exponential_distribution<double> gap(rate_per_ms);
  std::discrete_distribution<size_t> size_of(
      {kSizes[0].weight, kSizes[1].weight, kSizes[2].weight, kSizes[3].weight});
  double t = 0;
  for (int j = 0; j < jobs; ++j) {
    t += gap(rng);
    TraceJob job;
    job.arrival = out.warmup + Duration(static_cast<int64_t>(t));
    job.source = static_cast<uint32_t>(uniform(0, n - 1));
    model::WorkloadSpec& spec = job.spec;
    spec.name = "j" + std::to_string(j);
    spec.namespace_name =
        all_namespaces[size_t(uniform(0, static_cast<int64_t>(all_namespaces.size()) - 1))];
    int64_t cpu = kSizes[size_of(rng)].cpu_milli;
    cpu = std::min(cpu, options.node_cpu_milli);
    spec.resources = {cpu, cpu * (int64_t{2} << 30) / 1000, 0};
    spec.sim.duration = Duration(std::max<int64_t>(1000, static_cast<int64_t>(duration(rng))));
    if (options.dispatcher) spec.placement.dispatcher = *options.dispatcher;
    spec.placement.ready_window = options.ready_window;
    if (options.faults && chance(0.2)) spec.restart_policy = model::RestartPolicy::kOnFailure;
    out.trace.push_back(std::move(job));
  }

  if (options.faults) {
    // About one fault every 2 s of the window, of every kind.
    int64_t end = out.warmup.count() + options.arrivals.count();
    for (int64_t at = out.warmup.count() + uniform(500, 4000); at < end; at += uniform(500, 4000)) {
      Fault fault;
      fault.at = Duration(at);
      fault.agent = static_cast<uint32_t>(uniform(0, n - 1));
      int64_t roll = uniform(0, 99);
      if (roll < 20) {
        fault.kind = Fault::Kind::kCrash;
        fault.length = Duration(uniform(500, 10'000));
      } else if (roll < 30) {
        fault.kind = Fault::Kind::kCrashInStep;
      } else if (roll < 45) {
        fault.kind = Fault::Kind::kFreeze;
        fault.length = Duration(uniform(500, 8'000));
      } else if (roll < 65) {
        fault.kind = Fault::Kind::kPartition;
        fault.length = Duration(uniform(1'000, 20'000));
        int64_t size = uniform(1, std::max(1, n / 3));
        std::set<uint32_t> side;
        while (static_cast<int64_t>(side.size()) < size)
          side.insert(static_cast<uint32_t>(uniform(0, n - 1)));
        fault.side.assign(side.begin(), side.end());
      } else if (roll < 85) {
        fault.kind = Fault::Kind::kCut;
        fault.other = static_cast<uint32_t>(uniform(0, n - 1));
        fault.length = Duration(uniform(1'000, 20'000));
      } else {
        fault.kind = Fault::Kind::kLossyLinks;
        fault.length = Duration(uniform(2'000, 15'000));
        auto percent = [&](int64_t most) { return static_cast<double>(uniform(0, most)) / 100.0; };
        fault.link = {percent(15), percent(5), percent(20)};
      }
      // Nothing outlasts the window: the network heals at its end.
      fault.length = std::min(fault.length, Duration(end - at));
      out.faults.push_back(std::move(fault));
    }
    // Evictions, about one every 8 s, from a stream of their own so that
    // the faults above are the same as without them.
    add_fault_stream(out, options.seed ^ 0x65766963746564ULL, 2000, 14000, end,
                     [&](Fault& fault, auto& uniform_in_stream) {
                       fault.kind = Fault::Kind::kEvict;
                       fault.agent = static_cast<uint32_t>(uniform_in_stream(0, n - 1));
                     });
    // Failing disks, about one every 15 s, from a stream of their own too.
    if (options.store_faults) {
      add_fault_stream(out, options.seed ^ 0x6469736b73ULL, 5000, 25000, end,
                       [&](Fault& fault, auto& uniform_in_stream) {
                         fault.kind = Fault::Kind::kStoreFault;
                         fault.agent = static_cast<uint32_t>(uniform_in_stream(0, n - 1));
                         fault.at_commit = uniform_in_stream(0, 1) == 1;
                         fault.length = std::min(Duration(uniform_in_stream(500, 6'000)),
                                                 Duration(end - fault.at.count()));
                       });
    }
    std::stable_sort(out.faults.begin(), out.faults.end(),
                     [](const Fault& a, const Fault& b) { return a.at < b.at; });
  }
  // Priorities, preemption and quotas, from a stream of their own: the
  // rest of the scenario is the same with them as without.
  if (options.preemption) {
    std::mt19937_64 stream(options.seed ^ 0x707265656d707431ULL);
    for (model::ClusterSpec& cluster : out.clusters) {
      cluster.preemption.within_queue = model::PreemptionSpec::WithinQueue::kLowerPriority;
    }
    for (Invite& invite : out.invites) {
      invite.limits.preemptible = stream() % 2 == 0;
      invite.limits.max_priority = 50;
    }
    for (TraceJob& job : out.trace) job.spec.priority = stream() % 5 == 0 ? 100 : 0;
  }
  if (options.quota_cpu_milli > 0) {
    model::QuotaSpec quota;
    quota.namespace_name = ns(0);
    quota.cpu_milli = options.quota_cpu_milli;
    out.quotas.push_back(quota);
  }
  return out;
}

}  // namespace shoal::sim
