#include "agent/core/target/advertiser.h"

#include <algorithm>
#include <limits>

namespace shoal::core::target {

Advertiser::Advertiser(Context& context, PeerTable& peers, const InvitationBook& invitations,
                       const RoutingCounts& counts, HeldRow held)
    : context_(context),
      peers_(peers),
      invitations_(invitations),
      counts_(counts),
      held_(std::move(held)),
      cluster_(context.cluster()) {}

TimePoint Advertiser::note_pass(TimePoint previous_pass) {
  std::shift_left(recent_passes_.begin(), recent_passes_.end(), 1);
  recent_passes_.back() = previous_pass;
  return recent_passes_.front();
}

std::string Advertiser::broken_invariant() const {
  for (const Slot& slot : slots_) {
    if (slot.row && slot.row != &rows_.find(*slot.id)->second) {
      return "an advertiser slot's row is not its source's";
    }
    if (slot.held && slot.held != &held_(*slot.id)) {
      return "an advertiser slot's held row is not its source's";
    }
  }
  return "";
}

Advertiser::OfferKey Advertiser::offer_key(Row& row, const InvitationUsage& held,
                                             const std::vector<const crypto::Invitation*>& invitations) {
  if (!row.namespaces || row.invited_under != invitations) {
    NamespaceList namespaces;
    row.limits = nullptr;
    for (const auto* invitation : invitations) {
      namespaces.insert(namespaces.end(), invitation->namespaces.begin(),
                        invitation->namespaces.end());
      row.limits = &invitation->limits;
    }
    std::sort(namespaces.begin(), namespaces.end());
    namespaces.erase(std::unique(namespaces.begin(), namespaces.end()), namespaces.end());
    row.namespaces = &*namespace_lists_.insert(std::move(namespaces)).first;
    row.invited_under = invitations;
  }
  const crypto::InvitationLimits* limits = row.limits;
  const InvitationUsage& usage = held;
  // What this source may still take under its invitation: limit - used.
  model::Resources allowance{std::numeric_limits<int64_t>::max(),
                             std::numeric_limits<int64_t>::max(),
                             std::numeric_limits<int64_t>::max()};
  if (limits) {
    auto left = [](std::optional<int64_t> limit, int64_t used, int64_t& out) {
      if (limit) out = std::max<int64_t>(0, *limit - used);
    };
    left(limits->cpu_milli, usage.resources.cpu_milli, allowance.cpu_milli);
    left(limits->memory_bytes, usage.resources.memory_bytes, allowance.memory_bytes);
    left(limits->gpu, usage.resources.gpu, allowance.gpu);
    if (limits->workloads && usage.workloads >= *limits->workloads) allowance = {};
  }
  return {row.namespaces, allowance.cpu_milli, allowance.memory_bytes, allowance.gpu};
}

std::vector<protocol::NamespaceCapacity> Advertiser::compute_offer(const OfferKey& key) const {
  const NamespaceList& namespaces = *std::get<0>(key);
  const model::Resources allowance{std::get<1>(key), std::get<2>(key), std::get<3>(key)};
  auto cap = [&](model::Resources r) {
    return model::Resources{std::min(r.cpu_milli, allowance.cpu_milli),
                            std::min(r.memory_bytes, allowance.memory_bytes),
                            std::min(r.gpu, allowance.gpu)};
  };
  // Only aggregates, only for the namespaces this source is invited into,
  // each capped by that namespace's quota headroom and the invitation's limits.
  std::vector<protocol::NamespaceCapacity> out;
  // What waits in the backend's own queue competes for the same room.
  const int64_t backlog = cluster_.backlog();
  for (const auto& ns : namespaces) {
    cluster::CapacitySummary summary = cluster_.capacity_for(ns);
    protocol::NamespaceCapacity entry{ns, cap(summary.free), cap(summary.largest_free_node), {}, {}};
    for (const auto& queue : cluster_.queue_names()) {
      if (auto per_queue = cluster_.capacity_for(ns, queue)) {
        entry.queues.push_back({queue, cap(per_queue->free), cap(per_queue->largest_free_node),
                                counts_.in_queue(ns, queue) + backlog});
      }
    }
    if (auto counts = counts_.by_namespace().find(ns); counts != counts_.by_namespace().end()) {
      entry.counts = counts->second;
    }
    out.push_back(std::move(entry));
  }
  return out;
}

protocol::Capacity Advertiser::own_counts(const std::string& namespace_name) const {
  protocol::Capacity out;
  protocol::NamespaceCapacity entry;
  entry.namespace_name = namespace_name;
  if (auto counts = counts_.by_namespace().find(namespace_name); counts != counts_.by_namespace().end()) {
    entry.counts = counts->second;
  }
  std::map<std::string, int64_t> queues = counts_.queues_of(namespace_name);
  if (int64_t backlog = cluster_.backlog(); backlog > 0) {
    for (const std::string& queue : cluster_.queue_names()) queues[queue] += backlog;
  }
  for (const auto& [queue, workloads] : queues) entry.queues.push_back({queue, {}, {}, workloads});
  out.namespaces.push_back(std::move(entry));
  out.cluster = protocol::ClusterFacts{};
  out.cluster->counts = counts_.cluster();
  return out;
}

protocol::ClusterFacts Advertiser::cluster_facts() const {
  protocol::ClusterFacts facts;
  const Disclosure& disclose = context_.config().disclose;
  auto disclosed = [](const model::Labels& all, const std::vector<std::string>& allowed) {
    model::Labels out;
    for (const auto& [key, value] : all) {
      if (Disclosure::lists(allowed, key)) out.emplace(key, value);
    }
    return out;
  };
  facts.labels = disclosed(cluster_.spec().labels, disclose.labels);
  facts.claims = disclosed(cluster_.spec().claims, disclose.claims);
  for (const auto& node : cluster_.nodes()) facts.allocatable += node.capacity;
  if (disclose.cluster_counts) facts.counts = counts_.cluster();
  return facts;
}

void Advertiser::advertise(To to, TimePoint due_before) {
  TimePoint now = context_.clock().now();
  // The same for the cluster's facts: one object while they stay the same.
  Facts facts;
  // Each offer is computed once here, for every source that shares it. One
  // equal to the previous call's for its key is that same object, so a
  // source already told it is recognised by pointer, not compared whole.
  std::map<OfferKey, Offer> offers;
  // And so one CAPACITY is usually the same for many sources (one offer,
  // the same facts, with or without labels): built and encoded once.
  struct Encoded {
    protocol::Body body;
    std::vector<uint8_t> bytes;
  };
  std::map<std::tuple<const void*, const void*, bool>, Encoded> encoded;
  // compute_offer reads the cluster, the counts and the backlog besides
  // its key: unchanged since the last pass, so is every offer of a key
  // that pass had.
  const OffersBasis basis{cluster_.capacity_version(), counts_.version(), cluster_.backlog()};
  const bool same_basis = last_offers_basis_ == basis;
  // Only an agent we invited can be a source: walk those (in id order, as
  // the peer table would be), each with its rows, found once and kept.
  if (slots_generation_ != invitations_.index_generation()) {
    slots_.clear();
    for (const auto& [id, issued] : invitations_.invitees()) slots_.push_back({&id, &issued});
    slots_generation_ = invitations_.index_generation();
  }
  for (Slot& source : slots_) {
    const std::string& id = *source.id;
    std::vector<const crypto::Invitation*>& invitations = valid_scratch_;
    InvitationBook::valid(*source.issued, now, invitations);
    if (invitations.empty()) continue;  // not a source of ours now
    if (!source.peer) source.peer = peers_.find(id);
    const PeerTable::Peer* peer = source.peer;
    if (!peer) continue;  // not known as a peer (yet): nothing to address
    if (!facts) {
      protocol::ClusterFacts fresh = cluster_facts();
      facts = last_facts_ && *last_facts_ == fresh
                  ? last_facts_
                  : std::make_shared<const protocol::ClusterFacts>(std::move(fresh));
    }
    if (!source.row) source.row = &rows_[id];
    if (!source.held) source.held = &held_(id);
    Row& row = *source.row;
    OfferKey key = offer_key(row, *source.held, invitations);
    auto [slot, computing] = offers.try_emplace(key);
    if (computing) {
      auto previous = last_offers_.find(key);
      std::vector<protocol::NamespaceCapacity> computed;
      if (!same_basis || previous == last_offers_.end()) computed = compute_offer(key);
      if (previous != last_offers_.end() && (same_basis || *previous->second == computed)) {
        slot->second = previous->second;
      } else {
        slot->second = std::make_shared<const std::vector<protocol::NamespaceCapacity>>(
            std::move(computed));
      }
    }
    const Offer& capacity = slot->second;
    Row& last = row;
    bool same_facts = last.facts == facts;
    bool changed = !last.capacity || (last.capacity != capacity && *last.capacity != *capacity) ||
                   (!same_facts && (!last.facts || facts->allocatable != last.facts->allocatable ||
                                    facts->counts != last.facts->counts));
    // Labels go again until the source has read an envelope that carried
    // them: the first CAPACITY to a peer often leaves on a connection that
    // is still being set up, and is lost.
    bool labels_read = last.labels_at && peer->read_until >= *last.labels_at;
    bool labels_changed = !same_facts && (!last.facts || facts->labels != last.facts->labels ||
                                          facts->claims != last.facts->claims);
    bool labels_due = !labels_read || labels_changed || now - *last.labels_at >= kLabelRefresh;
    bool due = !last.at || to == To::kEverySource || *last.at < due_before ||
               (to == To::kRoomFreed && last.refused);
    if (!due && !changed && !labels_due) continue;
    last.at = now;
    last.refused = false;
    last.capacity = capacity;
    last.facts = facts;
    if (labels_due) {
      // Until one is read, the first send of these labels is the mark: a
      // read of any later envelope reads past it.
      if (labels_read || labels_changed || !last.labels_at) last.labels_at = now;
    }
    auto [message, building] = encoded.try_emplace({capacity.get(), facts.get(), labels_due});
    if (building) {
      protocol::ClusterFacts sent = *facts;
      if (!labels_due) {
        sent.labels.reset();  // as last sent: not on every heartbeat
        sent.claims.reset();
      }
      message->second.body = protocol::Capacity{*capacity, std::move(sent)};
      message->second.bytes = protocol::encode_body(message->second.body);
    }
    context_.send(id, message->second.body, message->second.bytes);
  }
  last_offers_ = std::move(offers);
  last_offers_basis_ = basis;
  if (facts) last_facts_ = std::move(facts);
}

void Advertiser::greet(const std::string& source) {
  Row& last = rows_[source];
  last.at.reset();
  last.labels_at.reset();  // a new boot knows none of our labels
  advertise(To::kChanged);
}

}  // namespace shoal::core::target
