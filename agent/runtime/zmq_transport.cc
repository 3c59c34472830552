#include "agent/runtime/zmq_transport.h"

namespace shoal::runtime {

void ZmqTransport::send(const std::string& peer_id, const std::string& endpoint,
                        std::vector<uint8_t> wire) {
  outbox_.push_back({peer_id, endpoint, std::move(wire)});
}

zmq::socket_t* ZmqTransport::connection_for(const std::string& peer_id,
                                             const std::string& endpoint) {
  auto it = connections_.find(peer_id);
  if (it != connections_.end() && it->second.endpoint == endpoint) return it->second.socket.get();
  try {
    auto socket = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::dealer);
    socket->set(zmq::sockopt::linger, 0);
    // Queue only on completed connections: a dead peer costs nothing.
    // Known gap, found by the simulator: so the first message on a fresh connection
    // is not queued either (counted undeliverable; the protocol sends again,
    // but a new link comes up up to an interval later). Likewise a target
    // dials a source as it issues the invitation, before the source has
    // accepted: that handshake is refused, ZeroMQ does not redial after a
    // refusal, and flush() dials afresh only after kReconnectAfter of
    // failed sends. Holding messages briefly until a fresh connection's
    // handshake completes would spare both.
    socket->set(zmq::sockopt::immediate, 1);
    socket->set(zmq::sockopt::sndhwm, 10000);
    socket->set(zmq::sockopt::reconnect_ivl, 100);
    socket->set(zmq::sockopt::reconnect_ivl_max, 2000);
    if (curve_) {
      auto ed25519 = crypto::key_from_text(peer_id, "peer id");
      if (!ed25519.is_ok()) return nullptr;
      auto server_key = crypto::curve_public_key(*ed25519);
      if (!server_key.is_ok()) return nullptr;
      socket->set(zmq::sockopt::curve_serverkey, zmq::const_buffer(server_key->data(), server_key->size()));
      socket->set(zmq::sockopt::curve_publickey,
                  zmq::const_buffer(curve_->public_key.data(), curve_->public_key.size()));
      socket->set(zmq::sockopt::curve_secretkey,
                  zmq::const_buffer(curve_->secret_key.data(), curve_->secret_key.size()));
    }
    socket->connect(endpoint);
    auto* raw = socket.get();
    bool redialed = redialing_.erase(peer_id) > 0;
    connections_[peer_id] = {endpoint, std::move(socket), std::nullopt, std::chrono::steady_clock::now(),
                             false, redialed};
    return raw;
  } catch (const zmq::error_t&) {
    return nullptr;
  }
}

void ZmqTransport::heard_from(const std::string& peer_id) {
  auto it = connections_.find(peer_id);
  if (it == connections_.end()) return;
  const Connection& connection = it->second;
  bool stuck = connection.failing_since.has_value() || !connection.delivered;
  auto grace = connection.redialed ? std::chrono::duration_cast<std::chrono::milliseconds>(kRedialGrace)
                                   : kHandshakeGrace;
  if (stuck && std::chrono::steady_clock::now() - connection.dialed_at >= grace) {
    connections_.erase(it);  // the next message dials afresh
    redialing_.insert(peer_id);
  }
}

void ZmqTransport::release_batch() {
  auto now = std::chrono::steady_clock::now();
  for (auto& message : outbox_) {
    zmq::socket_t* socket = connection_for(message.peer_id, message.endpoint);
    if (!socket) {
      ++dropped_unconnected_;
      continue;
    }
    bool sent = false;
    try {
      sent = socket->send(zmq::buffer(message.wire), zmq::send_flags::dontwait).has_value();
    } catch (const zmq::error_t&) {
    }
    Connection& connection = connections_.at(message.peer_id);
    if (sent) {
      connection.failing_since.reset();
      connection.delivered = true;
      continue;
    }
    ++dropped_unconnected_;
    if (!connection.failing_since) {
      connection.failing_since = now;
    } else if (now - *connection.failing_since >= kReconnectAfter) {
      connections_.erase(message.peer_id);  // the next message dials afresh
    }
  }
  outbox_.clear();
}

}  // namespace shoal::runtime
