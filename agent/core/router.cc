// The router: start-up, the wire (decode, trust, replay, permission),
// dispatch to the parts, the tick's order and the step's effects. HELLO,
// REVOKE and heartbeats are in router_peers.cc, operators' requests in
// operations.cc; the parts live in peer_table, invitation_book, source/
// and target/.
#include "agent/core/router.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "common/check.h"

namespace shoal::core {

using protocol::DropReason;
using protocol::MessageType;

std::unique_ptr<Agent> make_agent(AgentConfig config, crypto::Identity identity,
                                  const Clock& clock, Transport& transport, store::Store& store,
                                  cluster::Cluster& cluster, Rng& rng,
                                  std::shared_ptr<spdlog::logger> logger,
                                  const crypto::SignatureScheme& signatures) {
  return std::make_unique<Router>(std::move(config), std::move(identity), clock, transport, store,
                                  cluster, rng, std::move(logger), signatures);
}

Router::Router(AgentConfig config, crypto::Identity identity, const Clock& clock,
               Transport& transport, store::Store& store, cluster::Cluster& cluster, Rng& rng,
               std::shared_ptr<spdlog::logger> logger, const crypto::SignatureScheme& signatures)
    : peers_(crypto::key_to_text(identity.public_key()), config.cluster),
      context_(std::move(config), std::move(identity), clock, transport, store, cluster, rng,
               std::move(logger), peers_, signatures),
      target_(context_, peers_, invitations_),
      source_(context_, peers_, invitations_,
              [this](const std::string& ns) { return target_.advertiser().own_counts(ns); }) {}

Router::~Router() = default;

Status Router::start() {
  SHOAL_ASSIGN_OR_RETURN(uint64_t boot, context_.store().next_boot());
  context_.set_boot(boot);
  SHOAL_RETURN_IF_ERROR(load());
  context_.record_event("agent", "started, boot " + std::to_string(boot));
  last_heartbeat_ = context_.now();
  send_heartbeats(/*silent_since=*/TimePoint::max());  // every peer
  target_.advertiser().advertise(target::Advertiser::To::kEverySource);
  drain_local();
  return finish_batch();
}

Status Router::load() {
  store::Store& store = context_.store();
  SHOAL_ASSIGN_OR_RETURN(auto peer_records, store.load_peers());
  peers_.load(peer_records);
  SHOAL_ASSIGN_OR_RETURN(auto invitation_records, store.load_invitations());
  SHOAL_RETURN_IF_ERROR(invitations_.load(invitation_records, context_.signatures()));
  // Peers not heard from since count as silent from here.
  peers_.start_listening(context_.now());
  SHOAL_ASSIGN_OR_RETURN(auto quotas, store.load_quotas());
  source_.load_quotas(std::move(quotas));
  SHOAL_ASSIGN_OR_RETURN(auto workload_records, store.load_workloads());
  source_.load(std::move(workload_records));
  SHOAL_ASSIGN_OR_RETURN(auto reservation_records, store.load_reservations());
  target_.restore(std::move(reservation_records));
  return Status::ok();
}

// ---- the wire ---------------------------------------------------------------

size_t Router::handle_wire(std::span<const uint8_t> wire) {
  DropReason reason;
  auto opened = protocol::open(wire, &reason, context_.signatures());
  if (!opened.is_ok()) {
    drop(reason, "", opened.status().message());
    return 0;
  }
  const protocol::Envelope& envelope = *opened;
  std::optional<PeerTable::Row> row = peers_.find_row(envelope.from);
  // A known sender's id is its row's key (stable: rows are never erased); a
  // stranger's is spelled for the drop.
  std::string stranger_id;
  if (!row) stranger_id = crypto::key_to_text(envelope.from);
  const std::string& from = row ? (*row)->first.text() : stranger_id;
  if (envelope.to != context_.identity().public_key()) {
    drop(DropReason::kWrongRecipient, from, "addressed to another agent");
    return 0;
  }
  InvitationBook::OnRecord on_record =
      row ? invitations_of(**row) : InvitationBook::OnRecord{};
  if (!on_record.ever_issued() && !on_record.ever_accepted()) {
    drop(DropReason::kUnknownSender, from, "no invitation with this key");
    return 0;
  }
  if (PeerTable::is_forgotten((*row)->second)) {
    drop(DropReason::kUnknownSender, from, "a peer the operator forgot");
    return 0;
  }
  const Sender sender{*row, on_record};
  TimePoint now = context_.now();
  TimePoint sent_at = from_millis(envelope.sent_at_ms);
  Duration window = context_.config().replay_window;
  if (sent_at + window < now || sent_at > now + window) {
    drop(DropReason::kStale, from, "sent at " + format_time(sent_at));
    return 0;
  }
  if (!PeerTable::is_fresh(sender.row->second, envelope.boot, envelope.seq)) {
    drop(DropReason::kReplayed, from,
         "boot " + std::to_string(envelope.boot) + " seq " + std::to_string(envelope.seq));
    return 0;
  }
  std::vector<protocol::BatchItem> batch;
  if (envelope.type == MessageType::kBatch) {
    auto items = protocol::decode_batch(envelope.body);
    if (!items.is_ok()) {
      drop(DropReason::kBadBody, from, items.status().message());
      return 0;
    }
    batch = std::move(items).value();
  }
  // Authentic and fresh: whatever its messages say, this (boot, seq) is
  // used. The mark is written with this batch (finish_batch), so a message
  // captured before either side restarts stays a replay afterwards.
  Duration silence =
      peers_.accept(sender.row, envelope.boot, envelope.seq, envelope.sent_at_ms, now);
  PeerTable::note_read(sender.row->second, envelope.acked_boot, envelope.acked_sent_at_ms,
                       context_.boot(), now);
  source_.heard_from(from, silence);
  context_.set_sent_at(sent_at);
  context_.set_envelope_order({envelope.boot, envelope.seq});
  ++context_.stats().envelopes_received;
  size_t handled = 0;
  if (envelope.type != MessageType::kBatch) {
    handled += handle_message(from, sender, static_cast<uint8_t>(envelope.type), envelope.body);
  }
  for (const protocol::BatchItem& item : batch) {
    handled += handle_message(from, sender, item.type, item.body);
  }
  drain_local();
  return handled;
}

const InvitationBook::OnRecord& Router::invitations_of(TextMap<PeerTable::Peer>::value_type& row) {
  PeerTable::Peer& peer = row.second;
  if (peer.invitations_generation != invitations_.index_generation()) {
    peer.invitations = invitations_.on_record(row.first.text());
    peer.invitations_generation = invitations_.index_generation();
  }
  return peer.invitations;
}

namespace {

// Who may say what. Starting or offering new work needs a valid invitation
// in that direction; hearing about work already in flight (and being told
// why a CANDIDATE is refused) needs only one on record, so revoked or
// expired work still winds down cleanly. (Validity is asked anew for each
// message: one before it in the batch may have been a REVOKE.)
bool permitted(MessageType type, const InvitationBook::OnRecord& on_record, TimePoint now) {
  switch (type) {
    case MessageType::kHello:
      return true;
    case MessageType::kApprove:
      return InvitationBook::any_valid(on_record.issued, now);
    case MessageType::kCandidate:
    case MessageType::kCancel:
    case MessageType::kDelete:
    case MessageType::kStatusAck:
    case MessageType::kDigest:
    case MessageType::kLogRequest:
    case MessageType::kPriority:
      return on_record.ever_issued();
    case MessageType::kCapacity:
    case MessageType::kReady:
      return InvitationBook::any_valid(on_record.accepted, now);
    case MessageType::kReject:
    case MessageType::kReleased:
    case MessageType::kBound:
    case MessageType::kStatus:
    case MessageType::kRevoke:
    case MessageType::kHoldings:
    case MessageType::kLogChunk:
      return on_record.ever_accepted();
    case MessageType::kBatch:
      return false;
  }
  return false;
}

}  // namespace

bool Router::handle_message(const std::string& from, const Sender& sender, uint8_t type_number,
                            std::span<const uint8_t> bytes) {
  if (type_number == 0 || type_number > protocol::kMaxMessageType ||
      type_number == static_cast<uint8_t>(MessageType::kBatch)) {
    drop(DropReason::kUnknownType, from,
         "message type " + std::to_string(type_number) + " inside a BATCH");
    return false;
  }
  auto type = static_cast<MessageType>(type_number);
  PeerTable::Peer& peer = sender.row->second;
  // A CAPACITY equal to the sender's last is that one's body (Peer::capacity);
  // held here, as a later message could replace it.
  std::shared_ptr<const protocol::Body> capacity;
  std::optional<protocol::Body> decoded_here;
  const protocol::Body* body = nullptr;
  if (type == MessageType::kCapacity && peer.capacity &&
      std::ranges::equal(bytes, peer.capacity_bytes)) {
    capacity = peer.capacity;
    body = capacity.get();
  } else {
    auto decoded = protocol::decode_body(type, bytes);
    if (!decoded.is_ok()) {
      drop(DropReason::kBadBody, from, decoded.status().message());
      return false;
    }
    if (type == MessageType::kCapacity) {
      capacity = std::make_shared<const protocol::Body>(std::move(decoded).value());
      peer.capacity = capacity;
      peer.capacity_bytes.assign(bytes.begin(), bytes.end());
      body = capacity.get();
    } else {
      body = &decoded_here.emplace(std::move(decoded).value());
    }
  }

  if (!permitted(type, sender.invitations, context_.now())) {
    drop(DropReason::kNotPermitted, from,
         std::string(protocol::message_type_name(type)) +
             " without a valid invitation in that direction");
    return false;
  }
  AgentStats& stats = context_.stats();
  ++stats.received;
  ++stats.received_by_type[type_number];
  dispatch(from, *body, &sender);
  return true;
}

void Router::dispatch(const std::string& from, const protocol::Body& body, const Sender* sender) {
  std::visit(
      [&](const auto& message) {
        using T = std::decay_t<decltype(message)>;
        if constexpr (std::is_same_v<T, protocol::Hello>) {
          // Only a peer's envelope says HELLO (never our own messages).
          if (sender) on_hello(from, *sender, message);
        }
        else if constexpr (std::is_same_v<T, protocol::Capacity>)
          source_.on_capacity(from, message);
        else if constexpr (std::is_same_v<T, protocol::Candidate>)
          target_.on_candidate(from, message);
        else if constexpr (std::is_same_v<T, protocol::Ready>)
          source_.on_ready(from, message);
        else if constexpr (std::is_same_v<T, protocol::Reject>)
          source_.on_reject(from, message);
        else if constexpr (std::is_same_v<T, protocol::Approve>)
          target_.on_approve(from, message);
        else if constexpr (std::is_same_v<T, protocol::Cancel>)
          target_.on_cancel(from, message);
        else if constexpr (std::is_same_v<T, protocol::Released>)
          source_.on_released(from, message);
        else if constexpr (std::is_same_v<T, protocol::Bound>)
          source_.on_bound(from, message);
        else if constexpr (std::is_same_v<T, protocol::WorkloadStatus>)
          source_.on_status(from, message);
        else if constexpr (std::is_same_v<T, protocol::StatusAck>)
          target_.on_status_ack(from, message);
        else if constexpr (std::is_same_v<T, protocol::Revoke>) on_revoke(from, message);
        else if constexpr (std::is_same_v<T, protocol::Delete>)
          target_.on_delete(from, message);
        else if constexpr (std::is_same_v<T, protocol::Digest>)
          target_.on_digest(from, message);
        else if constexpr (std::is_same_v<T, protocol::Holdings>)
          source_.on_holdings(from, message);
        else if constexpr (std::is_same_v<T, protocol::LogRequest>)
          target_.on_log_request(from, message);
        else if constexpr (std::is_same_v<T, protocol::LogChunk>)
          remote_logs_.on_chunk(from, message);
        else if constexpr (std::is_same_v<T, protocol::Priority>)
          target_.on_priority(from, message);
      },
      body);
}

void Router::drain_local() {
  // Self-addressed messages take the same code path as remote ones, in the
  // same batch; once none is left, the target serves its queue for the
  // candidates the step brought (which may answer ourselves again). Each
  // handler answers at most a bounded number of messages, so this ends
  // within a few messages per workload of the largest submit; past the
  // bound, a handler answers itself forever, and the agent stops rather
  // than spin.
  for (int budget = 10'000'000; budget > 0; --budget) {
    if (context_.has_local()) {
      protocol::Body body = context_.take_local();
      context_.set_sent_at(context_.now());
      context_.set_envelope_order({});
      dispatch(context_.self_id(), body, nullptr);
    } else if (!target_.serve_asked() && !source_.admit_waiting() && !source_.admit_within_quota()) {
      return;  // nothing left: the step is done
    }
  }
  SHOAL_CHECK(false, "a step kept producing work for itself past any bound a step can reach");
}

void Router::drop(DropReason reason, const std::string& peer, const std::string& detail) {
  ++context_.stats().dropped[static_cast<size_t>(reason)];
  spdlog::logger* logger = context_.logger();
  if (!logger) return;
  // At most one log line per peer per minute: a flood must not flood the log.
  TimePoint now = context_.now();
  std::string key = peer.empty() ? "?" : peer;
  auto last = last_drop_log_.find(key);
  if (last != last_drop_log_.end() && now - last->second < std::chrono::minutes(1)) return;
  last_drop_log_[key] = now;
  if (!peer.empty() && peers_.contains(peer)) {
    context_.record_event("peer/" + peer, std::string("refused a message: ") +
                                              std::string(protocol::drop_reason_name(reason)) +
                                              " (" + detail + ")");
  }
  logger->warn("dropped message from {}: {} ({})", key, protocol::drop_reason_name(reason), detail);
}

// ---- the step ---------------------------------------------------------------

void Router::tick() {
  TimePoint now = context_.now();
  last_tick_ = now;
  context_.take_due_deferred();
  const AgentConfig& config = context_.config();
  if (std::optional<Duration> gap = peers_.notice_tick(now, config.heartbeat_interval)) {
    // This process was stopped or starved: what peers sent meanwhile may
    // still sit unread, so a peer is never called lost for a silence we did
    // not listen to.
    if (spdlog::logger* logger = context_.logger()) {
      logger->warn("no tick for {}; peers' silence counts from now", format_duration(*gap));
    }
    source_.silences_restarted();
  }
  std::optional<TimePoint> previous_pass;
  if (now - last_heartbeat_ >= config.heartbeat_interval / 2) {
    previous_pass = last_heartbeat_;
    last_heartbeat_ = now;
  }
  bool room_freed = target_.tick(now, previous_pass);
  source_.tick(now, room_freed);
  // Last, so that what the roles sent in this tick (a CAPACITY, a DIGEST)
  // is the heartbeat of its link.
  if (previous_pass) send_heartbeats(*previous_pass);
  drain_local();
}

Status Router::finish_batch() {
  // The READYs this batch read compete by score (a winner's APPROVE, and
  // what the slot it frees starts, go out with the batch).
  while (source_.decide_readied()) drain_local();
  context_.seal_outgoing();
  context_.note_store(peers_.flush(context_.store()));
  return context_.store_health();
}

void Router::batch_committed() { target_.launch_bound(); }

TimePoint Router::next_deadline() {
  Duration heartbeat = context_.config().heartbeat_interval;
  TimePoint next = last_heartbeat_ + heartbeat / 2;  // the next heartbeat pass
  // A tick at least every half heartbeat, idle or not: a gap of a whole
  // heartbeat between ticks is how a pause of this process is told
  // (PeerTable::notice_tick), and a tick that is merely late must not look
  // like one — that would restart every peer's silence, and a lost winner
  // would never be replaced.
  next = std::min(next, last_tick_ + heartbeat / 2);
  next = std::min(next, target_.next_deadline());
  next = std::min(next, source_.next_deadline());
  next = std::min(next, context_.deferred_due());
  return next;
}

Status Router::end_control() {
  drain_local();
  return finish_batch();
}

std::string Router::broken_invariant() {
  for (auto [part, broken] : {std::pair{"peers", peers_.broken_invariant()},
                              std::pair{"invitations", invitations_.broken_invariant()},
                              std::pair{"target", target_.broken_invariant()},
                              std::pair{"source", source_.broken_invariant()}}) {
    if (!broken.empty()) return std::string(part) + ": " + broken;
  }
  return "";
}

std::string check_fencing_timers(const AgentConfig& config) {
  if (config.lease.count() == 0) return "";
  if (config.lease < Duration(std::chrono::milliseconds(400))) {
    return "lease: expected at least 400ms (renewals go out every lease/4), or 0s to turn fencing off";
  }
  if (config.worker_lost_timeout <= config.lease + config.max_clock_skew) {
    return "workerLostTimeout: expected more than lease + maxClockSkew (" +
           format_duration(config.lease + config.max_clock_skew) +
           "), or a partitioned target may still run the old copy when the new one starts";
  }
  Duration renewal_window = config.worker_lost_timeout - config.lease - config.max_clock_skew;
  if (renewal_window <= 2 * config.heartbeat_interval) {
    return "workerLostTimeout: expected more than lease + maxClockSkew + 2 x heartbeatInterval (" +
           format_duration(config.lease + config.max_clock_skew + 2 * config.heartbeat_interval) +
           "), or one late heartbeat stops the lease renewals";
  }
  return "";
}

}  // namespace shoal::core
