// The agents this one knows: who each is and where it listens, how far its
// messages have come (replay marks), when it was last heard, and, as its
// target, the lease it holds on its work here.
//
// Contract: rows reach the store through flush(), which the agent calls once
// per batch (Agent::finish_batch) and at the end of each control request.
// So an accepted message costs no disk write of its own (DESIGN.md §4), and
// the replay marks are durable with the batch that acted on the message: a
// message captured before either side restarts stays a replay afterwards.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/time.h"
#include "store/store.h"

namespace shoal::core {

class PeerTable {
 public:
  struct Peer {
    std::string cluster, org, endpoint;
    uint64_t last_boot = 0;  // the newest (boot, seq) accepted from it: older ones are replays
    uint64_t last_seq = 0;
    std::optional<TimePoint> last_seen;
    uint64_t greeted_boot = 0;  // the peer boot whose HELLO we answered: one answer per boot
    // As its target: the lease it asked for (0: it does not fence), and when
    // the lease ends (wall-clock ms, by the peer's send times).
    int64_t lease_ms = 0;
    int64_t lease_until_ms = 0;
  };

  // `self_id` and `self_cluster` name this agent (cluster_name_of).
  PeerTable(std::string self_id, std::string self_cluster);

  void load(const std::vector<store::PeerRecord>& records);

  const Peer* find(const std::string& id) const;
  bool contains(const std::string& id) const { return peers_.count(id) > 0; }
  const std::map<std::string, Peer>& all() const { return peers_; }

  // Records who `id` is and where it listens (an id card, an invitation, or
  // its own signed HELLO). Returns whether anything changed.
  bool remember(const std::string& id, const std::string& cluster, const std::string& org,
                const std::string& endpoint);
  // Whether a message (boot, seq) from `id` is newer than every one accepted.
  bool is_fresh(const std::string& id, uint64_t boot, uint64_t seq) const;
  // A message from `id` passed every check: advance its replay marks.
  void accept(const std::string& id, uint64_t boot, uint64_t seq, TimePoint now);
  // Marks the peer's current boot as greeted; true if it had not been.
  bool greet(const std::string& id);

  void set_lease(const std::string& id, int64_t lease_ms, int64_t lease_until_ms);
  // When the lease of `id` ends; none when it does not fence (or is us).
  std::optional<TimePoint> lease_end_of(const std::string& id) const;

  // The loop ticks every few milliseconds; a gap longer than `heartbeat`
  // means this process was stopped or starved, and what peers sent
  // meanwhile may still sit unread: their silence then counts from `now`.
  // Returns the gap when there was one.
  std::optional<Duration> notice_tick(TimePoint now, Duration heartbeat);
  void start_listening(TimePoint now) { listening_since_ = now; }
  // How long `id` has been silent while we listened.
  Duration silent_for(const std::string& id, TimePoint now) const;

  // The peer's cluster name (ours for self); a key prefix for a stranger.
  std::string cluster_name_of(const std::string& id) const;

  // Writes every row changed since the last flush.
  Status flush(store::Store& store);

  // Every row waiting for flush() belongs to a known peer.
  bool check_invariants() const;

 private:
  Peer& at(const std::string& id) { return peers_[id]; }

  std::string self_id_;
  std::string self_cluster_;
  std::map<std::string, Peer> peers_;
  std::set<std::string> unsaved_;  // ids whose row differs from the store's
  // Since when we have listened without a break (start, or the end of a
  // pause): a peer's silence is counted from here at the earliest.
  TimePoint listening_since_{};
  TimePoint last_tick_{};
};

}  // namespace shoal::core
