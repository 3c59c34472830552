// The cluster an agent of the simulator drives: its sim NodeCluster, with
// every preemption it carries out told to the engine. The simulator checks
// from it that a target preempts only for a placement its source approved,
// and only once per placement (tests/sim/simulation.cc). Everything else
// passes through unchanged, so a run is the same with or without it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "agent/cluster/cluster.h"

namespace shoal::sim {

class WatchedCluster final : public cluster::Cluster {
 public:
  // Told of each preemption that took place: the preemptor's key and its victims.
  using OnPreempt = std::function<void(const std::string& key, const std::vector<std::string>& victims)>;
  // `inner` outlives this.
  WatchedCluster(cluster::Cluster& inner, OnPreempt on_preempt)
      : inner_(inner), on_preempt_(std::move(on_preempt)) {}

  Result<cluster::Preemption> preempt(const std::string& key, const model::WorkloadSpec& spec,
                                      const std::function<bool(const std::string&)>& may_stop,
                                      TimePoint now) override {
    Result<cluster::Preemption> done = inner_.preempt(key, spec, may_stop, now);
    if (done.is_ok()) on_preempt_(key, done->victims);
    return done;
  }

  const model::ClusterSpec& spec() const override { return inner_.spec(); }
  Result<std::vector<std::string>> reserve(const std::string& key, const model::WorkloadSpec& spec) override {
    return inner_.reserve(key, spec);
  }
  bool enqueue(const std::string& key, const model::WorkloadSpec& spec) override {
    return inner_.enqueue(key, spec);
  }
  void withdraw(const std::string& key) override { inner_.withdraw(key); }
  void set_priority(const std::string& key, int32_t priority) override { inner_.set_priority(key, priority); }
  std::vector<Reserved> serve_queue() override { return inner_.serve_queue(); }
  std::string queued_reason(const std::string& key) const override { return inner_.queued_reason(key); }
  Status fits_when_idle(const model::WorkloadSpec& spec) const override { return inner_.fits_when_idle(spec); }
  std::optional<cluster::PreemptionCost> preemption_cost(
      const model::WorkloadSpec& spec, const std::function<bool(const std::string&)>& may_stop) const override {
    return inner_.preemption_cost(spec, may_stop);
  }
  Status restore(const std::string& key, const model::WorkloadSpec& spec,
                 const std::vector<std::string>& nodes, Restored restored) override {
    return inner_.restore(key, spec, nodes, restored);
  }
  Status restore_preempted(const std::string& key, const model::WorkloadSpec& spec,
                           const std::vector<std::string>& nodes, TimePoint now) override {
    return inner_.restore_preempted(key, spec, nodes, now);
  }
  void release(const std::string& key) override { inner_.release(key); }
  void stop(const std::string& key, Duration grace) override { inner_.stop(key, grace); }
  Status launch(const cluster::LaunchRequest& request) override { return inner_.launch(request); }
  std::vector<cluster::WorkloadEvent> observe(TimePoint now) override { return inner_.observe(now); }
  TimePoint next_event_at() const override { return inner_.next_event_at(); }
  void forget(const std::string& key) override { inner_.forget(key); }
  Result<cluster::LogChunk> read_log(const std::string& key, int replica, int64_t offset,
                                     size_t max_bytes) const override {
    return inner_.read_log(key, replica, offset, max_bytes);
  }
  std::string describe(const std::string& key) const override { return inner_.describe(key); }
  Status health() const override { return inner_.health(); }
  int64_t backlog() const override { return inner_.backlog(); }
  cluster::CapacitySummary capacity() const override { return inner_.capacity(); }
  cluster::CapacitySummary capacity_for(const std::string& namespace_name) const override {
    return inner_.capacity_for(namespace_name);
  }
  std::optional<cluster::CapacitySummary> capacity_for(const std::string& namespace_name,
                                                       const std::string& queue) const override {
    return inner_.capacity_for(namespace_name, queue);
  }
  uint64_t capacity_version() const override { return inner_.capacity_version(); }
  const std::vector<std::string>& queue_names() const override { return inner_.queue_names(); }
  const std::vector<cluster::NodeUsage>& nodes() const override { return inner_.nodes(); }

 private:
  cluster::Cluster& inner_;
  OnPreempt on_preempt_;
};

}  // namespace shoal::sim
