// The real Transport: one ROUTER socket receives from every peer; one DEALER
// per peer sends. Sends are buffered until flush(), which the loop calls only
// after the store batch has committed.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "agent/core/interfaces.h"
#include "common/status.h"

namespace shoal::runtime {

class ZmqTransport final : public core::Transport {
 public:
  explicit ZmqTransport(zmq::context_t& context) : context_(context) {}

  void send(const std::string& peer_id, const std::string& endpoint,
            std::vector<uint8_t> wire) override;

  // Delivers everything buffered. A peer that is not connected loses the
  // message: the protocol retries, so no queue grows without bound here.
  void flush();
  void discard() { outbox_.clear(); }
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
  };
  zmq::socket_t* connection_for(const std::string& peer_id, const std::string& endpoint);

  zmq::context_t& context_;
  std::vector<Outgoing> outbox_;
  std::map<std::string, Connection> connections_;
  size_t dropped_unconnected_ = 0;
};

}  // namespace shoal::runtime
