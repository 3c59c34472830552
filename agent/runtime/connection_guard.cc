#include "agent/runtime/connection_guard.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstring>

namespace shoal::runtime {

uint64_t ConnectionGuard::raise_descriptor_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return limit.rlim_cur == RLIM_INFINITY ? uint64_t{1} << 20 : static_cast<uint64_t>(limit.rlim_cur);
}

uint64_t ConnectionGuard::connection_cap(uint64_t descriptor_limit) {
  // Half of what is left after the reserve: ZeroMQ may hold a closing
  // connection's descriptor a little while after its disconnect event.
  if (descriptor_limit <= 2 * kReservedDescriptors) return std::max<uint64_t>(16, descriptor_limit / 4);
  return (descriptor_limit - kReservedDescriptors) / 2;
}

ConnectionGuard::ConnectionGuard(zmq::context_t& context, zmq::socket_t& listener,
                                 std::string endpoint, uint64_t max_connections,
                                 spdlog::logger& logger)
    : listener_(listener),
      endpoint_(std::move(endpoint)),
      max_connections_(max_connections),
      logger_(logger),
      monitor_(context, zmq::socket_type::pair) {
  std::string address = "inproc://shoal-peer-monitor";
  if (zmq_socket_monitor(listener_.handle(), address.c_str(),
                         ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED) != 0) {
    throw zmq::error_t();
  }
  monitor_.set(zmq::sockopt::linger, 0);
  monitor_.connect(address);
}

Status ConnectionGuard::on_events() {
  for (int i = 0; i < 4096; ++i) {
    zmq::message_t event, address;
    try {
      if (!monitor_.recv(event, zmq::recv_flags::dontwait)) break;
      if (event.more()) (void)monitor_.recv(address, zmq::recv_flags::dontwait);
    } catch (const zmq::error_t&) {
      break;
    }
    if (event.size() < 2) continue;
    uint16_t kind = 0;
    std::memcpy(&kind, event.data(), sizeof kind);
    if (kind == ZMQ_EVENT_ACCEPTED) ++open_;
    // Disconnects of connections dropped by a shed arrive after the count
    // was reset: never below zero.
    if (kind == ZMQ_EVENT_DISCONNECTED && open_ > 0) --open_;
  }
  if (unbound_since_) return rebind();
  if (open_ < max_connections_) return Status::ok();
  ++sheds_;
  logger_.warn("{} inbound connections (the most is {}): dropping them all; peers redial", open_,
               max_connections_);
  try {
    listener_.unbind(endpoint_);
  } catch (const zmq::error_t& e) {
    return Status(ErrorCode::kUnavailable, "cannot stop listening on " + endpoint_ + ": " + e.what());
  }
  open_ = 0;
  unbound_since_ = std::chrono::steady_clock::now();
  return rebind();
}

Status ConnectionGuard::rebind() {
  // ZeroMQ closes the old listener in its I/O thread: the port may still be
  // taken for a moment, so binding is retried on the next iterations.
  try {
    listener_.bind(endpoint_);
    unbound_since_.reset();
    return Status::ok();
  } catch (const zmq::error_t& e) {
    if (e.num() == EADDRINUSE && std::chrono::steady_clock::now() - *unbound_since_ < kRebindPatience) {
      return Status::ok();
    }
    return Status(ErrorCode::kUnavailable,
                  "cannot listen on " + endpoint_ + " again after dropping connections: " + e.what());
  }
}

}  // namespace shoal::runtime
