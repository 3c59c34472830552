// What the target tells each source it invited of its room: a CAPACITY
// with aggregates only (never nodes or pods) for the namespaces the
// source is invited into, each capped by what its invitation still allows
// it here, and the cluster's facts (labels and claims as disclosed,
// allocatable, counts).
//
// Contract: a source hears a CAPACITY when its numbers (or facts) changed
// since the last one it was sent; when room was freed after it was
// refused a CANDIDATE; at start and at its first HELLO of a boot; at a
// heartbeat pass when it had none in the last three passes; and with its
// labels again until it has read an envelope that carried them (and once
// a minute regardless). Offers are computed once per pass for every
// source that shares them, and reused while what they are computed from
// stays the same.
//
// Invariant: each slot's cached rows are the rows of its source id.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "agent/core/context.h"
#include "agent/core/invitation_book.h"
#include "agent/core/peer_table.h"
#include "agent/core/target/routing_counts.h"

namespace shoal::core::target {

class Advertiser {
 public:
  // What `source` holds here now, from a row that lives as long as the
  // agent (a reference to it is kept).
  using HeldRow = std::function<const InvitationUsage&(const std::string& source)>;

  Advertiser(Context& context, PeerTable& peers, const InvitationBook& invitations,
             const RoutingCounts& counts, HeldRow held);

  // Who hears our CAPACITY now (sources read it only from a CAPACITY,
  // however many other envelopes they get), besides the sources due:
  enum class To {
    kEverySource,  // all of them (at start)
    kRoomFreed,    // changed numbers, or refused a CANDIDATE since: it may fit now
    kChanged,      // numbers (or labels) changed since its last CAPACITY
  };
  // Due: every source that had none since `due_before`.
  void advertise(To to, TimePoint due_before = {});
  // A heartbeat pass (every half interval) happened at `previous_pass`:
  // returns the time before which a source's last CAPACITY makes it due,
  // the pass three back, so each hears one at least every other interval.
  TimePoint note_pass(TimePoint previous_pass);
  // A source's first HELLO of a boot: it knows none of our labels, and
  // hears our capacity now rather than at the next heartbeat.
  void greet(const std::string& source);
  // We refused `source` a CANDIDATE its view said fits: it hears of the
  // next room freed even when our numbers are back where they were.
  void note_refused(const std::string& source) { rows_[source].refused = true; }

  // Our own work's counts, as a source of ours would read them: the
  // namespace's (with its queues' workloads) and the whole cluster's.
  protocol::Capacity own_counts(const std::string& namespace_name) const;

  std::string broken_invariant() const;

 private:
  // What one source is told of our namespaces: aggregates per namespace it
  // is invited into, capped by its invitation's allowance. Sources with the
  // same namespaces and allowance share one (OfferKey).
  using Offer = std::shared_ptr<const std::vector<protocol::NamespaceCapacity>>;
  // (sorted namespaces, allowance cpu, memory, gpu). The namespaces are an
  // interned list (namespace_lists_), so keys compare by pointer.
  using NamespaceList = std::vector<std::string>;
  using OfferKey = std::tuple<const NamespaceList*, int64_t, int64_t, int64_t>;
  // The cluster's facts as one pass computed them, shared by every source
  // told them (compared by pointer while they stay the same).
  using Facts = std::shared_ptr<const protocol::ClusterFacts>;
  // Labels and claims go out again this often even unchanged, in case the
  // CAPACITY that carried them was lost with a connection.
  static constexpr Duration kLabelRefresh = std::chrono::minutes(1);

  // What we last told one source, and what its invitations let it see.
  struct Row {
    std::optional<TimePoint> at;
    Offer capacity;
    Facts facts;  // as last sent (labels and claims too); null before the first
    // When these labels and claims first went out unread (then the last
    // time they were re-sent after being read); sent again until the source
    // acknowledges an envelope at or after it.
    std::optional<TimePoint> labels_at;
    bool refused = false;  // note_refused since its last CAPACITY
    // Its valid invitations, kept while they stay the same ones (an
    // invitation's terms never change; they are never erased, so the
    // pointers are stable): the union of their namespaces, interned, and
    // the limits of the last.
    std::vector<const crypto::Invitation*> invited_under;
    const NamespaceList* namespaces = nullptr;
    const crypto::InvitationLimits* limits = nullptr;
  };
  // Every agent we invited, in the book's order, with its peer row, our
  // row and its held row, found once: all live as long as the agent (no
  // index entry or row is ever erased), so a pass walks this list instead
  // of three trees per source. Rebuilt when the book's index grows.
  struct Slot {
    const TextKey* id = nullptr;
    const std::vector<const InvitationBook::Owned*>* issued = nullptr;
    const PeerTable::Peer* peer = nullptr;
    Row* row = nullptr;
    const InvitationUsage* held = nullptr;
  };
  // What the cached offers were computed from besides their keys: the
  // cluster's capacity version, the routing counts' version, the backlog.
  using OffersBasis = std::tuple<uint64_t, uint64_t, int64_t>;

  // Labels, claims (as config.disclose allows), allocatable and, if
  // disclosed, cluster-wide counts.
  protocol::ClusterFacts cluster_facts() const;
  // The key of what `row`'s valid invitations let it be told; notes them in the row.
  OfferKey offer_key(Row& row, const InvitationUsage& held,
                     const std::vector<const crypto::Invitation*>& invitations);
  std::vector<protocol::NamespaceCapacity> compute_offer(const OfferKey& key) const;

  Context& context_;
  PeerTable& peers_;
  const InvitationBook& invitations_;
  const RoutingCounts& counts_;
  HeldRow held_;
  cluster::Cluster& cluster_;

  TextMap<Row> rows_;  // by source id; never erased
  // Every distinct list of namespaces some source was offered, so that
  // equal lists are one object (never erased: there are a handful).
  std::set<NamespaceList> namespace_lists_;
  std::vector<const crypto::Invitation*> valid_scratch_;  // one source's valid invitations
  std::vector<Slot> slots_;
  uint64_t slots_generation_ = 0;  // the book's index generation they list
  // The offers of the last pass, by key: while the basis stays the same,
  // an offer of a key it had is that offer again (not recomputed).
  std::map<OfferKey, Offer> last_offers_;
  std::optional<OffersBasis> last_offers_basis_;
  Facts last_facts_;  // of the last pass that computed them
  // The last three heartbeat passes, oldest first.
  std::array<TimePoint, 3> recent_passes_{};
};

}  // namespace shoal::core::target
