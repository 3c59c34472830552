// The real Transport: one ROUTER socket receives from every peer; one DEALER
// per peer sends. Sends are buffered until flush(), which the loop calls only
// after the store batch has committed.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "agent/core/interfaces.h"
#include "crypto/identity.h"
#include "common/status.h"

namespace shoal::runtime {

class ZmqTransport final : public core::Transport {
 public:
  // With `curve`, every connection is encrypted and authenticated with
  // ZeroMQ CURVE; the server key of each peer derives from its peer id.
  ZmqTransport(zmq::context_t& context, std::optional<crypto::CurveKeyPair> curve)
      : context_(context), curve_(curve) {}

  void send(const std::string& peer_id, const std::string& endpoint,
            std::vector<uint8_t> wire) override;

  // Delivers everything buffered. A peer that is not connected loses the
  // message: the protocol retries, so no queue grows without bound here.
  void release_batch() override;
  void drop_batch() override { outbox_.clear(); }
  // A message from `peer_id` arrived: it is up and knows us now. A
  // connection to it that has not delivered anything yet was probably
  // refused before it knew us (its ZAP handler saw no invitation), and
  // ZeroMQ would retry it only after its backoff: it is dialed afresh at
  // the next send instead, so the first answers after `invite accept` are
  // not lost.
  void heard_from(const std::string& peer_id);
  size_t dropped_unconnected() const { return dropped_unconnected_; }

 private:
  struct Outgoing {
    std::string peer_id;
    std::string endpoint;
    std::vector<uint8_t> wire;
  };
  struct Connection {
    std::string endpoint;
    std::unique_ptr<zmq::socket_t> socket;
    std::optional<std::chrono::steady_clock::time_point> failing_since;
    std::chrono::steady_clock::time_point dialed_at{};
    bool delivered = false;  // some send went through
    bool redialed = false;   // dialed because heard_from replaced a stuck one
  };
  // A connection younger than this may still be in its handshake: hearing
  // from the peer does not replace it. One that heard_from itself dialed
  // gets longer: what was sent on it at once was dropped (its handshake was
  // not done), and replacing it on every message from the peer would drop
  // the answers to those messages forever.
  static constexpr std::chrono::milliseconds kHandshakeGrace{200};
  static constexpr std::chrono::seconds kRedialGrace{5};
  std::set<std::string> redialing_;  // replaced by heard_from, not dialed again yet
  // A CURVE handshake the peer refused (it did not know our key yet) is not
  // retried by ZeroMQ; a connection that stays unusable this long is
  // replaced by a fresh one.
  static constexpr std::chrono::seconds kReconnectAfter{1};
  zmq::socket_t* connection_for(const std::string& peer_id, const std::string& endpoint);

  zmq::context_t& context_;
  std::optional<crypto::CurveKeyPair> curve_;
  std::vector<Outgoing> outbox_;
  std::map<std::string, Connection> connections_;
  size_t dropped_unconnected_ = 0;
};

}  // namespace shoal::runtime
