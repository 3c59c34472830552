// The invitations this agent issued (it is the target: a source may use its
// cluster) and accepted (it is the source: it may place at the issuer), with
// their stored records, indexed by the other agent so that each question a
// message raises ("may this peer send that?") costs a lookup, not a scan.
//
// Contract: it changes only through add() and revoke(), which write the
// records through the store they are given; the caller tells people (events).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "agent/core/views.h"
#include "common/status.h"
#include "common/text_key.h"
#include "common/time.h"
#include "crypto/invitation.h"
#include "store/store.h"

namespace shoal::core {

class InvitationBook {
 public:
  struct Owned {
    crypto::Invitation invitation;
    store::InvitationRecord record;
  };

  // Opens every stored token (its signature checked once, here, by `signatures`).
  Status load(const std::vector<store::InvitationRecord>& records,
              const crypto::SignatureScheme& signatures);

  const std::map<std::string, Owned>& issued() const { return issued_; }
  const std::map<std::string, Owned>& accepted() const { return accepted_; }
  const Owned* find_issued(const std::string& id) const;
  const Owned* find_accepted(const std::string& id) const;

  // Stores a new invitation. One relationship per pair of agents: an issued
  // one replaces every earlier one to the same source; an accepted one
  // replaces those of the same issuer that it is newer than. Returns the ids
  // it replaced.
  Result<std::vector<std::string>> add(Owned owned, store::Store& store);
  // Marks one revoked (false when it already was).
  Result<bool> revoke(store::InvitationDirection direction, const std::string& id,
                      store::Store& store);

  static InvitationState state(const Owned& owned, TimePoint now);

  // Valid now (active), by the other agent.
  std::vector<const crypto::Invitation*> valid_issued(const std::string& peer, TimePoint now) const;
  std::vector<const crypto::Invitation*> valid_accepted(const std::string& peer,
                                                        TimePoint now) const;
  // We invited `peer` (it may send us work) / it invited us (we may send it work).
  bool is_source(const std::string& peer, TimePoint now) const;
  bool is_target(const std::string& peer, TimePoint now) const;
  // One peer's invitations on record, each way (null: none), found once
  // for every question about one envelope's sender. Any invitation on
  // record, valid or not, is enough to hear about work already in flight
  // (CANCEL, STATUS, ...), never to start new work. The pointers stay
  // valid while the book lives: index entries are never erased.
  struct OnRecord {
    const std::vector<const Owned*>* issued = nullptr;    // we invited it
    const std::vector<const Owned*>* accepted = nullptr;  // it invited us
    bool ever_issued() const { return issued != nullptr; }
    bool ever_accepted() const { return accepted != nullptr; }
  };
  OnRecord on_record(const std::string& peer) const;
  // Grows whenever a peer gets its first invitation either way (a new
  // index entry), and only then: an OnRecord found at one generation is
  // still the whole truth while the generation stays the same (entries
  // are never erased, and later invitations of a peer join its entry).
  uint64_t index_generation() const { return index_generation_; }
  // Whether any of `rows` (an OnRecord side) is valid now.
  static bool any_valid(const std::vector<const Owned*>* rows, TimePoint now);
  // Every invitation with `peer`, in any state.
  std::vector<const Owned*> issued_to(const std::string& peer) const;
  std::vector<const Owned*> accepted_from(const std::string& peer) const;
  // Every agent that ever invited us: the keys of this index (peer id ->
  // the invitations it issued us). A reference, no copy: the source walks it
  // for every deadline.
  using Index = TextMap<std::vector<const Owned*>>;
  const Index& issuers() const { return accepted_by_peer_; }
  // Every agent we ever invited, the same way: what the target walks to
  // advertise (only these can be sources).
  const Index& invitees() const { return issued_by_peer_; }
  // Those of `rows` (an index entry) that are valid now.
  static std::vector<const crypto::Invitation*> valid(const std::vector<const Owned*>& rows,
                                                      TimePoint now);
  // The same into `out` (cleared first), which keeps its room between calls.
  static void valid(const std::vector<const Owned*>& rows, TimePoint now,
                    std::vector<const crypto::Invitation*>& out);
  // Invitations we issued to `peer` and revoked that it could still present
  // (not expired): it must hear of them.
  std::vector<std::string> revocations_to_tell(const std::string& peer, TimePoint now) const;
  // The same, of `issued` (the peer's OnRecord::issued).
  static std::vector<std::string> revocations_to_tell(const std::vector<const Owned*>* issued,
                                                      TimePoint now);

  // The indexes match the tables, and each source has at most one issued
  // invitation that is neither replaced nor revoked.
  // "" while every invariant holds, else the first broken one.
  std::string broken_invariant() const;

 private:
  static std::vector<const crypto::Invitation*> valid(const Index& index, const std::string& peer,
                                                      TimePoint now);
  static bool any_valid(const Index& index, const std::string& peer, TimePoint now);
  static std::vector<const Owned*> all_with(const Index& index, const std::string& peer);
  void insert(Owned owned);

  std::map<std::string, Owned> issued_;    // by invitation id
  std::map<std::string, Owned> accepted_;  // by invitation id
  // By the other agent: its rows in the tables above, which never move
  // (std::map nodes; rows are never erased), so a question by peer costs
  // one lookup.
  Index issued_by_peer_;
  Index accepted_by_peer_;
  uint64_t index_generation_ = 1;
};

}  // namespace shoal::core
