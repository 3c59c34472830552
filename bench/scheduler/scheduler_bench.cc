// bench/scheduler: 5,000 nodes, 50,000 pending single-task workloads in 100
// namespaces and 10 queues. Goal: >= 20,000 tasks placed per second on the
// reference machine. Reported against a naive allocator (re-sorts all
// namespaces and scans all nodes for every task) measured in the same run.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "agent/cluster/fair_share.h"

namespace {

using namespace shoal;

model::ClusterSpec bench_cluster() {
  model::ClusterSpec spec;
  spec.name = "bench";
  for (int n = 0; n < 5000; ++n) spec.nodes.push_back({"n-" + std::to_string(n), {8000, int64_t{32} << 30, 0}, {}});
  for (int q = 0; q < 10; ++q) spec.queues.push_back({"q" + std::to_string(q), 1 + q % 3});
  for (int ns = 0; ns < 100; ++ns) {
    spec.resource_quotas.push_back({"ns" + std::to_string(ns), {{"shoal.dev/namespace.weight", std::to_string(1 + ns % 4)}}});
  }
  spec.borrowing = true;
  return spec;
}

std::vector<cluster::ScheduleRequest> workloads() {
  std::vector<cluster::ScheduleRequest> out;
  for (int i = 0; i < 50000; ++i) {
    model::WorkloadSpec w;
    int ns = i % 100;
    w.namespace_name = "ns" + std::to_string(ns);
    w.name = "w" + std::to_string(i);
    w.queue = "q" + std::to_string(ns % 10);
    w.resources = {500, int64_t{1} << 30, 0};
    out.push_back({w.name, std::move(w)});
  }
  return out;
}

// The naive allocator: same ordering rules, no incremental structures.
size_t naive_allocate(const model::ClusterSpec& spec, const std::vector<cluster::ScheduleRequest>& pending,
                      std::map<std::string, int64_t>* cpu_by_namespace) {
  model::Resources capacity;
  for (const auto& node : spec.nodes) capacity += node.capacity;
  std::vector<model::Resources> allocated(spec.nodes.size());
  std::map<std::string, std::vector<size_t>> by_namespace;
  std::map<std::string, size_t> next;
  std::map<std::string, int64_t> weight;
  for (const auto& quota : spec.resource_quotas) weight[quota.namespace_name] = std::stoll(quota.hard.at("shoal.dev/namespace.weight"));
  std::map<std::string, int64_t> queue_weight;
  for (const auto& q : spec.queues) queue_weight[q.name] = q.weight;
  for (size_t i = 0; i < pending.size(); ++i) by_namespace[pending[i].spec.namespace_name].push_back(i);
  std::map<std::string, model::Resources> ns_used, queue_used;
  size_t placed = 0;
  while (true) {
    std::vector<std::string> names;
    for (const auto& [ns, list] : by_namespace) {
      if (next[ns] < list.size()) names.push_back(ns);
    }
    if (names.empty()) break;
    auto key = [&](const std::string& ns) {
      const auto& queue = pending[by_namespace[ns][0]].spec.queue;
      return std::make_tuple(cluster::dominant_share(queue_used[queue], capacity) / static_cast<double>(queue_weight[queue]),
                             cluster::dominant_share(ns_used[ns], capacity) / static_cast<double>(weight[ns]), ns);
    };
    std::sort(names.begin(), names.end(), [&](const auto& a, const auto& b) { return key(a) < key(b); });
    const std::string& ns = names.front();
    const auto& w = pending[by_namespace[ns][next[ns]++]].spec;
    std::optional<size_t> best;
    double best_fraction = 2;
    for (size_t n = 0; n < spec.nodes.size(); ++n) {
      if (!(spec.nodes[n].capacity - allocated[n]).fits(w.resources)) continue;
      double fraction = (static_cast<double>(allocated[n].cpu_milli) / static_cast<double>(spec.nodes[n].capacity.cpu_milli) +
                         static_cast<double>(allocated[n].memory_bytes) / static_cast<double>(spec.nodes[n].capacity.memory_bytes)) / 2;
      if (fraction < best_fraction) {
        best = n;
        best_fraction = fraction;
      }
    }
    if (!best) continue;
    allocated[*best] += w.resources;
    ns_used[ns] += w.resources;
    queue_used[w.queue] += w.resources;
    (*cpu_by_namespace)[ns] += w.resources.cpu_milli;
    ++placed;
  }
  return placed;
}

void BM_FairShareScheduler(benchmark::State& state) {
  auto spec = bench_cluster();
  auto pending = workloads();
  size_t placed = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto scheduler = cluster::FairShareScheduler::create(spec);
    state.ResumeTiming();
    auto result = scheduler->allocate(pending);
    placed = static_cast<size_t>(std::count_if(result.workloads.begin(), result.workloads.end(),
                                               [](const auto& d) { return d.admitted; }));
  }
  state.counters["tasks_per_second"] =
      benchmark::Counter(static_cast<double>(placed), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_NaiveScheduler(benchmark::State& state) {
  auto spec = bench_cluster();
  auto pending = workloads();
  size_t placed = 0;
  for (auto _ : state) {
    std::map<std::string, int64_t> cpu;
    placed = naive_allocate(spec, pending, &cpu);
  }
  state.counters["tasks_per_second"] =
      benchmark::Counter(static_cast<double>(placed), benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK(BM_FairShareScheduler)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_NaiveScheduler)->Unit(benchmark::kMillisecond)->Iterations(1);

class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& run : runs) {
      std::string name = run.benchmark_name();
      rate_[name.substr(0, name.find('/'))] = run.counters.at("tasks_per_second");
    }
    ConsoleReporter::ReportRuns(runs);
  }
  void print_ratio() const {
    double fast = rate_.at("BM_FairShareScheduler"), naive = rate_.at("BM_NaiveScheduler");
    std::printf("\nscheduler: %.0f tasks/s (goal >= 20,000), naive %.0f tasks/s, ratio %.1fx\n", fast, naive, fast / naive);
  }

 private:
  std::map<std::string, double> rate_;
};

}  // namespace

int main(int argc, char** argv) {
  // Both allocators must agree on where the cpu went before speed means anything.
  auto spec = bench_cluster();
  auto pending = workloads();
  auto scheduler = cluster::FairShareScheduler::create(spec);
  std::map<std::string, int64_t> fast_cpu, naive_cpu;
  for (const auto& q : scheduler->allocate(pending).queues) {
    for (const auto& ns : q.namespaces) fast_cpu[ns.name] = ns.allocated.cpu_milli;
  }
  naive_allocate(spec, pending, &naive_cpu);
  if (fast_cpu != naive_cpu) {
    std::fprintf(stderr, "the scheduler and the naive allocator disagree\n");
    return 1;
  }
  benchmark::Initialize(&argc, argv);
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_ratio();
  return 0;
}
