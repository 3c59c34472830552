// The one thread that owns the agent once shoald has opened everything.
// Each iteration waits on the peer socket, the control socket and a stop
// descriptor; hands every event to the core as one store batch
// (core::run_batch); and only once that batch is committed sends what it
// produced and answers the control requests it served (write-ahead: nobody
// hears of a state the disk has not got).
//
// It serves in one of two modes:
//  - serving: every iteration is one store batch (wire, control, tick); a
//    quiet one may share the next one's commit (core::GroupCommit), never
//    past the agent's commit_linger, and never when it answers a request;
//  - read-only, while the state database cannot be written (disk full,
//    read-only, I/O errors): the agent is rebuilt from what was committed
//    (core::load_read_only) and only answers reads; control mutations are
//    refused with the reason, peer messages wait unread in their socket,
//    timers stand still (to peers the agent looks paused, a state fencing
//    already makes safe), and every kStorageProbeInterval a one-row write
//    tests whether the disk is back. When it is, the agent starts again as
//    after a restart (a new boot).
//
// Beside the batches the loop owns what lives between them: control
// requests held for a peer's answer ("logs" of a remote copy), the watches
// of workload changes (workload_watches.h), the per-peer rate limit, online
// backups (taken between batches), and the gate CURVE handshakes pass
// (handshake_gate.h).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/logger.h>
#include <zmq.hpp>

#include "agent/core/batch.h"
#include "agent/runtime/agent_factory.h"
#include "agent/runtime/connection_guard.h"
#include "agent/runtime/handshake_gate.h"
#include "agent/runtime/process.h"
#include "agent/runtime/rate_limiter.h"
#include "agent/runtime/workload_watches.h"
#include "agent/runtime/zmq_transport.h"
#include "common/status.h"
#include "store/sqlite/sqlite_store.h"

namespace shoal::runtime {

// What the loop serves, opened and bound by its owner, which outlives it.
struct LoopSockets {
  zmq::socket_t& peers;    // ROUTER: envelopes from peers, [routing id, payload]
  zmq::socket_t& control;  // ROUTER with router_mandatory: [routing id, "", JSON request]
  zmq::socket_t* zap;      // REP answering ZAP handshakes; null without CURVE
  int stop_fd;             // readable when the loop should stop (shoald: a signalfd)
};

class Loop {
 public:
  // While read-only, how often a one-row write tests whether the disk is back.
  static constexpr std::chrono::seconds kStorageProbeInterval{2};
  // The most one iteration waits on its sockets (a timer computed late costs
  // latency, not liveness).
  static constexpr std::chrono::milliseconds kMaxPollWait{1000};

  Loop(const AgentFactory& factory, store::sqlite::SqliteStore& store, ZmqTransport& transport,
       LoopSockets sockets, ConnectionGuard& guard, PeerRateLimiter limiter,
       spdlog::logger& logger);

  // Starts the agent from the store: serving if its first batch commits,
  // read-only if the store cannot be written; any other failure is fatal.
  Status boot();

  // Iterates until the stop descriptor is readable (ok: a clean stop, every
  // watcher told) or a fatal error. After boot().
  Status run();

  enum class Next { kGoOn, kStop };
  // One iteration: waits for an event, the agent's next timer or
  // `max_wait`, whichever comes first, then serves what arrived.
  Result<Next> run_once(std::chrono::milliseconds max_wait = kMaxPollWait);

  const core::Operations& agent() const { return instance_.agent->operations(); }
  bool read_only() const { return storage_fault_.has_value(); }
  size_t watchers() const { return watches_.size(); }

 private:
  struct ControlRequest {
    std::string routing_id;
    std::string text;
  };
  // A "logs" request held for a peer's answer (answer_awaited_logs).
  struct AwaitedLog {
    std::string routing_id;
    uint64_t request_id = 0;
    TimePoint deadline;
  };

  std::chrono::milliseconds poll_wait() const;
  Status start_serving();
  Status serving_iteration();
  Status commit_open_group();
  void serve(core::Agent& agent, std::vector<ControlRequest>& requests,
             std::vector<nlohmann::json>& replies);
  Status enter_read_only(const Status& fault);
  Status read_only_iteration();

  void note_rate_limited(const std::string& sender, std::chrono::steady_clock::time_point now);
  std::vector<ControlRequest> receive_control();
  bool send_reply(const std::string& routing_id, const std::string& body);
  std::string answer_control(const std::string& text);
  nlohmann::json answer_control_json(const std::string& text);
  void answer_awaited_logs();
  void fail_awaited_logs(const std::string& why);
  void tell_watchers();
  nlohmann::json backup(const std::string& path);

  const AgentFactory& factory_;
  store::sqlite::SqliteStore& store_;
  ZmqTransport& transport_;
  LoopSockets sockets_;
  ConnectionGuard& guard_;
  PeerRateLimiter limiter_;
  spdlog::logger& logger_;
  SystemClock clock_;  // the agent's clock, to read its deadlines by
  std::optional<HandshakeGate> gate_;  // with CURVE only

  AgentInstance instance_;
  std::optional<Status> storage_fault_;  // set while read-only: why the store cannot be written
  std::chrono::steady_clock::time_point next_probe_{};
  std::chrono::steady_clock::time_point last_tick_{};
  bool ticked_ = false;  // in the last iteration
  // What this iteration's poll found readable (the rest is not read).
  struct Readable {
    bool control = false;
    bool peers = false;
  } readable_;
  core::GroupCommit group_;  // the serving batches' (start_serving: the agent's commit_linger)
  std::vector<AwaitedLog> awaiting_logs_;
  WorkloadWatches watches_;  // after logger_: it sends through send_reply
  std::chrono::steady_clock::time_point last_rate_limit_log_{};
};

}  // namespace shoal::runtime
