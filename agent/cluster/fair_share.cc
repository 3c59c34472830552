#include "agent/cluster/fair_share.h"

#include <algorithm>
#include <climits>
#include <deque>
#include <queue>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

namespace shoal::cluster {
namespace {

using model::Resources;

bool node_matches(const model::NodeSpec& node, const model::Labels& selector) {
  for (const auto& [key, value] : selector) {
    auto it = node.labels.find(key);
    if (it == node.labels.end() || it->second != value) return false;
  }
  return true;
}

double allocation_fraction(const Resources& allocated, const Resources& capacity) {
  double sum = 0;
  int count = 0;
  auto add = [&](int64_t used, int64_t total) {
    if (total <= 0) return;
    sum += static_cast<double>(used) / static_cast<double>(total);
    ++count;
  };
  add(allocated.cpu_milli, capacity.cpu_milli);
  add(allocated.memory_bytes, capacity.memory_bytes);
  add(allocated.gpu, capacity.gpu);
  return count ? sum / count : 0;
}

// Deserved share = capacity x weight / sum of weights, per resource.
Resources share_of(const Resources& capacity, int64_t weight, int64_t total_weight) {
  return {capacity.cpu_milli * weight / total_weight, capacity.memory_bytes * weight / total_weight,
          capacity.gpu * weight / total_weight};
}

}  // namespace

double dominant_share(const Resources& used, const Resources& capacity) {
  double share = 0;
  if (capacity.cpu_milli > 0) share = std::max(share, static_cast<double>(used.cpu_milli) / static_cast<double>(capacity.cpu_milli));
  if (capacity.memory_bytes > 0) share = std::max(share, static_cast<double>(used.memory_bytes) / static_cast<double>(capacity.memory_bytes));
  if (capacity.gpu > 0) share = std::max(share, static_cast<double>(used.gpu) / static_cast<double>(capacity.gpu));
  return share;
}

Result<FairShareScheduler> FairShareScheduler::create(const model::ClusterSpec& spec) {
  FairShareScheduler scheduler(spec);
  for (const auto& node : spec.nodes) scheduler.capacity_ += node.capacity;
  scheduler.allocated_.assign(spec.nodes.size(), Resources{});
  scheduler.taken_.assign(spec.nodes.size(), Resources{});
  for (size_t n = 0; n < spec.nodes.size(); ++n) scheduler.node_index_[spec.nodes[n].name] = n;
  for (size_t i = 0; i < spec.resource_quotas.size(); ++i) {
    const auto& quota = spec.resource_quotas[i];
    NamespaceQuota& limits = scheduler.quotas_[quota.namespace_name];
    for (const auto& [key, value] : quota.hard) {
      std::string field = "cluster manifest spec.resourceQuotas[" + std::to_string(i) + "].hard." + key;
      if (key == "shoal.dev/namespace.weight" || key == "volcano.sh/namespace.weight") {
        // A missing, non-integer or non-positive weight counts as 1; the highest wins.
        int64_t weight = 1;
        try {
          size_t used = 0;
          long long parsed = std::stoll(value, &used);
          if (used == value.size() && parsed > 0) weight = parsed;
        } catch (...) {
        }
        int64_t& current = scheduler.namespace_weights_[quota.namespace_name];
        current = std::max(current, weight);
        continue;
      }
      // Several quotas on one namespace all apply: the tightest limit wins.
      auto tighten = [](std::optional<int64_t>& limit, int64_t candidate) {
        limit = limit ? std::min(*limit, candidate) : candidate;
      };
      if (key == "cpu" || key == "requests.cpu" || key == "limits.cpu") {
        SHOAL_ASSIGN_OR_RETURN(int64_t v, model::parse_cpu_milli(value, field));
        tighten(limits.cpu_milli, v);
      } else if (key == "memory" || key == "requests.memory" || key == "limits.memory") {
        SHOAL_ASSIGN_OR_RETURN(int64_t v, model::parse_memory_bytes(value, field));
        tighten(limits.memory_bytes, v);
      } else if (key == "gpu" || key == "requests.gpu" || key == "limits.gpu") {
        SHOAL_ASSIGN_OR_RETURN(int64_t v, model::parse_count(value, field));
        tighten(limits.gpu, v);
      } else if (key == "count/workloads") {
        SHOAL_ASSIGN_OR_RETURN(int64_t v, model::parse_count(value, field));
        tighten(limits.workloads, v);
      } else {
        return invalid_argument(field + ": unknown quota key (expected cpu, memory, gpu, "
                                        "requests.*, limits.*, count/workloads or "
                                        "shoal.dev/namespace.weight)");
      }
    }
  }
  return scheduler;
}

Result<std::vector<std::string>> FairShareScheduler::admit(const std::string& key,
                                                           const model::WorkloadSpec& spec) {
  model::WorkloadSpec whole = spec;
  whole.min_available = 0;  // a reservation holds every replica
  ScheduleResult result = allocate({{key, whole}});
  const WorkloadDecision& decision = result.workloads.front();
  if (!decision.admitted) return Status(ErrorCode::kUnavailable, decision.reason);
  return decision.nodes;
}

void FairShareScheduler::release(const model::WorkloadSpec& spec, const std::vector<std::string>& nodes) {
  for (const auto& name : nodes) {
    auto it = node_index_.find(name);
    if (it != node_index_.end()) allocated_[it->second] -= spec.resources;
  }
  Resources amount = spec.resources * static_cast<int64_t>(nodes.size());
  namespace_used_[spec.namespace_name] -= spec.total();
  namespace_workloads_[spec.namespace_name] -= 1;
  queue_allocated_[spec.queue] -= amount;
  queue_namespace_allocated_[{spec.queue, spec.namespace_name}] -= amount;
}

void FairShareScheduler::set_room_taken(std::vector<Resources> taken) {
  taken.resize(spec_.nodes.size());
  taken_ = std::move(taken);
}

void FairShareScheduler::put_node(const model::NodeSpec& node) {
  if (auto known = node_index_.find(node.name); known != node_index_.end()) {
    model::NodeSpec& have = spec_.nodes[known->second];
    capacity_ -= have.capacity;
    capacity_ += node.capacity;
    have = node;
    return;
  }
  node_index_[node.name] = spec_.nodes.size();
  spec_.nodes.push_back(node);
  allocated_.push_back({});
  taken_.push_back({});
  capacity_ += node.capacity;
}

Status FairShareScheduler::restore(const model::WorkloadSpec& spec, const std::vector<std::string>& nodes) {
  std::vector<Resources> trial = allocated_;
  for (const auto& name : nodes) {
    auto it = node_index_.find(name);
    if (it == node_index_.end()) return not_found("node " + name + " is no longer in the cluster");
    trial[it->second] += spec.resources;
    if (!spec_.nodes[it->second].capacity.fits(trial[it->second])) {
      return Status(ErrorCode::kUnavailable, "node " + name + " no longer has room");
    }
  }
  allocated_ = std::move(trial);
  Resources amount = spec.resources * static_cast<int64_t>(nodes.size());
  namespace_used_[spec.namespace_name] += spec.total();
  namespace_workloads_[spec.namespace_name] += 1;
  queue_allocated_[spec.queue] += amount;
  queue_namespace_allocated_[{spec.queue, spec.namespace_name}] += amount;
  return Status::ok();
}

Resources FairShareScheduler::quota_headroom(const std::string& namespace_name) const {
  constexpr int64_t kUnlimited = INT64_MAX / 4;
  Resources headroom{kUnlimited, kUnlimited, kUnlimited};
  auto quota = quotas_.find(namespace_name);
  if (quota == quotas_.end()) return headroom;
  auto used_it = namespace_used_.find(namespace_name);
  Resources used = used_it == namespace_used_.end() ? Resources{} : used_it->second;
  if (quota->second.cpu_milli) headroom.cpu_milli = std::max<int64_t>(0, *quota->second.cpu_milli - used.cpu_milli);
  if (quota->second.memory_bytes) headroom.memory_bytes = std::max<int64_t>(0, *quota->second.memory_bytes - used.memory_bytes);
  if (quota->second.gpu) headroom.gpu = std::max<int64_t>(0, *quota->second.gpu - used.gpu);
  return headroom;
}

std::optional<Resources> FairShareScheduler::queue_headroom(const std::string& queue) const {
  constexpr int64_t kUnlimited = INT64_MAX / 4;
  int64_t total_weight = 0;
  const model::QueueSpec* found = nullptr;
  for (const auto& q : spec_.queues) {
    total_weight += q.weight;
    if (q.name == queue) found = &q;
  }
  if (!found) return std::nullopt;
  if (spec_.borrowing) return Resources{kUnlimited, kUnlimited, kUnlimited};
  Resources deserved = share_of(capacity_, found->weight, total_weight);
  auto it = queue_allocated_.find(queue);
  Resources used = it == queue_allocated_.end() ? Resources{} : it->second;
  return Resources{std::max<int64_t>(0, deserved.cpu_milli - used.cpu_milli),
                   std::max<int64_t>(0, deserved.memory_bytes - used.memory_bytes),
                   std::max<int64_t>(0, deserved.gpu - used.gpu)};
}

Resources FairShareScheduler::deserved_share(const std::string& queue) const {
  int64_t total_weight = 0, weight = 0;
  for (const auto& q : spec_.queues) {
    total_weight += q.weight;
    if (q.name == queue) weight = q.weight;
  }
  return total_weight > 0 ? share_of(capacity_, weight, total_weight) : Resources{};
}

Resources FairShareScheduler::queue_allocated(const std::string& queue) const {
  auto it = queue_allocated_.find(queue);
  return it == queue_allocated_.end() ? Resources{} : it->second;
}

std::optional<PreemptionPlan> FairShareScheduler::plan_preemption(
    const model::WorkloadSpec& spec, const std::vector<RunningWork>& running,
    const std::function<bool(const RunningWork&)>& may_stop) const {
  using model::PreemptionSpec;
  const PreemptionSpec& rules = spec_.preemption;
  if (!rules.enabled() || spec.preemption_policy == model::PreemptionPolicy::kNever) return std::nullopt;
  // Reclaim takes back only what `spec`'s queue deserves.
  bool may_reclaim = rules.reclaim != PreemptionSpec::Reclaim::kNever &&
                     deserved_share(spec.queue).fits(queue_allocated(spec.queue) + spec.total());
  std::vector<const RunningWork*> eligible;
  for (const RunningWork& work : running) {
    const model::WorkloadSpec& held = *work.spec;
    bool lower = held.priority < spec.priority;
    bool allowed = held.queue == spec.queue
                       ? rules.within_queue == PreemptionSpec::WithinQueue::kLowerPriority && lower
                       : may_reclaim && (rules.reclaim == PreemptionSpec::Reclaim::kAny || lower) &&
                             !deserved_share(held.queue).fits(queue_allocated(held.queue));
    if (allowed && may_stop(work)) eligible.push_back(&work);
  }
  if (eligible.empty()) return std::nullopt;
  std::sort(eligible.begin(), eligible.end(), [](const RunningWork* a, const RunningWork* b) {
    return std::tuple(a->spec->priority, ~a->started, a->key) <
           std::tuple(b->spec->priority, ~b->started, b->key);
  });
  // Fits `spec` with everything in `stopped` gone: its nodes, or nullopt.
  auto fits_without = [&](const std::vector<const RunningWork*>& stopped)
      -> std::optional<std::vector<std::string>> {
    FairShareScheduler trial = *this;
    for (const RunningWork* work : stopped) trial.release(*work->spec, work->nodes);
    Result<std::vector<std::string>> nodes = trial.admit("preemptor", spec);
    if (!nodes.is_ok()) return std::nullopt;
    return std::move(*nodes);
  };
  std::vector<const RunningWork*> chosen;
  std::optional<std::vector<std::string>> nodes;
  FairShareScheduler after = *this;  // with the chosen victims gone
  for (const RunningWork* work : eligible) {
    const model::WorkloadSpec& held = *work->spec;
    // A borrowing queue gives back only down to its deserved share.
    if (held.queue != spec.queue && after.deserved_share(held.queue).fits(after.queue_allocated(held.queue))) {
      continue;
    }
    after.release(held, work->nodes);
    chosen.push_back(work);
    FairShareScheduler probe = after;
    if (Result<std::vector<std::string>> fit = probe.admit("preemptor", spec); fit.is_ok()) {
      nodes = std::move(*fit);
      break;
    }
  }
  if (!nodes) return std::nullopt;
  // Spare what is not needed after all, the highest priority first.
  for (size_t i = chosen.size(); i-- > 0;) {
    std::vector<const RunningWork*> without = chosen;
    without.erase(without.begin() + static_cast<std::ptrdiff_t>(i));
    if (auto spared = fits_without(without)) {
      chosen = std::move(without);
      nodes = std::move(spared);
    }
  }
  PreemptionPlan plan;
  plan.nodes = std::move(*nodes);
  plan.highest_priority = chosen.front()->spec->priority;
  for (const RunningWork* work : chosen) {
    plan.victims.push_back(work->key);
    plan.highest_priority = std::max(plan.highest_priority, work->spec->priority);
  }
  return plan;
}

int64_t FairShareScheduler::namespace_weight(const std::string& namespace_name) const {
  auto it = namespace_weights_.find(namespace_name);
  return it == namespace_weights_.end() || it->second < 1 ? 1 : it->second;
}

ScheduleResult FairShareScheduler::allocate(const std::vector<ScheduleRequest>& pending) {
  // Keys of their own: a request's key need not be unique here.
  ScheduleQueue queue;
  for (size_t i = 0; i < pending.size(); ++i) queue.push(std::to_string(i), pending[i].spec);
  std::vector<std::pair<std::string, std::string>> with_work = queue.namespaces();
  std::vector<Served> served = serve(queue, /*whole=*/false);

  ScheduleResult result;
  result.workloads.resize(pending.size());
  for (size_t i = 0; i < pending.size(); ++i) {
    result.workloads[i].key = pending[i].key;
    result.workloads[i].reason = std::string(queue.reason(std::to_string(i)));
  }
  for (Served& one : served) {
    size_t i = std::stoul(one.key);
    WorkloadDecision& decision = result.workloads[i];
    decision.admitted = true;
    decision.nodes = std::move(one.nodes);
    decision.reason = std::move(one.reason);
    if (static_cast<int32_t>(decision.nodes.size()) < pending[i].spec.replicas &&
        decision.reason.empty()) {
      decision.reason = "PartiallyPlaced";
    }
  }
  int64_t total_weight = 0;
  for (const auto& q : spec_.queues) total_weight += q.weight;
  for (const auto& q : spec_.queues) {
    QueueReport report{q.name, q.weight, share_of(capacity_, q.weight, total_weight),
                       queue_allocated_[q.name], {}};
    for (const auto& [queue_name, ns] : with_work) {
      if (queue_name != q.name) continue;
      report.namespaces.push_back(
          {ns, namespace_weight(ns), queue_namespace_allocated_[{q.name, ns}]});
    }
    result.queues.push_back(std::move(report));
  }
  return result;
}

// The state of one serve(): the nodes ordered by allocation (re-keyed after
// every placement), each group's cursor over its members, and what was
// admitted so far. A pass walks each group with a cursor; the queue itself
// changes only when a workload is done (admitted whole, or partly and the
// pass moved on), in finish().
class FairShareScheduler::ServePass {
 public:
  ServePass(FairShareScheduler& scheduler, ScheduleQueue& queue, bool whole)
      : s_(scheduler), queue_(queue), whole_(whole), node_key_(s_.spec_.nodes.size()) {
    int64_t total_weight = 0;
    for (const auto& q : s_.spec_.queues) {
      queue_index_[q.name] = queue_index_.size();
      total_weight += q.weight;
    }
    for (const auto& q : s_.spec_.queues) {
      deserved_.push_back(share_of(s_.capacity_, q.weight, total_weight));
    }
    for (size_t n = 0; n < s_.spec_.nodes.size(); ++n) {
      node_key_[n] = allocation_fraction(s_.allocated_[n], s_.spec_.nodes[n].capacity);
      node_order_.insert({node_key_[n], n});
    }
  }

  // One pass over the queue in fair-share order: the queue furthest below
  // its weight goes next, and within it the namespace furthest below its
  // weight. `capped`: no queue goes past its deserved share.
  void run(bool capped);
  // Takes what was admitted out of the queue, in the order admitted.
  std::vector<Served> finish();

 private:
  using Group = ScheduleQueue::Group;
  using Rank = ScheduleQueue::Rank;
  struct Cursor {
    Group* group;
    ScheduleQueue::Members::iterator at;
  };
  struct NamespacePass {
    const ScheduleQueue::Namespace* ns;
    std::set<std::pair<Rank, Cursor*>> open;  // groups not refused, by their next member
  };
  struct Progress {
    int32_t placed = 0;
    std::vector<std::string> nodes;
    std::string reason;  // the refusal that left it partly placed
  };
  using Entry = std::tuple<double, std::string, size_t>;  // (weighted share, name, pass index)
  using Heap = std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>>;

  // One task of `spec` on the first node that fits in node order
  // (LeastAllocated from the front, MostAllocated from the back).
  bool place_task(const model::WorkloadSpec& spec, std::vector<size_t>* chosen);
  void unplace(const model::WorkloadSpec& spec, const std::vector<size_t>& nodes);
  void rekey(size_t node, const Resources& delta, int sign);
  // Past what an earlier pass placed whole (one partly placed goes on).
  void skip_placed(Cursor& cursor);
  double namespace_share(size_t q, const std::string& ns) const;
  // Why the first tasks of `spec` may not be admitted in its namespace ("" if they may).
  std::string quota_refusal(const model::WorkloadSpec& spec) const;
  // The next member of `pass` tries its turn; the pass stays open while it
  // has members that may still be admitted.
  void take_turn(size_t q, NamespacePass& pass, bool capped);

  FairShareScheduler& s_;
  ScheduleQueue& queue_;
  const bool whole_;
  std::map<std::string, size_t> queue_index_;
  std::vector<Resources> deserved_;
  std::set<std::pair<double, size_t>> node_order_;
  std::vector<double> node_key_;
  std::unordered_map<std::string, Progress> progress_;  // admitted at least its gang
  std::vector<std::string> done_;                       // admitted; leaves the queue in finish()
};

void FairShareScheduler::ServePass::rekey(size_t node, const Resources& delta, int sign) {
  node_order_.erase({node_key_[node], node});
  if (sign > 0) {
    s_.allocated_[node] += delta;
  } else {
    s_.allocated_[node] -= delta;
  }
  node_key_[node] = allocation_fraction(s_.allocated_[node], s_.spec_.nodes[node].capacity);
  node_order_.insert({node_key_[node], node});
}

bool FairShareScheduler::ServePass::place_task(const model::WorkloadSpec& spec,
                                               std::vector<size_t>* chosen) {
  auto fits = [&](size_t n) {
    return (s_.spec_.nodes[n].capacity - s_.allocated_[n] - s_.taken_[n]).fits(spec.resources) &&
           node_matches(s_.spec_.nodes[n], spec.node_selector);
  };
  std::optional<size_t> pick;
  if (s_.spec_.node_order == model::NodeOrder::kLeastAllocated) {
    for (auto it = node_order_.begin(); it != node_order_.end() && !pick; ++it) {
      if (fits(it->second)) pick = it->second;
    }
  } else {
    for (auto it = node_order_.rbegin(); it != node_order_.rend() && !pick; ++it) {
      if (fits(it->second)) pick = it->second;
    }
  }
  if (!pick) return false;
  rekey(*pick, spec.resources, 1);
  chosen->push_back(*pick);
  return true;
}

void FairShareScheduler::ServePass::unplace(const model::WorkloadSpec& spec,
                                            const std::vector<size_t>& nodes) {
  for (size_t n : nodes) rekey(n, spec.resources, -1);
}

void FairShareScheduler::ServePass::skip_placed(Cursor& cursor) {
  for (; cursor.at != cursor.group->members.end(); ++cursor.at) {
    auto found = progress_.find(cursor.at->second);
    if (found == progress_.end() || found->second.placed < cursor.group->shape.replicas) return;
  }
}

double FairShareScheduler::ServePass::namespace_share(size_t q, const std::string& ns) const {
  auto it = s_.queue_namespace_allocated_.find({s_.spec_.queues[q].name, ns});
  Resources used = it == s_.queue_namespace_allocated_.end() ? Resources{} : it->second;
  return dominant_share(used, s_.capacity_) / static_cast<double>(s_.namespace_weight(ns));
}

std::string FairShareScheduler::ServePass::quota_refusal(const model::WorkloadSpec& spec) const {
  auto quota_of = s_.quotas_.find(spec.namespace_name);
  if (quota_of == s_.quotas_.end()) return "";
  const NamespaceQuota& quota = quota_of->second;
  auto used_of = s_.namespace_used_.find(spec.namespace_name);
  Resources used = (used_of == s_.namespace_used_.end() ? Resources{} : used_of->second) + spec.total();
  if (quota.cpu_milli && used.cpu_milli > *quota.cpu_milli) return "QuotaExceeded:cpu";
  if (quota.memory_bytes && used.memory_bytes > *quota.memory_bytes) return "QuotaExceeded:memory";
  if (quota.gpu && used.gpu > *quota.gpu) return "QuotaExceeded:gpu";
  auto workloads = s_.namespace_workloads_.find(spec.namespace_name);
  int64_t counted = workloads == s_.namespace_workloads_.end() ? 0 : workloads->second;
  if (quota.workloads && counted + 1 > *quota.workloads) return "QuotaExceeded:count/workloads";
  return "";
}

void FairShareScheduler::ServePass::run(bool capped) {
  std::deque<Cursor> cursors;
  std::vector<NamespacePass> passes;
  std::vector<std::vector<size_t>> by_queue(s_.spec_.queues.size());  // indexes into passes
  passes.reserve(queue_.namespaces_.size());
  for (auto& [id, ns] : queue_.namespaces_) {
    auto q = queue_index_.find(ns.queue);
    if (q == queue_index_.end()) {
      for (const auto& [rank, group] : ns.heads) group->reason = "NoSuchQueue:" + ns.queue;
      continue;
    }
    NamespacePass pass{&ns, {}};
    for (const auto& [rank, group] : ns.heads) {
      Cursor& cursor = cursors.emplace_back(Cursor{group, group->members.begin()});
      skip_placed(cursor);
      if (cursor.at != group->members.end()) pass.open.emplace(cursor.at->first, &cursor);
    }
    if (pass.open.empty()) continue;
    by_queue[q->second].push_back(passes.size());
    passes.push_back(std::move(pass));
  }
  std::vector<Heap> heaps(s_.spec_.queues.size());
  for (size_t q = 0; q < by_queue.size(); ++q) {
    for (size_t p : by_queue[q]) {
      heaps[q].push({namespace_share(q, passes[p].ns->name), passes[p].ns->name, p});
    }
  }
  while (true) {
    // The queue furthest below its weight goes next.
    std::optional<size_t> best_queue;
    double best_share = 0;
    for (size_t q = 0; q < heaps.size(); ++q) {
      if (heaps[q].empty()) continue;
      double share = dominant_share(s_.queue_allocated_[s_.spec_.queues[q].name], s_.capacity_) /
                     static_cast<double>(s_.spec_.queues[q].weight);
      if (!best_queue || share < best_share) {
        best_queue = q;
        best_share = share;
      }
    }
    if (!best_queue) return;
    size_t q = *best_queue;
    size_t p = std::get<2>(heaps[q].top());
    heaps[q].pop();
    NamespacePass& pass = passes[p];
    take_turn(q, pass, capped);
    if (!pass.open.empty()) heaps[q].push({namespace_share(q, pass.ns->name), pass.ns->name, p});
  }
}

void FairShareScheduler::ServePass::take_turn(size_t q, NamespacePass& pass, bool capped) {
  const std::string& queue_name = s_.spec_.queues[q].name;
  const std::string& ns_name = pass.ns->name;
  Cursor* cursor = pass.open.begin()->second;
  pass.open.erase(pass.open.begin());
  Group* group = cursor->group;
  const std::string& key = cursor->at->second;
  queue_.tries_ += 1;
  model::WorkloadSpec& spec = group->shape;
  Progress* started = nullptr;
  if (auto found = progress_.find(key); found != progress_.end()) started = &found->second;
  bool first = started == nullptr;
  int32_t gang = whole_ ? spec.replicas : spec.gang_size();
  int32_t tasks = first ? gang : 1;
  Resources amount = spec.resources * tasks;
  std::string refusal;
  if (capped && !deserved_[q].fits(s_.queue_allocated_[queue_name] + amount)) {
    refusal = "QueueDeservedShareReached:" + queue_name;
  } else if (first) {
    refusal = quota_refusal(spec);
  }
  std::vector<size_t> chosen;
  if (refusal.empty()) {
    for (int32_t t = 0; t < tasks; ++t) {
      if (!place_task(spec, &chosen)) {
        unplace(spec, chosen);  // a gang binds all of its minimum or nothing
        chosen.clear();
        refusal = first && tasks > 1 ? "GangDoesNotFit" : "NoNodeFits";
        break;
      }
    }
  }
  if (!refusal.empty() && first) {
    // Every later member of the group would be refused the same way:
    // the group is closed for the rest of this pass.
    group->reason = refusal;
    return;
  }
  bool moves_on = true;
  if (!refusal.empty()) {
    started->reason = refusal;  // partly placed; the namespace goes on
  } else {
    if (first) {
      started = &progress_[key];
      s_.namespace_used_[spec.namespace_name] += spec.total();
      s_.namespace_workloads_[spec.namespace_name] += 1;
    }
    started->reason.clear();
    for (size_t node : chosen) started->nodes.push_back(s_.spec_.nodes[node].name);
    started->placed += tasks;
    s_.queue_allocated_[queue_name] += amount;
    s_.queue_namespace_allocated_[{queue_name, ns_name}] += amount;
    moves_on = started->placed >= spec.replicas;  // else its next task, when its turn comes
  }
  if (moves_on) {
    done_.push_back(key);
    ++cursor->at;
    skip_placed(*cursor);
  }
  if (cursor->at != group->members.end()) pass.open.emplace(cursor->at->first, cursor);
}

std::vector<FairShareScheduler::Served> FairShareScheduler::ServePass::finish() {
  std::vector<Served> served;
  served.reserve(done_.size());
  std::set<Group*> touched;  // members left: refiled after the passes
  for (const std::string& key : done_) {
    auto found = queue_.index_.find(key);
    if (found == queue_.index_.end()) continue;  // done in both passes: listed once
    Group* group = found->second.group;
    Progress& result = progress_[key];
    served.push_back({key, group->shape, std::move(result.nodes), std::move(result.reason)});
    group->members.erase({found->second.rank, key});
    queue_.index_.erase(found);
    touched.insert(group);
  }
  for (Group* group : touched) queue_.refile(group);
  return served;
}

std::vector<FairShareScheduler::Served> FairShareScheduler::serve(ScheduleQueue& queue,
                                                                  bool whole) {
  ServePass pass(*this, queue, whole);
  pass.run(/*capped=*/true);
  // Idle capacity goes to queues with pending work, still in fair-share order.
  if (spec_.borrowing) pass.run(/*capped=*/false);
  return pass.finish();
}

}  // namespace shoal::cluster
