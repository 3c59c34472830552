// Keeps inbound peer connections from exhausting file descriptors. Every
// TCP connection costs one descriptor before it has said a word, and
// libzmq aborts the process when accept() on the control socket meets
// EMFILE, so an agent must never run out (~1,100 idle
// connections took down an agent with a 1,024 limit).
//
// Three defenses: the soft descriptor limit is raised to the hard one at
// start; a connection that has not finished its handshake within
// kHandshakeTimeout is closed by ZeroMQ; and a socket monitor counts open
// inbound connections. At `max_connections` the listener is unbound, which
// drops every inbound connection (real peers redial within a second, the
// protocol retries what was lost), and it is bound again as soon as the
// port is free; a flood
// thus costs a reconnect, never the process.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <spdlog/logger.h>
#include <zmq.hpp>

#include "common/status.h"

namespace shoal::runtime {

class ConnectionGuard {
 public:
  static constexpr int kHandshakeTimeoutMillis = 5000;
  // Descriptors kept for everything else: the store, outbound sockets,
  // control clients, ZeroMQ's own.
  static constexpr uint64_t kReservedDescriptors = 256;

  // Raises the soft RLIMIT_NOFILE to the hard limit; returns the new soft
  // limit. Call once, before any socket is opened.
  static uint64_t raise_descriptor_limit();
  // At most this many inbound connections with `descriptor_limit` fds.
  static uint64_t connection_cap(uint64_t descriptor_limit);

  // Watches `listener` (a bound ROUTER) listening on `endpoint`.
  ConnectionGuard(zmq::context_t& context, zmq::socket_t& listener, std::string endpoint,
                  uint64_t max_connections, spdlog::logger& logger);

  // Reads pending monitor events and sheds connections at the cap. The loop
  // calls it every iteration (at least every poll interval).
  Status on_events();

  uint64_t open_connections() const { return open_; }
  uint64_t sheds() const { return sheds_; }

 private:
  // How long a rebind may wait for the old listener's port to come free.
  static constexpr std::chrono::seconds kRebindPatience{10};
  Status rebind();

  zmq::socket_t& listener_;
  std::string endpoint_;
  uint64_t max_connections_;
  spdlog::logger& logger_;
  zmq::socket_t monitor_;
  uint64_t open_ = 0;
  uint64_t sheds_ = 0;
  std::optional<std::chrono::steady_clock::time_point> unbound_since_;
};

}  // namespace shoal::runtime
