// What listing workloads costs the agent per workload (a page of
// `get workloads` is served inside one loop iteration, so its cost is the
// loop's latency for everyone else). Reported per workload; compare runs
// of the same build, never absolute times.
#include <benchmark/benchmark.h>

#include "agent/runtime/control_views.h"

namespace {

shoal::store::WorkloadRecord sample_record(int i) {
  shoal::store::WorkloadRecord record;
  record.uid = "0123456789abcdef0123456789abcdef-" + std::to_string(i);
  record.spec.namespace_name = "default";
  record.spec.name = "w" + std::to_string(i);
  record.spec.resources.cpu_milli = 1000;
  record.spec.resources.memory_bytes = int64_t{1} << 30;
  record.spec.placement.clusters = {"t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7"};
  record.phase = shoal::model::Phase::kPending;
  record.reason = "Unschedulable: all clusters rejected: solo=NoCapacity:QueueDeservedShareReached";
  record.epoch = 3;
  record.created_at = shoal::from_millis(1'790'000'000'000);
  return record;
}

// A page of 500, as get-workloads builds and sends it.
void BM_WorkloadPageToJsonText(benchmark::State& state) {
  std::vector<shoal::store::WorkloadRecord> records;
  for (int i = 0; i < 500; ++i) records.push_back(sample_record(i));
  for (auto _ : state) {
    nlohmann::json items = nlohmann::json::array();
    for (const auto& record : records) items.push_back(shoal::runtime::workload_to_json(record));
    std::string text = nlohmann::json{{"ok", true}, {"items", std::move(items)}}.dump();
    benchmark::DoNotOptimize(text);
  }
  state.SetItemsProcessed(state.iterations() * 500);
}
BENCHMARK(BM_WorkloadPageToJsonText)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
