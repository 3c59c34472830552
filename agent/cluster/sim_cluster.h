// The sim backend: nodes from a Cluster manifest, placement by the local
// fair-share scheduler, and workloads that "run" for spec.duration on the
// injected clock's time.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/cluster/cluster.h"
#include "agent/cluster/fair_share.h"

namespace shoal::cluster {

class SimCluster final : public Cluster {
 public:
  // Refuses a manifest the scheduler cannot use (e.g. an unknown quota key).
  static Result<std::unique_ptr<SimCluster>> create(model::ClusterSpec spec);

  const model::ClusterSpec& spec() const override { return spec_; }
  Result<std::vector<std::string>> reserve(const std::string& key,
                                           const model::WorkloadSpec& spec) override;
  bool enqueue(const std::string& key, const model::WorkloadSpec& spec) override;
  void withdraw(const std::string& key) override;
  std::vector<Reserved> serve_queue() override;
  std::string queued_reason(const std::string& key) const override;
  Status fits_when_idle(const model::WorkloadSpec& spec) const override;
  Status restore(const std::string& key, const model::WorkloadSpec& spec,
                 const std::vector<std::string>& nodes) override;
  void release(const std::string& key) override;
  Status start(const std::string& key, TimePoint started_at, Duration duration,
               int32_t exit_code) override;
  std::vector<WorkloadEvent> drain_events(TimePoint now) override;
  TimePoint next_event_at() const override;
  CapacitySummary capacity() const override;
  CapacitySummary capacity_for(const std::string& namespace_name) const override;
  std::optional<CapacitySummary> capacity_for(const std::string& namespace_name,
                                              const std::string& queue) const override;
  std::vector<std::string> queue_names() const override;
  std::vector<NodeUsage> nodes() const override;

  // Asserts the bookkeeping: allocations match holdings, nothing over
  // capacity, the queue consistent and holding nothing reserved.
  bool check_invariants() const;

 private:
  SimCluster(model::ClusterSpec spec, FairShareScheduler scheduler);

  struct Holding {
    model::WorkloadSpec spec;
    model::Resources per_replica;
    std::vector<size_t> node_indexes;
    bool started = false;
    bool start_reported = false;
    TimePoint finish_at{};
    int32_t exit_code = 0;
  };
  void allocate(size_t node, const model::Resources& amount);
  void hold(const std::string& key, const model::WorkloadSpec& spec, const std::vector<std::string>& nodes);

  model::ClusterSpec spec_;
  FairShareScheduler scheduler_;
  FairShareScheduler idle_scheduler_;  // the same cluster with nothing held: fits_when_idle
  std::vector<NodeUsage> usage_;  // parallel to spec_.nodes
  std::map<std::string, Holding> holdings_;
  ScheduleQueue queue_;
};

}  // namespace shoal::cluster
