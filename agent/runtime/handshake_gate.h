// ZAP (ZeroMQ RFC 27): with CURVE on, every handshake on the peer socket
// asks this gate first. Only keys that belong to a peer the agent admits
// (a valid invitation in either direction, or work still in flight with
// it) get in, and the connection is then known by that peer's id (the
// "User-Id" its messages carry, which the rate limit counts by); the rest
// never reach the message layer. It reads the agent and writes nothing,
// so it runs outside the store batch, read-only mode included.
#pragma once

#include <spdlog/logger.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <zmq.hpp>

#include "agent/core/operations.h"
#include "crypto/identity.h"

namespace shoal::runtime {

class HandshakeGate {
 public:
  // `socket`: a REP bound to inproc://zeromq.zap.01 before the peer socket
  // took its first connection.
  HandshakeGate(zmq::socket_t& socket, spdlog::logger& logger) : socket_(socket), logger_(logger) {}

  // Answers the handshakes waiting (at most `max_requests`) by what
  // `agent` admits now.
  void answer(const core::Operations& agent, int max_requests);

  // Handshakes turned away since start.
  uint64_t refused() const { return refused_; }

 private:
  std::optional<std::string> peer_with_curve_key(const core::Operations& agent,
                                                 const crypto::CurveKey& key);

  zmq::socket_t& socket_;
  spdlog::logger& logger_;
  std::map<std::string, crypto::CurveKey> curve_keys_;  // by peer id: derived once
  uint64_t refused_ = 0;
  std::chrono::steady_clock::time_point last_refusal_log_{};
};

}  // namespace shoal::runtime
