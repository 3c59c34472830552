// The source role's view of where work can go: the live inventory it
// builds from its own cluster and its targets' CAPACITY, the placement
// engine's ranking of each round over it, and what the source counts as
// sent but not yet advertised (docs/placement.md, "Live and offline").
#include <algorithm>
#include <cstdio>
#include <set>

#include "agent/core/source/role.h"

namespace shoal::core::source {

std::vector<LiveCluster> SourceRole::live_inventory(const std::string& namespace_name,
                                                    const std::string& queue) const {
  std::vector<LiveCluster> out;
  std::set<std::string> names;
  auto unique_name = [&](const std::string& peer_id, std::string name) {
    if (!names.insert(name).second) {
      name += "#" + peer_id.substr(0, 6);  // two peers, one name
      names.insert(name);
    }
    return name;
  };
  // Our own cluster, read directly.
  {
    LiveCluster self;
    self.peer_id = self_id_;
    self.org = config_.org;
    self.state = "Self";
    model::ClusterCandidate& c = self.candidate;
    c.name = unique_name(self_id_, config_.cluster);
    c.labels = cluster_.spec().labels;
    c.claims = cluster_.spec().claims;
    for (const auto& node : cluster_.nodes()) c.allocatable += node.capacity;
    if (auto own = cluster_.capacity_for(namespace_name, queue)) {
      c.free = own->free;
      c.largest_free_node = own->largest_free_node;
    } else {
      self.unavailable = "NoSuchQueue:" + queue;
    }
    if (local_facts_) {
      protocol::Capacity facts = local_facts_(namespace_name);
      for (const auto& ns : facts.namespaces) {
        c.namespace_counts[ns.namespace_name] = ns.counts;
        for (const auto& q : ns.queues) c.queue_counts[q.queue] = q.workloads;
      }
      if (facts.cluster && facts.cluster->counts) c.cluster_counts = *facts.cluster->counts;
    }
    // What we just sent ourselves counts too until it binds (our room is
    // read live, so it needs no such correction).
    if (const TargetLedger::Target* us = targets_.find(self_id_)) {
      const TargetLedger::Target& own = *us;
      c.source_workloads = own.ours;
      c.cluster_counts += own.unadvertised;
      for (const auto& [ns, counts] : own.unadvertised_by_namespace) c.namespace_counts[ns] += counts;
      for (const auto& [key, workloads] : own.unadvertised_by_queue) {
        if (key.first == namespace_name) c.queue_counts[key.second] += workloads;
      }
    }
    out.push_back(std::move(self));
  }
  TimePoint now = clock_.now();
  static const TargetLedger::Target kNothingHeard;
  for (const auto& [id, peer] : peers_.all()) {
    auto accepted = invitations_.valid_accepted(id, now);
    if (accepted.empty()) continue;  // not a target of ours
    LiveCluster live;
    live.peer_id = id;
    live.org = peer.org;
    live.state = leases_.lost(id) ? "Unreachable" : "Active";
    model::ClusterCandidate& c = live.candidate;
    c.name = unique_name(id, peer.cluster);
    std::vector<std::string> namespaces;
    for (const auto* invitation : accepted) {
      namespaces.insert(namespaces.end(), invitation->namespaces.begin(), invitation->namespaces.end());
    }
    bool invited = std::find(namespaces.begin(), namespaces.end(), namespace_name) != namespaces.end();
    c.namespaces = std::move(namespaces);
    const TargetLedger::Target* found = targets_.find(id);
    const TargetLedger::Target& target = found ? *found : kNothingHeard;
    c.labels = target.facts.labels.value_or(model::Labels{});
    c.claims = target.facts.claims.value_or(model::Labels{});
    c.allocatable = target.facts.allocatable;
    c.source_workloads = target.ours;
    // What the target counted when it last advertised, plus what we sent
    // there since: a burst does not all go to whoever looked emptiest.
    if (target.facts.counts) c.cluster_counts = *target.facts.counts;
    c.cluster_counts += target.unadvertised;
    for (const auto& [ns, capacity] : target.capacity) c.namespace_counts[ns] = capacity.counts;
    for (const auto& [ns, counts] : target.unadvertised_by_namespace) c.namespace_counts[ns] += counts;
    auto capacity = target.capacity.find(namespace_name);
    if (capacity != target.capacity.end()) {
      for (const auto& q : capacity->second.queues) c.queue_counts[q.queue] = q.workloads;
    }
    for (const auto& [key, workloads] : target.unadvertised_by_queue) {
      if (key.first == namespace_name) c.queue_counts[key.second] += workloads;
    }
    if (leases_.lost(id)) {
      live.unavailable = "Unreachable";
    } else if (capacity == target.capacity.end()) {
      if (invited) live.unavailable = "NoCapacityAdvertised";
    } else if (auto room = advertised_room(capacity->second, queue)) {
      auto less = [](model::Resources left, const model::Resources& taken) {
        left -= taken;
        left.cpu_milli = std::max<int64_t>(0, left.cpu_milli);
        left.memory_bytes = std::max<int64_t>(0, left.memory_bytes);
        left.gpu = std::max<int64_t>(0, left.gpu);
        return left;
      };
      c.free = less(room->first, target.unadvertised_room);
      c.largest_free_node = room->second;
    } else {
      live.unavailable = "NoSuchQueue:" + queue;
    }
    out.push_back(std::move(live));
  }
  return out;
}

namespace {

// "c5 250, c4 200; left out c2 (zone maxSkew 1 would be exceeded)": what an
// event says of a decision.
std::string abbreviate(const placement::Ranking& ranking) {
  char number[32];
  std::string text;
  size_t shown = 0;
  for (const auto& r : ranking.ranked) {
    if (shown++ == 4) {
      text += ", ...";
      break;
    }
    std::snprintf(number, sizeof number, "%.0f", r.score);
    text += (text.empty() ? "" : ", ") + r.cluster + " " + number;
  }
  const placement::PlacementOutcome& outcome = ranking.outcome;
  if (!outcome.steps.empty() && !outcome.steps.front().excluded.empty()) {
    text += "; left out";
    for (const auto& e : outcome.steps.front().excluded) text += " " + e.cluster + " (" + e.reason + ")";
  }
  if (outcome.draw) {
    std::snprintf(number, sizeof number, "%.6f", *outcome.draw);
    text += "; routing draw " + std::string(number);
  }
  return text;
}

}  // namespace

SourceRole::RankedTargets SourceRole::rank_targets(const store::WorkloadRecord& record) {
  const model::WorkloadSpec& spec = record.spec;
  RankedTargets out;
  std::vector<LiveCluster> inventory = live_inventory(spec.namespace_name, spec.queue);
  std::set<std::string> siblings = book_.sibling_places(record);
  std::vector<model::ClusterCandidate> candidates;
  std::map<std::string, std::string> peer_by_name;
  const SourceWorkload* self = book_.find(record.uid);
  TimePoint now = clock_.now();
  for (LiveCluster& live : inventory) {
    if (!live.unavailable.empty()) {
      out.reason += " " + live.candidate.name + "=" + live.unavailable;
      continue;
    }
    if (self) {
      auto avoided = self->avoid_until.find(live.peer_id);
      if (avoided != self->avoid_until.end() && now < avoided->second) {
        out.reason += " " + live.candidate.name + "=DisruptedItRecently";
        continue;
      }
    }
    live.candidate.placed = siblings.count(live.peer_id) > 0;
    peer_by_name[live.candidate.name] = live.peer_id;
    candidates.push_back(std::move(live.candidate));
  }
  // The workload's whole policy decides, through the same engine and input
  // as `shoalctl place --live` (docs/placement.md).
  model::PlacementSpec policy = placement::live_policy(spec.placement);
  placement::PlaceOptions options;
  if (policy.routing && policy.routing->metric == model::RoutingMetric::kRandom) {
    options.draw = context_.random_unit() * placement::routing_weight_sum(spec, policy, candidates);
  }
  placement::Ranking ranking = placement::rank(spec, policy, candidates, options);
  // Nobody has room now? Targets that lack only free room still get the
  // candidate, ranked by the same policy: they queue it and serve it in
  // their fair-share order when room frees, instead of whoever retries
  // first getting it.
  std::set<std::string> full;
  if (ranking.ranked.empty()) {
    for (const auto& filtered : ranking.outcome.filtered) {
      if (filtered.lacks_only_room) full.insert(filtered.cluster);
    }
  }
  if (!full.empty()) {
    std::vector<model::ClusterCandidate> queueing;
    for (model::ClusterCandidate c : candidates) {
      if (!full.count(c.name) && !c.placed) continue;
      if (full.count(c.name)) c.free = c.largest_free_node = spec.total();
      queueing.push_back(std::move(c));
    }
    placement::Ranking queued = placement::rank(spec, policy, queueing, options);
    ranking.ranked = std::move(queued.ranked);
    out.queueing = true;
  }
  for (const auto& r : ranking.ranked) {
    const std::string& peer_id = peer_by_name.at(r.cluster);
    out.ranked.emplace_back(peer_id, r.cluster);
    out.engine_score[peer_id] = r.score;
  }
  std::set<std::string> ranked_names;
  for (const auto& r : ranking.ranked) ranked_names.insert(r.cluster);
  for (const auto& filtered : ranking.outcome.filtered) {
    if (!ranked_names.count(filtered.cluster)) out.reason += " " + filtered.cluster + "=" + filtered.reason;
  }
  if (ranking.ranked.empty() && !ranking.outcome.reason.empty()) out.reason += " (" + ranking.outcome.reason + ")";
  out.decision = abbreviate(ranking);
  return out;
}

}  // namespace shoal::core::source
