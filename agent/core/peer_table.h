// The agents this one knows: who each is and where it listens, how far its
// messages have come (replay marks), how far it has read ours (flow
// control), when it was last heard, and, as its target, the lease it holds
// on its work here.
//
// Contract: rows reach the store through flush(), which the agent calls once
// per batch (Agent::finish_batch) and at the end of each control request.
// So an accepted message costs no disk write of its own, and
// the replay marks are durable with the batch that acted on the message: a
// message captured before either side restarts stays a replay afterwards.
#pragma once

#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "agent/core/invitation_book.h"
#include "common/status.h"
#include "common/text_key.h"
#include "common/time.h"
#include "crypto/identity.h"
#include "protocol/messages.h"
#include "store/store.h"

namespace shoal::core {

class PeerTable {
 public:
  struct Peer {
    // The id read as a public key, once, when the row is made (what every
    // envelope to the peer is addressed to); nullopt if the id is no key.
    std::optional<crypto::PublicKey> key;
    std::string cluster, org, endpoint;
    uint64_t last_boot = 0;  // the newest (boot, seq) accepted from it
    uint64_t last_seq = 0;
    // Bit i: seq last_seq - i of last_boot was accepted. An envelope that
    // arrives late (messages of an old and a new connection interleave after
    // a redial) is still taken within kReplayWindow; everything older is a
    // replay. Not stored: after a restart every seq up to last_seq counts as
    // seen.
    uint64_t seen = ~uint64_t{0};
    // The sent_at of the newest envelope of last_boot we accepted: our
    // acknowledgement to it (what of its traffic we have read).
    int64_t newest_sent_at_ms = 0;
    // Flow control, in memory: how far it has read our traffic of this boot
    // (by our send times), and when that last moved.
    TimePoint read_until{};
    TimePoint read_progress_at{};
    std::optional<TimePoint> last_seen;
    // When we last queued a message to it, which leaves with that step's
    // batch (memory only): a heartbeat goes only to a peer that would
    // otherwise not hear from us for a whole interval (Router::send_heartbeats).
    TimePoint last_sent_to{};
    uint64_t greeted_boot = 0;  // the peer boot whose HELLO we answered: one answer per boot
    bool unsaved = false;       // listed in unsaved_: its row goes to the store at flush()
    // As its target: the lease it asked for (0: it does not fence), and when
    // the lease ends (wall-clock ms, by the peer's send times).
    int64_t lease_ms = 0;
    int64_t lease_until_ms = 0;
    // When the operator forgot it (wall-clock ms; 0: not forgotten).
    int64_t forgotten_at_ms = 0;
    uint32_t lease_slot = UINT32_MAX;  // its entry in leases(), once it had a lease
    // Its invitations on record, as the book's index stood at generation
    // `invitations_generation` (0: never looked up): every envelope asks,
    // and two tree walks per envelope were 4 % of a large simulation. The
    // Agent keeps it (Router::invitations_of); memory only.
    InvitationBook::OnRecord invitations;
    uint64_t invitations_generation = 0;
    // Its last CAPACITY body as received, and decoded: a target sends the
    // same offer again at every refresh, and decoding each copy anew was
    // a tenth of a large simulation's instructions. A body is a function
    // of its bytes alone, so equal bytes take the decoded one
    // (Router::handle_message). Memory only.
    std::vector<uint8_t> capacity_bytes;
    std::shared_ptr<const protocol::Body> capacity;
  };

  // `self_id` and `self_cluster` name this agent (cluster_name_of).
  PeerTable(std::string self_id, std::string self_cluster);
  // unsaved_ holds iterators into the rows: a copy's would point into these.
  PeerTable(const PeerTable&) = delete;
  PeerTable& operator=(const PeerTable&) = delete;

  void load(const std::vector<store::PeerRecord>& records);

  // A handle on one peer's row, stable for the table's life (rows are never
  // erased): what an envelope's checks and marks share, one lookup for all.
  using Row = TextMap<Peer>::iterator;
  std::optional<Row> find_row(const std::string& id);
  // The same by public key, without spelling it as text: how an envelope's
  // sender is found (a hash probe rather than base64 and a tree walk, on
  // every envelope). Finds the row whose id is the key's text.
  std::optional<Row> find_row(const crypto::PublicKey& key);

  const Peer* find(const std::string& id) const;
  // A message to `id` is queued at `now`: records the time and returns the
  // peer (nullptr for a stranger or a forgotten peer: nothing goes to it),
  // in one lookup. Not a row change.
  const Peer* note_sending(const std::string& id, TimePoint now);
  bool contains(const std::string& id) const { return peers_.count(id) > 0; }
  const TextMap<Peer>& all() const { return peers_; }
  // Whether an id of all() is ours, mostly without reading its text.
  bool is_self(const TextKey& id) const {
    return id.prefix() == self_prefix_ && id.text() == self_id_;
  }

  // Records who `id` is and where it listens (an id card, an invitation, or
  // its own signed HELLO). Returns whether anything changed.
  bool remember(const std::string& id, const std::string& cluster, const std::string& org,
                const std::string& endpoint);
  bool remember(Row row, const std::string& cluster, const std::string& org,
                const std::string& endpoint);
  // How many sequence numbers below the newest an envelope may arrive late.
  static constexpr uint64_t kReplayWindow = 64;
  // Whether an envelope (boot, seq) from `id` was never accepted: newer than
  // every one, or late within kReplayWindow and not seen.
  bool is_fresh(const std::string& id, uint64_t boot, uint64_t seq) const;
  static bool is_fresh(const Peer& peer, uint64_t boot, uint64_t seq);
  // An envelope from `id` passed every check: advance its replay marks.
  // Returns the silence it ends (silent_for just before).
  Duration accept(const std::string& id, uint64_t boot, uint64_t seq, int64_t sent_at_ms,
                  TimePoint now);
  Duration accept(Row row, uint64_t boot, uint64_t seq, int64_t sent_at_ms, TimePoint now);
  // `id` acknowledged reading our traffic of `acked_boot` up to the envelope
  // we sent at `acked_sent_at_ms`; ignored unless `acked_boot` is ours.
  void note_read(const std::string& id, uint64_t acked_boot, int64_t acked_sent_at_ms,
                 uint64_t own_boot, TimePoint now);
  static void note_read(Peer& peer, uint64_t acked_boot, int64_t acked_sent_at_ms,
                        uint64_t own_boot, TimePoint now);
  // Flow control: until when a resend of what we sent `id` at `last_sent`
  // is held back (TimePoint{} for not at all). Held while the peer has not
  // read that far yet but keeps reading what we sent before: it waits its
  // turn in the peer's backlog, and a copy would only lengthen it. Released
  // once the peer reads past it, or `stall` after its last progress.
  TimePoint hold_resend_until(const std::string& id, TimePoint last_sent, Duration stall) const;
  // Marks the peer's current boot as greeted; true if it had not been.
  static bool greet(Peer& peer);

  void set_lease(const std::string& id, int64_t lease_ms, int64_t lease_until_ms);
  // When the lease of `id` ends; none when it does not fence (or is us).
  std::optional<TimePoint> lease_end_of(const std::string& id) const;
  // The same for an entry of all(), without looking it up again (nor
  // reading its id's text unless it may be ours: a target asks this of
  // every peer at every tick).
  std::optional<TimePoint> lease_end_of(const TextKey& id, const Peer& peer) const;
  // Every lease that fences, side by side, so that a target's tick finds
  // the next lease end without walking every row: one entry per peer that
  // ever had a lease (not us), with its end as lease_end_of says (ms), or
  // INT64_MAX while it has none.
  struct Lease {
    int64_t until_ms = INT64_MAX;
    Row row;
  };
  const std::vector<Lease>& leases() const { return leases_; }

  // The loop ticks every few milliseconds; a gap longer than `heartbeat`
  // means this process was stopped or starved, and what peers sent
  // meanwhile may still sit unread: their silence then counts from `now`.
  // Returns the gap when there was one.
  std::optional<Duration> notice_tick(TimePoint now, Duration heartbeat);
  void start_listening(TimePoint now) { listening_since_ = now; }
  // How long `id` has been silent while we listened.
  Duration silent_for(const std::string& id, TimePoint now) const;

  // `shoalctl peer forget`: from `now` on the peer is neither listed nor
  // sent to (note_sending), and the router drops what it sends. Returns
  // false for an unknown peer, ourselves, or one already forgotten.
  bool forget(const std::string& id, TimePoint now);
  // A new invitation either way makes it a peer again; false if it was not
  // forgotten.
  bool unforget(const std::string& id);
  static bool is_forgotten(const Peer& peer) { return peer.forgotten_at_ms != 0; }
  // When `id` was forgotten; none while it is not (or unknown).
  std::optional<TimePoint> forgotten_at(const std::string& id) const;

  // The peer's cluster name (ours for self); a key prefix for a stranger.
  std::string cluster_name_of(const std::string& id) const;

  // Writes every row changed since the last flush.
  Status flush(store::Store& store);

  // Every row waiting for flush() belongs to a known peer.
  // "" while every invariant holds, else the first broken one.
  std::string broken_invariant() const;

 private:
  // The row of `id`, made if new.
  Row make_row(const std::string& id);
  Peer& at(const std::string& id) { return make_row(id)->second; }
  // The row is written at the next flush (once, however often it changed).
  void note_unsaved(Row row);
  // Brings the row's entry in leases_ up to its lease (after any change).
  void index_lease(Row row);

  std::string self_id_;
  uint64_t self_prefix_ = 0;  // TextKey::prefix_of(self_id_)
  std::string self_cluster_;
  TextMap<Peer> peers_;  // by peer id
  // The rows whose id is a public key's text (crypto::key_to_text), by that
  // key. Ids are made by us (cards, invitations, the store), never by a
  // sender, so the keys cannot be chosen to collide.
  struct KeyHash {
    size_t operator()(const crypto::PublicKey& key) const {
      uint64_t words[4];
      std::memcpy(words, key.data(), sizeof(words));
      return words[0] ^ words[1] ^ words[2] ^ words[3];
    }
  };
  std::unordered_map<crypto::PublicKey, Row, KeyHash> rows_by_key_;
  std::vector<Row> unsaved_;  // rows that differ from the store's (Peer::unsaved)
  std::vector<Lease> leases_;
  // Since when we have listened without a break (start, or the end of a
  // pause): a peer's silence is counted from here at the earliest.
  TimePoint listening_since_{};
  TimePoint last_tick_{};
};

}  // namespace shoal::core
