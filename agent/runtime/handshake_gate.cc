#include "agent/runtime/handshake_gate.h"

#include <cstring>

#include <zmq_addon.hpp>

namespace shoal::runtime {

void HandshakeGate::answer(const core::Operations& agent, int max_requests) {
  for (int i = 0; i < max_requests; ++i) {
    zmq::multipart_t request;
    try {
      if (!request.recv(socket_, static_cast<int>(zmq::recv_flags::dontwait))) return;
    } catch (const zmq::error_t&) {
      return;
    }
    if (request.size() < 6) continue;  // not ZAP; a REP socket must still answer something
    std::string status = "400", text = "no valid invitation with this key", user;
    if (request.size() >= 7 && request[5].to_string() == "CURVE" && request[6].size() == 32) {
      crypto::CurveKey key;
      std::memcpy(key.data(), request[6].data(), key.size());
      if (auto peer = peer_with_curve_key(agent, key); peer && agent.admits_connection(*peer)) {
        status = "200";
        text = "OK";
        user = *peer;
      }
    }
    if (status != "200") {
      ++refused_;
      auto now = std::chrono::steady_clock::now();
      if (now - last_refusal_log_ > std::chrono::minutes(1)) {
        last_refusal_log_ = now;
        logger_.warn("refused a connection from {}: {}", request[3].to_string(), text);
      }
    }
    zmq::multipart_t reply;
    reply.addstr("1.0");
    reply.addstr(request[1].to_string());
    reply.addstr(status);
    reply.addstr(text);
    reply.addstr(user);
    reply.addstr("");
    try {
      reply.send(socket_, static_cast<int>(zmq::send_flags::dontwait));
    } catch (const zmq::error_t&) {
    }
  }
}

std::optional<std::string> HandshakeGate::peer_with_curve_key(const core::Operations& agent,
                                                              const crypto::CurveKey& key) {
  for (const std::string& id : agent.peer_ids()) {
    auto cached = curve_keys_.find(id);
    if (cached == curve_keys_.end()) {
      auto ed25519 = crypto::key_from_text(id, "peer id");
      if (!ed25519.is_ok()) continue;
      auto curve = crypto::curve_public_key(*ed25519);
      if (!curve.is_ok()) continue;
      cached = curve_keys_.emplace(id, *curve).first;
    }
    if (cached->second == key) return id;
  }
  return std::nullopt;
}

}  // namespace shoal::runtime
