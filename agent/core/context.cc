#include "agent/core/context.h"

#include <cstdio>

#include <spdlog/spdlog.h>

namespace shoal::core {

Context::Context(AgentConfig config, crypto::Identity identity, const Clock& clock,
                 Transport& transport, store::Store& store, cluster::Cluster& cluster, Rng& rng,
                 std::shared_ptr<spdlog::logger> logger, PeerTable& peers,
                 const crypto::SignatureScheme& signatures)
    : config_(std::move(config)),
      identity_(std::move(identity)),
      signatures_(signatures),
      self_id_(crypto::key_to_text(identity_.public_key())),
      clock_(clock),
      transport_(transport),
      store_(store),
      cluster_(cluster),
      rng_(rng),
      logger_(std::move(logger)),
      peers_(peers) {}

void Context::send(const std::string& peer_id, protocol::Body body) {
  if (peer_id == self_id_) {
    local_inbox_.push_back(std::move(body));
    return;
  }
  protocol::MessageType type = protocol::type_of(body);
  if (auto* batch = batch_for(peer_id, type)) {
    batch->push_back({static_cast<uint8_t>(type), protocol::encode_body(body)});
  }
}

void Context::send(const std::string& peer_id, const protocol::Body& body,
                   const std::vector<uint8_t>& encoded) {
  if (peer_id == self_id_) {
    local_inbox_.push_back(body);
    return;
  }
  protocol::MessageType type = protocol::type_of(body);
  if (auto* batch = batch_for(peer_id, type)) batch->push_back({static_cast<uint8_t>(type), encoded});
}

std::vector<protocol::BatchItem>* Context::batch_for(const std::string& peer_id,
                                                     protocol::MessageType type) {
  if (!peers_.note_sending(peer_id, clock_.now())) return nullptr;
  ++stats_.sent;
  ++stats_.sent_by_type[static_cast<uint8_t>(type)];
  return &outgoing_[peer_id];
}

void Context::send_later(const std::string& peer_id, protocol::Body body, Duration within) {
  if (peer_id == self_id_ || within.count() <= 0) {
    send(peer_id, std::move(body));  // to ourselves it costs no envelope
    return;
  }
  protocol::MessageType type = protocol::type_of(body);
  Deferred& deferred = deferred_[peer_id];
  deferred.due = std::min(deferred.due, clock_.now() + within);
  deferred_due_ = std::min(deferred_due_, deferred.due);
  deferred.items.push_back({static_cast<uint8_t>(type), protocol::encode_body(body)});
}

void Context::take_due_deferred() {
  if (deferred_due_ <= clock_.now()) release_deferred(/*riding_too=*/false);
}

void Context::release_deferred(bool riding_too) {
  TimePoint now = clock_.now();
  deferred_due_ = TimePoint::max();
  for (auto it = deferred_.begin(); it != deferred_.end();) {
    if (it->second.due > now && !(riding_too && outgoing_.count(it->first))) {
      deferred_due_ = std::min(deferred_due_, it->second.due);
      ++it;
      continue;
    }
    // As the older messages; counted as sent now.
    std::vector<protocol::BatchItem> joined;
    for (auto& item : it->second.items) {
      if (batch_for(it->first, static_cast<protocol::MessageType>(item.type))) {
        joined.push_back(std::move(item));
      }
    }
    std::vector<protocol::BatchItem>& out = outgoing_[it->first];
    out.insert(out.begin(), std::make_move_iterator(joined.begin()),
               std::make_move_iterator(joined.end()));
    it = deferred_.erase(it);
  }
}

void Context::seal_outgoing() {
  // Deferred messages join the envelope of a peer this batch writes to, or
  // leave alone once due; either way after this batch commits.
  release_deferred(/*riding_too=*/true);
  for (auto& [peer_id, messages] : outgoing_) {
    const PeerTable::Peer* peer = peers_.find(peer_id);
    if (!peer || !peer->key) continue;
    protocol::Envelope envelope;
    envelope.from = identity_.public_key();
    envelope.to = *peer->key;
    envelope.boot = boot_;
    envelope.sent_at_ms = to_millis(clock_.now());
    envelope.acked_boot = peer->last_boot;
    envelope.acked_sent_at_ms = peer->newest_sent_at_ms;
    std::span<protocol::BatchItem> rest(messages);
    while (!rest.empty()) {
      // As many as fit in one envelope and its receiver's decoder; a lone
      // message goes plain.
      size_t count = protocol::next_envelope_items(rest);
      if (count == 1) {
        envelope.type = static_cast<protocol::MessageType>(rest[0].type);
        envelope.body = std::move(rest[0].body);
      } else {
        envelope.type = protocol::MessageType::kBatch;
        envelope.body = protocol::encode_batch(rest.first(count));
      }
      envelope.seq = ++seq_;
      transport_.send(peer_id, peer->endpoint, protocol::seal(envelope, identity_, signatures_));
      ++stats_.envelopes_sent;
      rest = rest.subspan(count);
    }
  }
  outgoing_.clear();
}

TimePoint Context::resend_at(const std::string& peer_id, TimePoint last_sent, int resends) const {
  return std::max(last_sent + resend_after(resends),
                  peers_.hold_resend_until(peer_id, last_sent, config_.retry_interval));
}

TimePoint Context::latest_resend_at(const std::string& peer_id, TimePoint last_sent,
                                    int resends) const {
  TimePoint due = last_sent + resend_after(resends);
  const PeerTable::Peer* peer = peers_.find(peer_id);
  return peer ? std::max(due, peer->read_progress_at + config_.retry_interval) : due;
}

protocol::Body Context::take_local() {
  protocol::Body body = std::move(local_inbox_.front());
  local_inbox_.pop_front();
  return body;
}

void Context::record_event(const std::string& subject, const std::string& text) {
  std::string named = subject;
  std::string told = text;
  if (event_subject_) event_subject_(named, told);
  note_store(store_.append_event({named, clock_.now(), told}));
  // Several per placement: at debug, so a busy agent's info log stays about
  // the agent (peers, storage, start and stop). describe shows them all.
  if (logger_) logger_->debug("{}: {}", named, told);
}

std::string Context::new_uid() {
  char buffer[33];
  std::snprintf(buffer, sizeof buffer, "%016llx%016llx",
                static_cast<unsigned long long>(rng_.next()),
                static_cast<unsigned long long>(rng_.next()));
  return buffer;
}

}  // namespace shoal::core
