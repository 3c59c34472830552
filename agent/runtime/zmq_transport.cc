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
    socket->set(zmq::sockopt::immediate, 1);
    socket->set(zmq::sockopt::sndhwm, 10000);
    socket->set(zmq::sockopt::reconnect_ivl, 100);
    socket->set(zmq::sockopt::reconnect_ivl_max, 2000);
    socket->connect(endpoint);
    auto* raw = socket.get();
    connections_[peer_id] = {endpoint, std::move(socket)};
    return raw;
  } catch (const zmq::error_t&) {
    return nullptr;
  }
}

void ZmqTransport::flush() {
  for (auto& message : outbox_) {
    zmq::socket_t* socket = connection_for(message.peer_id, message.endpoint);
    if (!socket) {
      ++dropped_unconnected_;
      continue;
    }
    try {
      auto sent = socket->send(zmq::buffer(message.wire), zmq::send_flags::dontwait);
      if (!sent) ++dropped_unconnected_;
    } catch (const zmq::error_t&) {
      ++dropped_unconnected_;
    }
  }
  outbox_.clear();
}

}  // namespace shoal::runtime
