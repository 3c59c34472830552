// The agent's plumbing: start-up, the wire (decode, trust, replay), sending,
// peers and heartbeats, the tick. The two protocol roles live in
// target_role.cc and source_role.cc; control requests in control.cc.
#include "agent/core/agent.h"

#include <algorithm>
#include <cstdio>

#include <spdlog/spdlog.h>

namespace shoal::core {

using protocol::DropReason;
using protocol::MessageType;

Agent::Agent(AgentConfig config, crypto::Identity identity, const Clock& clock,
             Transport& transport, store::Store& store, cluster::Cluster& cluster, Rng& rng,
             std::shared_ptr<spdlog::logger> logger)
    : config_(std::move(config)),
      identity_(std::move(identity)),
      self_id_(crypto::key_to_text(identity_.public_key())),
      clock_(clock),
      transport_(transport),
      store_(store),
      cluster_(cluster),
      rng_(rng),
      logger_(std::move(logger)) {}

Agent::~Agent() = default;

Status Agent::start() {
  SHOAL_ASSIGN_OR_RETURN(boot_, store_.next_boot());
  SHOAL_RETURN_IF_ERROR(load());
  record_event("agent", "started, boot " + std::to_string(boot_));
  send_heartbeats();
  advertise_capacity(/*force=*/true);
  drain_local();
  return store_health_;
}

Status Agent::load() {
  SHOAL_ASSIGN_OR_RETURN(auto peer_records, store_.load_peers());
  for (const auto& record : peer_records) {
    Peer& peer = peers_[record.id];
    peer.cluster = record.cluster;
    peer.org = record.org;
    peer.endpoint = record.endpoint;
    peer.last_boot = record.last_boot;
    peer.last_seq = record.last_seq;
    peer.lease_ms = record.lease_ms;
    peer.lease_until_ms = record.lease_until_ms;
  }
  SHOAL_ASSIGN_OR_RETURN(auto invitations, store_.load_invitations());
  for (auto& record : invitations) {
    auto invitation = crypto::open_token(record.token);
    if (!invitation.is_ok()) {
      return invitation.status().with_context("stored invitation " + record.id);
    }
    auto& table = record.direction == store::InvitationDirection::kIssued ? issued_ : accepted_;
    table[record.id] = {std::move(invitation).value(), record};
  }
  SHOAL_ASSIGN_OR_RETURN(auto workload_records, store_.load_workloads());
  TimePoint now = clock_.now();
  listening_since_ = now;  // peers not heard from since count as silent from here
  last_gc_ = now;
  for (auto& record : workload_records) {
    SourceWorkload workload;
    workload.record = std::move(record);
    // Unfinished rounds restart with a new epoch; a persisted winner is
    // re-approved (APPROVE is idempotent at the target).
    workload.next_round_at = now;
    if (workload.record.parent.empty()) {
      uid_by_name_[workload.record.spec.key()] = workload.record.uid;
    } else {
      copies_[workload.record.parent].push_back(workload.record.uid);
    }
    awake_.insert(workload.record.uid);
    auto& stored = workloads_.emplace(workload.record.uid, std::move(workload)).first->second;
    if (stored.record.deleting) begin_delete(stored);  // a restart interrupted a delete
  }
  SHOAL_ASSIGN_OR_RETURN(auto reservation_records, store_.load_reservations());
  restore_reservations(std::move(reservation_records));
  return Status::ok();
}

// ---- the wire ---------------------------------------------------------------

void Agent::handle_wire(std::span<const uint8_t> wire) {
  DropReason reason;
  auto opened = protocol::open(wire, &reason);
  if (!opened.is_ok()) return drop(reason, "", opened.status().message());
  const protocol::Envelope& envelope = *opened;
  std::string from = crypto::key_to_text(envelope.from);
  if (envelope.to != identity_.public_key()) {
    return drop(DropReason::kWrongRecipient, from, "addressed to another agent");
  }
  auto peer_it = peers_.find(from);
  if (peer_it == peers_.end() || !(ever_issued_to(from) || ever_accepted_from(from))) {
    return drop(DropReason::kUnknownSender, from, "no invitation with this key");
  }
  Peer& peer = peer_it->second;
  TimePoint now = clock_.now();
  TimePoint sent_at = from_millis(envelope.sent_at_ms);
  if (sent_at + config_.replay_window < now || sent_at > now + config_.replay_window) {
    return drop(DropReason::kStale, from, "sent at " + format_time(sent_at));
  }
  if (envelope.boot < peer.last_boot ||
      (envelope.boot == peer.last_boot && envelope.seq <= peer.last_seq)) {
    return drop(DropReason::kReplayed, from,
                "boot " + std::to_string(envelope.boot) + " seq " + std::to_string(envelope.seq));
  }
  auto body = protocol::decode_body(envelope.type, envelope.body);
  if (!body.is_ok()) return drop(DropReason::kBadBody, from, body.status().message());

  // Who may say what. Starting or offering new work needs a valid invitation
  // in that direction; hearing about work already in flight (and being told
  // why a CANDIDATE is refused) needs only one on record, so revoked or
  // expired work still winds down cleanly.
  bool permitted = false;
  switch (envelope.type) {
    case MessageType::kHello: permitted = true; break;
    case MessageType::kApprove: permitted = may_send_as_source(from); break;
    case MessageType::kCandidate:
    case MessageType::kCancel:
    case MessageType::kDelete:
    case MessageType::kStatusAck:
    case MessageType::kDigest: permitted = ever_issued_to(from); break;
    case MessageType::kCapacity:
    case MessageType::kReady: permitted = may_send_as_target(from); break;
    case MessageType::kReject:
    case MessageType::kReleased:
    case MessageType::kBound:
    case MessageType::kStatus:
    case MessageType::kRevoke:
    case MessageType::kHoldings: permitted = ever_accepted_from(from); break;
  }
  if (!permitted) {
    return drop(DropReason::kNotPermitted, from,
                std::string(protocol::message_type_name(envelope.type)) +
                    " without a valid invitation in that direction");
  }
  // The high-water mark is durable (in this batch), so a message captured
  // before either side restarts stays a replay afterwards.
  peer.last_boot = envelope.boot;
  peer.last_seq = envelope.seq;
  persist_peer(from);
  peer.last_seen = now;
  current_sent_at_ = sent_at;
  ++stats_.received;
  ++stats_.received_by_type[static_cast<uint8_t>(envelope.type)];
  dispatch(from, *body);
  drain_local();
}

void Agent::dispatch(const std::string& from, const protocol::Body& body) {
  std::visit(
      [&](const auto& message) {
        using T = std::decay_t<decltype(message)>;
        if constexpr (std::is_same_v<T, protocol::Hello>) on_hello(from, message);
        else if constexpr (std::is_same_v<T, protocol::Capacity>) on_capacity(from, message);
        else if constexpr (std::is_same_v<T, protocol::Candidate>) on_candidate(from, message);
        else if constexpr (std::is_same_v<T, protocol::Ready>) on_ready(from, message);
        else if constexpr (std::is_same_v<T, protocol::Reject>) on_reject(from, message);
        else if constexpr (std::is_same_v<T, protocol::Approve>) on_approve(from, message);
        else if constexpr (std::is_same_v<T, protocol::Cancel>) on_cancel(from, message);
        else if constexpr (std::is_same_v<T, protocol::Released>) on_released(from, message);
        else if constexpr (std::is_same_v<T, protocol::Bound>) on_bound(from, message);
        else if constexpr (std::is_same_v<T, protocol::WorkloadStatus>) on_status(from, message);
        else if constexpr (std::is_same_v<T, protocol::StatusAck>) on_status_ack(from, message);
        else if constexpr (std::is_same_v<T, protocol::Revoke>) on_revoke(from, message);
        else if constexpr (std::is_same_v<T, protocol::Delete>) on_delete(from, message);
        else if constexpr (std::is_same_v<T, protocol::Digest>) on_digest(from, message);
        else if constexpr (std::is_same_v<T, protocol::Holdings>) on_holdings(from, message);
      },
      body);
}

void Agent::drain_local() {
  // Self-addressed messages take the same code path as remote ones, in the
  // same batch. Each handler answers at most a bounded number of messages,
  // so this ends; the bound guards against a future bug looping forever.
  for (int budget = 100000; !local_inbox_.empty() && budget > 0; --budget) {
    protocol::Body body = std::move(local_inbox_.front());
    local_inbox_.pop_front();
    current_sent_at_ = clock_.now();
    dispatch(self_id_, body);
  }
}

void Agent::send(const std::string& peer_id, protocol::Body body) {
  if (peer_id == self_id_) {
    local_inbox_.push_back(std::move(body));
    return;
  }
  auto peer = peers_.find(peer_id);
  if (peer == peers_.end()) return;
  protocol::Envelope envelope;
  envelope.type = protocol::type_of(body);
  envelope.from = identity_.public_key();
  auto to = crypto::key_from_text(peer_id, "peer id");
  if (!to.is_ok()) return;
  envelope.to = *to;
  envelope.boot = boot_;
  envelope.seq = ++seq_;
  envelope.sent_at_ms = to_millis(clock_.now());
  envelope.body = protocol::encode_body(body);
  transport_.send(peer_id, peer->second.endpoint, protocol::seal(envelope, identity_));
  ++stats_.sent;
  ++stats_.sent_by_type[static_cast<uint8_t>(envelope.type)];
}

void Agent::drop(DropReason reason, const std::string& peer, const std::string& detail) {
  ++stats_.dropped[static_cast<size_t>(reason)];
  if (!logger_) return;
  // At most one log line per peer per minute: a flood must not flood the log.
  TimePoint now = clock_.now();
  std::string key = peer.empty() ? "?" : peer;
  auto last = last_drop_log_.find(key);
  if (last != last_drop_log_.end() && now - last->second < std::chrono::minutes(1)) return;
  last_drop_log_[key] = now;
  if (!peer.empty() && peers_.count(peer)) {
    record_event("peer/" + peer, std::string("refused a message: ") +
                                     std::string(protocol::drop_reason_name(reason)) + " (" + detail + ")");
  }
  logger_->warn("dropped message from {}: {} ({})", key, protocol::drop_reason_name(reason),
                detail);
}

// ---- trust ------------------------------------------------------------------

namespace {
bool valid_at(const crypto::Invitation& invitation, const store::InvitationRecord& record,
              TimePoint now) {
  return !record.revoked && !record.replaced && invitation.not_before <= now &&
         (!invitation.expires || now < *invitation.expires);
}
}  // namespace

std::vector<const crypto::Invitation*> Agent::valid_issued(const std::string& peer_id) const {
  std::vector<const crypto::Invitation*> out;
  TimePoint now = clock_.now();
  for (const auto& [id, owned] : issued_) {
    if (crypto::key_to_text(owned.invitation.subject) == peer_id &&
        valid_at(owned.invitation, owned.record, now)) {
      out.push_back(&owned.invitation);
    }
  }
  return out;
}

std::vector<const crypto::Invitation*> Agent::valid_accepted(const std::string& peer_id) const {
  std::vector<const crypto::Invitation*> out;
  TimePoint now = clock_.now();
  for (const auto& [id, owned] : accepted_) {
    if (crypto::key_to_text(owned.invitation.issuer.public_key) == peer_id &&
        valid_at(owned.invitation, owned.record, now)) {
      out.push_back(&owned.invitation);
    }
  }
  return out;
}

bool Agent::ever_issued_to(const std::string& peer_id) const {
  return std::any_of(issued_.begin(), issued_.end(),
                     [&](const auto& entry) { return entry.second.record.peer_id == peer_id; });
}

bool Agent::ever_accepted_from(const std::string& peer_id) const {
  return std::any_of(accepted_.begin(), accepted_.end(),
                     [&](const auto& entry) { return entry.second.record.peer_id == peer_id; });
}

bool Agent::admits_connection(const std::string& peer_id) const {
  if (may_send_as_source(peer_id) || may_send_as_target(peer_id)) return true;
  // A source holding a token we revoked before it connected (perhaps before
  // it accepted) must get in, to hear the REVOKE that on_hello repeats;
  // until the token expires it could otherwise believe it Active forever.
  if (!revocations_to_tell(peer_id).empty()) return true;
  for (const auto& [key, reservation] : reservations_) {
    if (key.first == peer_id && store::holds_resources(reservation.record.phase)) return true;
  }
  for (const auto& [uid, workload] : workloads_) {
    if (workload.record.winner == peer_id && !model::is_finished(workload.record.phase)) return true;
  }
  return false;
}

std::vector<std::string> Agent::revocations_to_tell(const std::string& peer_id) const {
  std::vector<std::string> ids;
  TimePoint now = clock_.now();
  for (const auto& [id, owned] : issued_) {
    if (owned.record.peer_id == peer_id && owned.record.revoked &&
        (!owned.invitation.expires || now < *owned.invitation.expires)) {
      ids.push_back(id);
    }
  }
  return ids;
}

bool Agent::may_send_as_source(const std::string& peer_id) const {
  return !valid_issued(peer_id).empty();
}

bool Agent::may_send_as_target(const std::string& peer_id) const {
  return !valid_accepted(peer_id).empty();
}

void Agent::remember_peer(const crypto::IdCard& card) {
  std::string id = crypto::key_to_text(card.public_key);
  Peer& peer = peers_[id];
  peer.cluster = card.cluster;
  peer.org = card.org;
  peer.endpoint = card.endpoint;
  persist_peer(id);
}

void Agent::persist_peer(const std::string& id) {
  const Peer& peer = peers_.at(id);
  note_store(store_.put_peer({id, peer.cluster, peer.org, peer.endpoint, peer.last_boot, peer.last_seq,
                              peer.lease_ms, peer.lease_until_ms}));
}

// ---- peers and heartbeats ---------------------------------------------------

void Agent::on_hello(const std::string& from, const protocol::Hello& hello) {
  Peer& peer = peers_[from];
  // Answer the first HELLO of each peer boot, so a (re)started peer hears
  // from us at once; answering every HELLO would ping-pong forever.
  bool first_contact = from != self_id_ && peer.greeted_boot != peer.last_boot;
  peer.greeted_boot = peer.last_boot;
  if (peer.endpoint != hello.endpoint || peer.cluster != hello.cluster) {
    // The signed HELLO is the peer's word on its own address and name.
    peer.cluster = hello.cluster;
    peer.org = hello.org;
    peer.endpoint = hello.endpoint;
    persist_peer(from);
  }
  if (first_contact) {
    send(from, protocol::Hello{config_.cluster, config_.org, config_.endpoint});
    // Reconcile with a (re)started or reconnected peer at once (next tick).
    peer.last_digest_sent = TimePoint{};
  }
  // A REVOKE may have been lost, sent while the peer was down, or sent before
  // it even accepted the token. A source greets us only while it believes an
  // invitation valid, so each of its HELLOs is answered with the REVOKEs it
  // has not heard; once it has, it stops greeting and we stop repeating.
  if (from != self_id_ && !may_send_as_source(from)) {
    for (const std::string& id : revocations_to_tell(from)) send(from, protocol::Revoke{id, false});
  }
  if (first_contact && may_send_as_source(from)) {
    // A (re)started source gets our capacity at once rather than at the next
    // heartbeat; only once per boot, so HELLOs cannot make us sign at will.
    peer.last_capacity_sent.reset();
    advertise_capacity(/*force=*/false);
  }
}

void Agent::send_heartbeats() {
  last_heartbeat_ = clock_.now();
  for (const auto& [id, peer] : peers_) {
    if (may_send_as_source(id) || may_send_as_target(id)) {
      send(id, protocol::Hello{config_.cluster, config_.org, config_.endpoint});
    }
  }
}

void Agent::tick() {
  TimePoint now = clock_.now();
  notice_pause(now);
  apply_cluster_events();
  enforce_leases();
  expire_reservations();
  // Freed room goes to queued candidates first, before it is advertised.
  if (capacity_changed_) serve_queue();
  retry_status_reports();
  if (now - last_heartbeat_ >= config_.heartbeat_interval) {
    send_heartbeats();
    advertise_capacity(/*force=*/true);
  } else if (capacity_changed_) {
    // Something was released or finished: say so even if the totals look the
    // same as last time, since a source may have been refused in between.
    advertise_capacity(/*force=*/true);
  }
  if (capacity_changed_) {
    // Room freed in our own cluster: pending work that fits tries again now.
    for (auto& [uid, workload] : workloads_) {
      const auto& spec = workload.record.spec;
      auto own = cluster_.capacity_for(spec.namespace_name, spec.queue);
      if (workload.record.phase == model::Phase::kPending && own && !is_group(workload) &&
          own->largest_free_node.fits(spec.resources) && own->free.fits(spec.total())) {
        workload.next_round_at = std::min(workload.next_round_at, now);
      }
    }
  }
  drive_source_workloads();
  send_digests();
  if (now - last_gc_ >= config_.gc_interval) {
    last_gc_ = now;
    collect_local_garbage();
  }
  capacity_changed_ = false;
  drain_local();
}

void Agent::notice_pause(TimePoint now) {
  // The runtime ticks every few milliseconds; a gap longer than a heartbeat
  // means this process was stopped (SIGSTOP, a VM pause) or starved. What
  // peers sent meanwhile may still sit unread in our sockets, so their
  // silence is counted afresh from now, exactly as after a restart: a peer
  // is never called lost for a silence we did not listen to.
  if (last_tick_ != TimePoint{} && now - last_tick_ > config_.heartbeat_interval) {
    listening_since_ = now;
    if (logger_) logger_->warn("no tick for {}; peers' silence counts from now", format_duration(now - last_tick_));
  }
  last_tick_ = now;
}

Duration Agent::silent_for(const std::string& peer_id) const {
  if (peer_id == self_id_) return Duration{0};
  auto it = peers_.find(peer_id);
  TimePoint since = listening_since_;
  if (it != peers_.end() && it->second.last_seen) since = std::max(since, *it->second.last_seen);
  return clock_.now() - since;
}

bool Agent::lost(const std::string& peer_id) const {
  return silent_for(peer_id) >= config_.worker_lost_timeout;
}

bool Agent::may_renew_lease(const std::string& peer_id) const {
  // Stop once the target has been silent so long that worker-lost handling
  // will need its copies stopped: then its lease has ended lease + skew
  // before we place them again.
  return config_.lease.count() == 0 ||
         silent_for(peer_id) < config_.worker_lost_timeout - config_.lease - config_.max_clock_skew;
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

std::string Agent::cluster_name_of(const std::string& peer_id) const {
  if (peer_id == self_id_) return config_.cluster;
  auto it = peers_.find(peer_id);
  return it == peers_.end() ? peer_id.substr(0, 8) : it->second.cluster;
}

// ---- bookkeeping ------------------------------------------------------------

void Agent::record_event(const std::string& subject, const std::string& text) {
  // A copy's story is told in its workload's history.
  auto copy = workloads_.find(subject);
  if (copy != workloads_.end() && !copy->second.record.parent.empty()) {
    const store::WorkloadRecord& record = copy->second.record;
    return record_event(record.parent, "copy " + std::to_string(record.copy_index) + ": " + text);
  }
  note_store(store_.append_event({subject, clock_.now(), text}));
  if (logger_) logger_->info("{}: {}", subject, text);
}

void Agent::note_store(const Status& status) {
  if (!status.is_ok() && store_health_.is_ok()) store_health_ = status;
}

void Agent::persist(const store::WorkloadRecord& record) {
  note_store(store_.put_workload(record));
  awake_.insert(record.uid);
  if (!record.parent.empty()) update_group(record.parent);
}

void Agent::persist(const store::ReservationRecord& record) {
  note_store(store_.put_reservation(record));
}

std::string Agent::new_uid() {
  char buffer[33];
  std::snprintf(buffer, sizeof buffer, "%016llx%016llx",
                static_cast<unsigned long long>(rng_.next()),
                static_cast<unsigned long long>(rng_.next()));
  return buffer;
}

}  // namespace shoal::core
