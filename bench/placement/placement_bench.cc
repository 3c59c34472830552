// bench/placement: 10,000 clusters in three levels (4 providers x 10 regions
// x 25 zones x 10 clusters). Spread selection of N = 100 and weighted routing
// of N = 1, each against a straightforward re-scan baseline in the same run.
// Goals on the reference machine: spread < 5 ms, routing < 0.5 ms.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <random>

#include "agent/placement/engine.h"
#include "naive_spread.h"

namespace {

using namespace shoal;

std::vector<model::ClusterCandidate> inventory() {
  std::vector<model::ClusterCandidate> clusters;
  std::mt19937_64 rng(7);
  for (int p = 0; p < 4; ++p) {
    for (int r = 0; r < 10; ++r) {
      for (int z = 0; z < 25; ++z) {
        for (int i = 0; i < 10; ++i) {
          model::ClusterCandidate c;
          c.name = "c-" + std::to_string(p) + "-" + std::to_string(r) + "-" + std::to_string(z) + "-" + std::to_string(i);
          c.labels = {{"provider", "p" + std::to_string(p)},
                      {"region", "p" + std::to_string(p) + "-r" + std::to_string(r)},
                      {"zone", "p" + std::to_string(p) + "-r" + std::to_string(r) + "-z" + std::to_string(z)}};
          c.free = {64000, int64_t{256} << 30, 0};
          c.largest_free_node = {16000, int64_t{64} << 30, 0};
          c.cluster_counts.workloads = static_cast<int64_t>(rng() % 100);
          clusters.push_back(std::move(c));
        }
      }
    }
  }
  return clusters;
}

const std::vector<model::ClusterCandidate>& clusters() {
  static const auto* all = new std::vector<model::ClusterCandidate>(inventory());
  return *all;
}

model::WorkloadSpec workload() {
  model::WorkloadSpec w;
  w.name = "bench";
  w.resources = {1000, 1 << 30, 0};
  return w;
}

model::PlacementSpec spread_policy() {
  model::PlacementSpec p;
  p.number_of_clusters = 100;
  p.spread_constraints = {{"provider", false, 1, model::WhenUnsatisfiable::kScheduleAnyway},
                          {"region", false, 1, model::WhenUnsatisfiable::kScheduleAnyway},
                          {"zone", false, 1, model::WhenUnsatisfiable::kDoNotSchedule}};
  return p;
}

model::PlacementSpec routing_policy() {
  model::PlacementSpec p;
  model::RoutingPolicy routing;
  routing.metric = model::RoutingMetric::kWorkloads;
  routing.domain = model::RoutingDomain::kCluster;
  int64_t weight = 1;
  for (const auto& c : clusters()) routing.weights[c.name] = 1 + (weight++ % 7);
  p.routing = routing;
  return p;
}

void BM_SpreadEngine(benchmark::State& state) {
  auto policy = spread_policy();
  auto w = workload();
  for (auto _ : state) {
    auto out = placement::place(w, policy, clusters(), {});
    benchmark::DoNotOptimize(out.decisions);
  }
}

void BM_SpreadNaive(benchmark::State& state) {
  auto policy = spread_policy();
  for (auto _ : state) benchmark::DoNotOptimize(bench::naive_spread(policy, clusters()));
}

void BM_RoutingEngine(benchmark::State& state) {
  auto policy = routing_policy();
  auto w = workload();
  for (auto _ : state) {
    auto out = placement::place(w, policy, clusters(), {});
    benchmark::DoNotOptimize(out.decisions);
  }
}

void BM_RoutingNaive(benchmark::State& state) {
  auto policy = routing_policy();
  for (auto _ : state) benchmark::DoNotOptimize(bench::naive_route(policy, clusters()));
}

BENCHMARK(BM_SpreadEngine)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SpreadNaive)->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK(BM_RoutingEngine)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RoutingNaive)->Unit(benchmark::kMillisecond);

// Records each benchmark's mean time so ratios can be printed at the end.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& run : runs) {
      std::string name = run.benchmark_name();
      name = name.substr(0, name.find('/'));  // drop "/iterations:2"
      seconds_[name] = run.GetAdjustedRealTime() / 1e3;  // ms -> s
    }
    ConsoleReporter::ReportRuns(runs);
  }
  void print_ratios() const {
    auto ms = [&](const char* name) { return seconds_.at(name) * 1e3; };
    std::printf("\nspread  N=100 over 10,000 clusters: engine %.3f ms (goal < 5 ms), naive %.1f ms, naive/engine = %.1fx\n",
                ms("BM_SpreadEngine"), ms("BM_SpreadNaive"), ms("BM_SpreadNaive") / ms("BM_SpreadEngine"));
    std::printf("routing N=1   over 10,000 clusters: engine %.3f ms (goal < 0.5 ms), naive %.3f ms, naive/engine = %.2fx\n",
                ms("BM_RoutingEngine"), ms("BM_RoutingNaive"), ms("BM_RoutingNaive") / ms("BM_RoutingEngine"));
  }

 private:
  std::map<std::string, double> seconds_;
};

}  // namespace

int main(int argc, char** argv) {
  // Both implementations must agree before their speeds mean anything.
  auto policy = spread_policy();
  auto engine = placement::place(workload(), policy, clusters(), {}).decisions;
  auto naive = bench::naive_spread(policy, clusters());
  if (engine != naive) {
    std::fprintf(stderr, "engine and naive spread disagree (%zu vs %zu decisions)\n", engine.size(), naive.size());
    return 1;
  }
  auto routing = routing_policy();
  if (placement::place(workload(), routing, clusters(), {}).decisions.front() != bench::naive_route(routing, clusters())) {
    std::fprintf(stderr, "engine and naive routing disagree\n");
    return 1;
  }
  benchmark::Initialize(&argc, argv);
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_ratios();
  return 0;
}
