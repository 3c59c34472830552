// What the source role knows of each target it may place on: what the
// target advertised (room by namespace and queue, its cluster's facts),
// when this source last renewed its lease (DIGEST), and this source's own
// workloads headed or bound there that the target's last CAPACITY does not
// count yet — so a burst of submissions sees what it already sent.
//
// Invariant (broken_invariant): no count of ours is below zero; a target
// with nothing unadvertised holds no room for it either.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/core/source/workload.h"
#include "common/text_key.h"
#include "common/time.h"
#include "model/placement_spec.h"
#include "model/workload.h"
#include "protocol/messages.h"

namespace shoal::core::source {

class TargetLedger {
 public:
  struct Target {
    std::map<std::string, protocol::NamespaceCapacity> capacity;  // advertised, by namespace
    protocol::ClusterFacts facts;  // advertised; labels and claims as last sent
    bool heard_facts = false;      // from an agent that sends them at all
    TimePoint last_digest_sent{};  // our last DIGEST (lease renewal) to it
    // A HOLDINGS answered a DIGEST of ours since we last greeted it: it
    // knows our lease, so it fences what it binds for us.
    bool knows_our_lease = false;
    TimePoint last_digest_ahead{};  // the last DIGEST sent ahead of what binds (send_binding)
    // Our own workloads headed or bound there that its last CAPACITY does
    // not count yet (SourceWorkload::expected_at): what they hold, counted
    // cluster-wide, per namespace and per (namespace, queue).
    model::UsageCounts unadvertised;
    std::map<std::string, model::UsageCounts> unadvertised_by_namespace;
    std::map<std::pair<std::string, std::string>, int64_t> unadvertised_by_queue;
    model::Resources unadvertised_room;  // taken from its advertised free room
    std::vector<std::string> acknowledged;  // uids BOUND since its last CAPACITY
    // Our unfinished workloads there or headed there (Balance): their
    // winner, or, still placing, their first-ranked target.
    int64_t ours = 0;
  };

  // What we know of `peer`: null when nothing yet.
  const Target* find(const std::string& peer) const;

  // A CAPACITY from `peer`: its room and facts (labels and claims left out
  // mean "as last sent"). Returns the uids it said BOUND to before it, which
  // this CAPACITY now counts itself.
  std::vector<std::string> advertised(const std::string& peer, const protocol::Capacity& message);
  // `peer` said BOUND to our workload `uid`: its next CAPACITY counts it.
  void acknowledge(const std::string& peer, const std::string& uid);
  // Its room is no longer ours to place on (an invitation revoked).
  void forget_capacity(const std::string& peer);
  std::vector<protocol::NamespaceCapacity> capacity_of(const std::string& peer) const;

  // Our workload of `spec` now counts as headed there (+1) or no longer
  // (-1) until the target's CAPACITY counts it.
  void expect(const std::string& peer, const model::WorkloadSpec& spec, int64_t sign);
  // One more (or fewer) of our unfinished workloads there or headed there.
  void count_ours(const std::string& peer, int64_t delta) { targets_[peer].ours += delta; }
  // Counts `workload` at `peer_id` until that target's CAPACITY does ("":
  // nowhere), so that a burst of submissions sees what it already sent.
  void expect_at(SourceWorkload& workload, const std::string& peer_id);
  // Keeps the workload's expected_at and counted_at (and so Target::ours)
  // in step with its record: what SourceRole::persist calls.
  void follow(SourceWorkload& workload);

  // Lease renewals: when the last DIGEST went ({} never, or forgotten so
  // the next one is due at once).
  TimePoint last_digest_sent(const std::string& peer) const;
  void digest_sent(const std::string& peer, TimePoint at) { targets_[peer].last_digest_sent = at; }
  bool knows_our_lease(const std::string& peer) const {
    const Target* target = find(peer);
    return target && target->knows_our_lease;
  }
  void heard_holdings(const std::string& peer) { targets_[peer].knows_our_lease = true; }
  TimePoint last_digest_ahead(const std::string& peer) const {
    const Target* target = find(peer);
    return target ? target->last_digest_ahead : TimePoint{};
  }
  void digest_ahead_sent(const std::string& peer, TimePoint at) {
    targets_[peer].last_digest_ahead = at;
  }
  // A new boot of the target greeted us: its next DIGEST is due at once,
  // and until its HOLDINGS says so it may not know our lease.
  void greeted(const std::string& peer) {
    Target& target = targets_[peer];
    target.last_digest_sent = TimePoint{};
    target.knows_our_lease = false;
    target.last_digest_ahead = TimePoint{};
  }

  std::string broken_invariant() const;

 private:
  TextMap<Target> targets_;  // by peer id
};

// The room a target advertised for a workload of `queue` in one namespace:
// the queue's own numbers when the target lists queues, the namespace's
// otherwise; nullopt when it lists queues but not this one.
inline std::optional<std::pair<model::Resources, model::Resources>> advertised_room(
    const protocol::NamespaceCapacity& advertised, const std::string& queue) {
  if (advertised.queues.empty()) {
    return std::make_pair(advertised.free, advertised.largest_free_node);
  }
  for (const auto& q : advertised.queues) {
    if (q.queue == queue) return std::make_pair(q.free, q.largest_free_node);
  }
  return std::nullopt;
}

}  // namespace shoal::core::source
