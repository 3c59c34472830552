#include "agent/runtime/event_loop.h"

#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "agent/cluster/node_cluster.h"
#include "agent/control/commands.h"
#include "agent/core/agent.h"
#include "agent/core/batch.h"
#include "agent/runtime/agent_factory.h"
#include "agent/runtime/config.h"
#include "agent/runtime/connection_guard.h"
#include "agent/runtime/control.h"
#include "agent/runtime/http_endpoint.h"
#include "agent/runtime/logging.h"
#include "agent/runtime/process.h"
#include "agent/runtime/rate_limiter.h"
#include "agent/runtime/zmq_transport.h"
#include "common/file.h"
#include "crypto/identity.h"
#include "model/manifest.h"
#include "store/sqlite_store.h"

namespace shoal::runtime {
namespace {

// The loop waits on its sockets until the agent's next timer is due, but
// never longer than this (a bound: a timer computed late costs latency, not
// liveness) and, while read-only, no longer than the probe needs.
constexpr std::chrono::milliseconds kMaxPollWait{1000};
constexpr std::chrono::milliseconds kReadOnlyPollWait{250};
// What one iteration (one store batch) reads at most: envelopes, and the
// messages they carry (a BATCH carries many). Bounds the time a control
// request or a signal waits behind a backlog.
constexpr int kMaxWireMessagesPerIteration = 512;
constexpr size_t kMaxMessagesPerIteration = 4096;
constexpr int kMaxControlRequestsPerIteration = 16;
constexpr std::chrono::seconds kStorageProbeInterval{2};
constexpr int kPeerReceiveHighWaterMark = 10000;
constexpr std::chrono::milliseconds kMaxTickDelay{100};
constexpr size_t kLargeControlBytes = 1 << 20;

// The loop proper, once everything is open. It serves in one of two modes:
//  - serving: every iteration is one store batch (wire, control, tick),
//    committed before anything it produced is sent;
//  - read-only, while the state database cannot be written (disk full,
//    read-only, I/O errors): the agent is rebuilt from what was committed
//    and only answers reads; control mutations are refused with the reason,
//    peer messages wait unread in their sockets, timers stand still (to
//    peers the agent looks paused, a state fencing already makes safe), and
//    every kStorageProbeInterval a one-row write tests whether the disk is
//    back. When it is, the agent starts again as after a restart (a new boot).
class Loop {
 public:
  Loop(const AgentFactory& factory, store::SqliteStore& store, ZmqTransport& transport,
       zmq::socket_t& peers, ConnectionGuard& guard, zmq::socket_t& control, zmq::socket_t* zap,
       int signal_fd, PeerRateLimiter limiter, spdlog::logger& logger)
      : factory_(factory),
        limiter_(std::move(limiter)),
        store_(store),
        transport_(transport),
        peers_(peers),
        guard_(guard),
        control_(control),
        zap_(zap),
        signal_fd_(signal_fd),
        logger_(logger) {}

  // Starts the agent from the store: serving if its first batch commits,
  // read-only if the store cannot be written; any other failure is fatal.
  Status boot() {
    Status started = start_serving();
    if (started.is_ok()) return Status::ok();
    if (started.code() != ErrorCode::kStorage) return started;
    return enter_read_only(started);
  }

  const core::Agent& agent() const { return *instance_.agent; }
  bool read_only() const { return storage_fault_.has_value(); }

  Status run() {
    while (true) {
      std::vector<zmq::pollitem_t> items = {{control_.handle(), 0, ZMQ_POLLIN, 0},
                                            {nullptr, signal_fd_, ZMQ_POLLIN, 0}};
      if (zap_) items.push_back({zap_->handle(), 0, ZMQ_POLLIN, 0});
      // Read-only, peer messages stay queued in the socket (bounded by its
      // high-water mark) rather than waking the loop it would not act on.
      if (!read_only()) items.push_back({peers_.handle(), 0, ZMQ_POLLIN, 0});
      try {
        zmq::poll(items.data(), items.size(), poll_wait());
      } catch (const zmq::error_t& e) {
        if (e.num() != EINTR) return internal_error(std::string("poll: ") + e.what());
      }
      if (items[1].revents & ZMQ_POLLIN) {
        logger_.info("signal received; stopping");
        end_watches("the agent is stopping");
        return Status::ok();
      }
      SHOAL_RETURN_IF_ERROR(guard_.on_events());
      if (zap_) answer_handshakes();
      SHOAL_RETURN_IF_ERROR(read_only() ? read_only_iteration() : serving_iteration());
    }
  }

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

  // Until the agent's next timer, within [0, kMaxPollWait]. Right after a
  // tick at least 1 ms: a timer that stays due after its tick (a bug) costs
  // a slow loop, never a spinning one.
  std::chrono::milliseconds poll_wait() const {
    if (read_only()) return kReadOnlyPollWait;
    std::chrono::milliseconds floor{ticked_ ? 1 : 0};
    TimePoint next = instance_.agent->next_deadline();
    for (const AwaitedLog& awaited : awaiting_logs_) next = std::min(next, awaited.deadline);
    if (!watchers_.empty()) next = std::min(next, next_keepalive_);
    TimePoint now = clock_.now();
    if (next <= now) return floor;  // (TimePoint::min() must not be subtracted from)
    auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - now);
    return std::clamp(wait, floor, kMaxPollWait);
  }

  // A fresh agent from the store, started in its own batch.
  Status start_serving() {
    SHOAL_ASSIGN_OR_RETURN(AgentInstance instance, factory_.make());
    instance_ = std::move(instance);
    core::Agent& agent = *instance_.agent;
    return core::run_batch(agent, store_, transport_, [&] { return agent.start(); }).why;
  }

  Status serving_iteration() {
    core::Agent& agent = *instance_.agent;
    std::vector<ControlRequest> requests;
    std::vector<nlohmann::json> replies;
    core::BatchOutcome batch = core::run_batch(agent, store_, transport_, [&] {
      serve(agent, requests, replies);
      return Status::ok();
    });
    if (batch.end != core::BatchEnd::kCommitted) {
      // Nothing of this batch happened: not on disk, so not on the wire and
      // not in any reply. Memory is ahead of the disk; enter_read_only
      // replaces it with what the disk holds.
      if (batch.why.code() != ErrorCode::kStorage) {
        return batch.why.with_context("state database write failed; stopping");
      }
      SHOAL_RETURN_IF_ERROR(enter_read_only(batch.why));
      for (const auto& request : requests)
        send_reply(request.routing_id, answer_control(request.text));
      return Status::ok();
    }
    // Committed: the world has heard of this batch and the cluster acts on
    // it; now the control replies may go.
    size_t reply_bytes = 0;
    for (size_t i = 0; i < requests.size(); ++i) {
      if (uint64_t id = replies[i].value(kPendingPeerLog, uint64_t{0})) {
        awaiting_logs_.push_back({requests[i].routing_id, id, clock_.now() + kPeerLogTimeout});
        continue;
      }
      // A backup copies what is committed, so it waits for the commit.
      if (replies[i].contains(kPendingBackup)) replies[i] = backup(replies[i][kPendingBackup]);
      if (replies[i].contains(kStartWatch)) replies[i] = start_watch(requests[i].routing_id, replies[i][kStartWatch]);
      std::string reply = dump(replies[i]);
      send_reply(requests[i].routing_id, reply);
      reply_bytes += requests[i].text.size() + reply.size();
    }
    answer_awaited_logs();
    tell_watchers();
    // A large submit or listing leaves its transient memory (parse trees,
    // JSON) fragmented on the heap; give it back rather than keep the peak.
    if (reply_bytes > kLargeControlBytes) ::malloc_trim(0);
    return Status::ok();
  }

  // The steps of one serving batch: peer messages, control requests (their
  // replies computed now, sent once the batch commits), and the timers.
  void serve(core::Agent& agent, std::vector<ControlRequest>& requests,
             std::vector<nlohmann::json>& replies) {
    auto now = std::chrono::steady_clock::now();
    bool inbox_drained = false;
    size_t handled = 0;
    for (int i = 0; i < kMaxWireMessagesPerIteration && handled < kMaxMessagesPerIteration; ++i) {
      zmq::multipart_t message;
      if (!receive(peers_, message)) {
        inbox_drained = true;
        break;
      }
      // ROUTER frames: [sender routing id, payload]; the payload names its sender.
      if (message.size() != 2) continue;
      zmq::message_t& payload = message[1];
      std::string sender = connection_owner(message[0], payload);
      if (!limiter_.admit(sender, now)) {
        note_rate_limited(sender, now);
        continue;
      }
      handled += agent.handle_wire({static_cast<const uint8_t*>(payload.data()), payload.size()});
      transport_.heard_from(sender);
    }
    requests = receive_control();
    for (const auto& request : requests) replies.push_back(answer_control_json(request.text));
    // Timers fire once what already arrived is read: a retry of a message
    // whose answer waits unread in the socket is pure waste (under load it
    // was most of the traffic). Behind a long backlog they still run every
    // kMaxTickDelay, so leases and timeouts never stall.
    // And only those that are due (Agent::next_deadline).
    ticked_ = false;
    if ((inbox_drained || now - last_tick_ >= kMaxTickDelay) &&
        agent.next_deadline() <= clock_.now()) {
      agent.tick();
      last_tick_ = now;
      ticked_ = true;
    }
  }

  Status enter_read_only(const Status& fault) {
    fail_awaited_logs("the agent cannot write its state database; try again once it can");
    end_watches("the agent cannot write its state database; watch again once it can");
    if (!storage_fault_) {
      logger_.error(
          "state database cannot be written ({}); refusing new work and answering reads "
          "until a write succeeds again (tried every {}s)",
          fault.message(), kStorageProbeInterval.count());
    }
    storage_fault_ = fault;
    next_probe_ = std::chrono::steady_clock::now() + kStorageProbeInterval;
    SHOAL_ASSIGN_OR_RETURN(AgentInstance instance, factory_.make());
    instance_ = std::move(instance);
    Status loaded = core::load_read_only(*instance_.agent, store_, transport_);
    if (!loaded.is_ok()) return loaded.with_context("state database cannot be read either; stopping");
    return Status::ok();
  }

  Status read_only_iteration() {
    for (const auto& request : receive_control())
      send_reply(request.routing_id, answer_control(request.text));
    if (std::chrono::steady_clock::now() < next_probe_) return Status::ok();
    Status writable = store_.probe_write();
    if (writable.is_ok()) writable = start_serving();
    if (writable.is_ok()) {
      logger_.info("state database writable again; serving (boot {})", instance_.agent->boot());
      storage_fault_.reset();
      return Status::ok();
    }
    if (writable.code() != ErrorCode::kStorage) return writable.with_context("stopping");
    // start_serving may have replaced the agent before failing: rebuild the view.
    return enter_read_only(writable);
  }

  // Who the rate limit counts a message against: the peer id the ZAP
  // handler authenticated for its connection (CURVE), else the connection.
  // Never the envelope's `from`, which anyone can write.
  static std::string connection_owner(const zmq::message_t& routing_id, zmq::message_t& payload) {
    if (const char* user = zmq_msg_gets(payload.handle(), "User-Id"); user && *user) return user;
    return "connection:" + routing_id.to_string();
  }

  void note_rate_limited(const std::string& sender, std::chrono::steady_clock::time_point now) {
    if (now - last_rate_limit_log_ < std::chrono::minutes(1)) return;
    last_rate_limit_log_ = now;
    logger_.warn(
        "peer {} sends more than peerMessageRate allows; dropping the excess unread "
        "(counted as RateLimited in shoalctl status)",
        sender);
  }

  std::vector<ControlRequest> receive_control() {
    std::vector<ControlRequest> requests;
    for (int i = 0; i < kMaxControlRequestsPerIteration; ++i) {
      zmq::multipart_t message;
      if (!receive(control_, message)) break;
      if (message.size() != 3) continue;
      requests.push_back({message[0].to_string(), message[2].to_string()});
    }
    return requests;
  }

  // False when the client is gone (or cannot take more now).
  bool send_reply(const std::string& routing_id, const std::string& body) {
    zmq::multipart_t reply;
    reply.addstr(routing_id);
    reply.addstr("");
    reply.addstr(body);
    try {
      return reply.send(control_, static_cast<int>(zmq::send_flags::dontwait));
    } catch (const zmq::error_t&) {
      return false;  // shoalctl went away; nothing to do
    }
  }

  // One control request in, one JSON reply out; read-only, only reads are
  // answered and the rest refused with the reason. Nothing here may throw
  // out of the loop: bytes that are not UTF-8 (stored before names were
  // checked, say) are replaced in the reply rather than failing it.
  std::string answer_control(const std::string& text) { return dump(answer_control_json(text)); }

  static std::string dump(const nlohmann::json& reply) {
    return reply.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }

  // Replies to the "logs" requests held for a peer's LOG_CHUNK that has
  // come, or that has not come within kPeerLogTimeout.
  void answer_awaited_logs() {
    TimePoint now = clock_.now();
    std::erase_if(awaiting_logs_, [&](const AwaitedLog& awaited) {
      if (auto answer = instance_.agent->take_peer_log(awaited.request_id)) {
        send_reply(awaited.routing_id, dump(log_reply(*answer)));
        return true;
      }
      if (now < awaited.deadline) return false;
      instance_.agent->abandon_peer_log(awaited.request_id);
      send_reply(awaited.routing_id,
                 dump(log_reply(Status(ErrorCode::kUnavailable,
                                       "the cluster running it did not answer within " +
                                           std::to_string(kPeerLogTimeout.count()) +
                                           " s (unreachable, or its agent predates shoalctl logs "
                                           "over the peer link)"))));
      return true;
    });
  }

  // The agent that sent the requests is being replaced: their answers
  // would go to it.
  void fail_awaited_logs(const std::string& why) {
    for (const AwaitedLog& awaited : awaiting_logs_) {
      send_reply(awaited.routing_id, dump(log_reply(Status(ErrorCode::kUnavailable, why))));
    }
    awaiting_logs_.clear();
  }

  // shoalctl get workloads -w: from now on `routing_id` hears of every
  // change to the workloads of `namespace_name` ("" for all).
  nlohmann::json start_watch(const std::string& routing_id, const std::string& namespace_name) {
    if (watchers_.size() >= kMaxWatchers) {
      return {{"ok", false}, {"code", "Unavailable"},
              {"error", std::to_string(kMaxWatchers) + " watches are open already; try again later"}};
    }
    watchers_.push_back({routing_id, namespace_name});
    instance_.agent->watch_workloads(true);
    next_keepalive_ = clock_.now() + kWatchKeepalive;
    return {{"ok", true}, {"watching", namespace_name.empty() ? "all namespaces" : namespace_name}};
  }

  // After a committed batch: each watcher hears of its workloads that
  // changed; every kWatchKeepalive an empty message tells who is gone
  // (ROUTER_MANDATORY: a send to a departed client fails).
  void tell_watchers() {
    if (watchers_.empty()) return;
    std::vector<store::WorkloadRecord> changed = instance_.agent->take_workload_changes();
    bool keepalive = clock_.now() >= next_keepalive_;
    if (changed.empty() && !keepalive) return;
    if (keepalive) next_keepalive_ = clock_.now() + kWatchKeepalive;
    std::map<std::string, nlohmann::json> by_namespace;
    nlohmann::json all = nlohmann::json::array();
    for (const auto& record : changed) {
      nlohmann::json item = workload_to_json(record);
      by_namespace[record.spec.namespace_name].push_back(item);
      all.push_back(std::move(item));
    }
    std::erase_if(watchers_, [&](const Watcher& watcher) {
      nlohmann::json items = all;
      if (!watcher.namespace_name.empty()) {
        auto it = by_namespace.find(watcher.namespace_name);
        items = it == by_namespace.end() ? nlohmann::json::array() : it->second;
      }
      if (items.empty() && !keepalive) return false;
      return !send_reply(watcher.routing_id, dump({{"ok", true}, {"items", items}}));
    });
    if (watchers_.empty()) instance_.agent->watch_workloads(false);
  }

  void end_watches(const std::string& why) {
    for (const Watcher& watcher : watchers_) {
      send_reply(watcher.routing_id, dump({{"ok", false}, {"code", "Unavailable"}, {"error", why}}));
    }
    watchers_.clear();
  }

  // `shoalctl backup`: an online copy of the state database at `path`.
  nlohmann::json backup(const std::string& path) {
    Status copied = store_.backup_to(path);
    if (!copied.is_ok()) {
      return {{"ok", false}, {"code", error_code_name(copied.code())}, {"error", copied.message()}};
    }
    logger_.info("state database backed up to {}", path);
    return {{"ok", true}, {"path", path}};
  }

  nlohmann::json answer_control_json(const std::string& text) {
    try {
      auto request = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (storage_fault_ && !request.is_discarded() && !control::is_read_only_command(request)) {
        return nlohmann::json{
            {"ok", false},
            {"code", error_code_name(ErrorCode::kStorage)},
            {"error", "the agent cannot write its state database (" + storage_fault_->message() +
                          "), so it takes no new work; reads still answer, and it "
                          "resumes by itself once a write succeeds"}};
      }
      ControlContext context{*instance_.agent,
                             *instance_.cluster,
                             transport_.dropped_unconnected(),
                             handshakes_refused_,
                             limiter_.limited(),
                             storage_fault_ ? storage_fault_->message() : std::string(),
                             store_.commit_stats(),
                             watchers_.size()};
      nlohmann::json response = request.is_discarded()
                                    ? nlohmann::json{{"ok", false},
                                                     {"code", "InvalidArgument"},
                                                     {"error", "control request: not JSON"}}
                                    : handle_control(context, request);
      // Read-only, no batch is open: the copy is made now.
      if (response.contains(kPendingBackup) && storage_fault_) return backup(response[kPendingBackup]);
      if (uint64_t id = response.value(kPendingPeerLog, uint64_t{0}); id && storage_fault_) {
        // Read-only, nothing reaches the wire: the request was never sent.
        instance_.agent->abandon_peer_log(id);
        return log_reply(Status(ErrorCode::kUnavailable,
                                "the agent cannot write its state database, so it sends nothing "
                                "to its peers now; output kept at a peer cannot be read"));
      }
      return response;
    } catch (const std::exception& e) {
      logger_.error("control request failed: {}", e.what());
      return nlohmann::json{{"ok", false}, {"code", "Internal"}, {"error", std::string("control request failed: ") + e.what()}};
    }
  }

  // ZAP (ZeroMQ RFC 27): every CURVE handshake on the peer socket asks us
  // first. Only keys that hold a valid invitation in either direction (or
  // still have work in flight with us) get in; the rest never reach the
  // message layer. Read-only, so it runs outside the store batch.
  void answer_handshakes() {
    for (int i = 0; i < kMaxWireMessagesPerIteration; ++i) {
      zmq::multipart_t request;
      if (!receive(*zap_, request)) return;
      if (request.size() < 6) continue;  // not ZAP; a REP socket must still answer something
      std::string status = "400", text = "no valid invitation with this key", user;
      if (request.size() >= 7 && request[5].to_string() == "CURVE" && request[6].size() == 32) {
        crypto::CurveKey key;
        std::memcpy(key.data(), request[6].data(), key.size());
        if (auto peer = peer_with_curve_key(key);
            peer && instance_.agent->admits_connection(*peer)) {
          status = "200";
          text = "OK";
          user = *peer;
        }
      }
      if (status != "200") {
        ++handshakes_refused_;
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
        reply.send(*zap_, static_cast<int>(zmq::send_flags::dontwait));
      } catch (const zmq::error_t&) {
      }
    }
  }

  std::optional<std::string> peer_with_curve_key(const crypto::CurveKey& key) {
    for (const std::string& id : instance_.agent->peer_ids()) {
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

  static bool receive(zmq::socket_t& socket, zmq::multipart_t& message) {
    try {
      return message.recv(socket, static_cast<int>(zmq::recv_flags::dontwait));
    } catch (const zmq::error_t&) {
      return false;
    }
  }

  const AgentFactory& factory_;
  PeerRateLimiter limiter_;
  std::chrono::steady_clock::time_point last_rate_limit_log_{};
  AgentInstance instance_;
  store::SqliteStore& store_;
  ZmqTransport& transport_;
  zmq::socket_t& peers_;
  ConnectionGuard& guard_;
  zmq::socket_t& control_;
  zmq::socket_t* zap_;  // null without CURVE
  std::map<std::string, crypto::CurveKey> curve_keys_;  // by peer id
  uint64_t handshakes_refused_ = 0;
  std::chrono::steady_clock::time_point last_refusal_log_{};
  int signal_fd_;
  spdlog::logger& logger_;
  std::optional<Status> storage_fault_;  // set while read-only: why the store cannot be written
  std::chrono::steady_clock::time_point last_tick_{};
  bool ticked_ = false;  // in the last iteration
  SystemClock clock_;    // the agent's clock, to read its deadlines by
  std::vector<AwaitedLog> awaiting_logs_;
  struct Watcher {
    std::string routing_id;
    std::string namespace_name;  // "": all
  };
  std::vector<Watcher> watchers_;
  TimePoint next_keepalive_{};
  std::chrono::steady_clock::time_point next_probe_{};
};

}  // namespace

Status init_agent(const InitOptions& options) {
  SHOAL_RETURN_IF_ERROR(model::validate_name(options.cluster, "--cluster"));
  SHOAL_RETURN_IF_ERROR(model::validate_name(options.org, "--org"));
  SHOAL_RETURN_IF_ERROR(validate_listen(options.listen, "--listen"));
  SHOAL_RETURN_IF_ERROR(crypto::initialize());
  AgentFile file;
  file.cluster = options.cluster;
  file.org = options.org;
  file.listen = options.listen;
  if (!options.cluster_config.empty()) {
    file.cluster_config = std::filesystem::absolute(options.cluster_config).string();
    SHOAL_RETURN_IF_ERROR(load_cluster_spec(file).status());
  }
  std::error_code error;
  std::filesystem::create_directories(options.data_dir, error);
  if (error) return internal_error("--data " + options.data_dir + ": " + error.message());
  ::chmod(options.data_dir.c_str(), 0700);
  if (std::filesystem::exists(identity_path(options.data_dir))) {
    return Status(ErrorCode::kAlreadyExists,
                  "--data " + options.data_dir +
                      ": already initialized (identity.key exists); refusing to overwrite it");
  }
  if (options.identity_file.empty()) {
    SHOAL_RETURN_IF_ERROR(crypto::Identity::generate().save(identity_path(options.data_dir)));
  } else {
    Result<crypto::Identity> given = crypto::Identity::load(options.identity_file);
    if (!given.is_ok()) return given.status().with_context("--identity " + options.identity_file);
    SHOAL_RETURN_IF_ERROR(given->save(identity_path(options.data_dir)));
  }
  SHOAL_RETURN_IF_ERROR(write_agent_file(options.data_dir, file));
  SHOAL_ASSIGN_OR_RETURN(auto store, store::SqliteStore::open(database_path(options.data_dir)));
  return Status::ok();
}

Status run_agent(const std::string& data_dir, const std::string& log_level) {
  SHOAL_ASSIGN_OR_RETURN(spdlog::level::level_enum level, parse_log_level(log_level));
  SHOAL_RETURN_IF_ERROR(crypto::initialize());
  SHOAL_ASSIGN_OR_RETURN(std::vector<std::string> tightened, make_data_dir_private(data_dir));
  SHOAL_ASSIGN_OR_RETURN(AgentFile file, load_agent_file(data_dir));
  SHOAL_ASSIGN_OR_RETURN(DataDirLock lock, DataDirLock::acquire(data_dir));
  SHOAL_ASSIGN_OR_RETURN(crypto::Identity identity, crypto::Identity::load(identity_path(data_dir)));
  SHOAL_ASSIGN_OR_RETURN(model::ClusterSpec cluster_spec, load_cluster_spec(file));
  // init created the database; without it this agent's invitations and
  // reservations are gone, and starting empty would hide that.
  if (!std::filesystem::exists(database_path(data_dir))) {
    return Status(
        ErrorCode::kCorrupt,
        "state database " + database_path(data_dir) +
            " is missing, though this agent was initialized (identity.key exists); shoald "
            "will not start empty: restore it from a backup, or init a new data directory");
  }
  SHOAL_ASSIGN_OR_RETURN(auto store, store::SqliteStore::open(database_path(data_dir)));
  // A file-size limit (ulimit -f) must fail the write, which the loop
  // survives, rather than kill the process.
  std::signal(SIGXFSZ, SIG_IGN);
  SHOAL_ASSIGN_OR_RETURN(int signal_fd, open_signal_fd());
  auto logger = make_logger(file);
  logger->set_level(level);
  for (const auto& path : tightened) logger->warn("{} was readable by others; changed it to mode 0600", path);

  uint64_t descriptors = ConnectionGuard::raise_descriptor_limit();
  zmq::context_t context(1);
  const bool curve = file.wire_encryption == "curve";
  std::optional<crypto::CurveKeyPair> curve_keys;
  if (curve) curve_keys = identity.curve_keys();
  std::optional<zmq::socket_t> zap;
  std::optional<ConnectionGuard> guard;
  zmq::socket_t peers(context, zmq::socket_type::router);
  zmq::socket_t control(context, zmq::socket_type::router);
  try {
    if (curve) {
      // The ZAP handler must be bound before the first handshake can happen.
      zap.emplace(context, zmq::socket_type::rep);
      zap->set(zmq::sockopt::linger, 0);
      zap->bind("inproc://zeromq.zap.01");
      peers.set(zmq::sockopt::curve_server, 1);
      peers.set(zmq::sockopt::curve_secretkey,
                zmq::const_buffer(curve_keys->secret_key.data(), curve_keys->secret_key.size()));
      peers.set(zmq::sockopt::zap_domain, "shoal");
    }
    peers.set(zmq::sockopt::linger, 0);
    peers.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(protocol::kMaxWireBytes));
    // Per connection: what one peer can have queued here unread. Past it,
    // ZeroMQ stops reading that connection (TCP pushes back on the sender);
    // other connections are not affected.
    peers.set(zmq::sockopt::rcvhwm, kPeerReceiveHighWaterMark);
    // A connection that has not finished its handshake soon is an attack
    // or a mistake; either way it must not hold a descriptor for long.
    peers.set(zmq::sockopt::handshake_ivl, ConnectionGuard::kHandshakeTimeoutMillis);
    peers.bind(file.listen);
    guard.emplace(context, peers, file.listen, ConnectionGuard::connection_cap(descriptors), *logger);
    control.set(zmq::sockopt::linger, 0);
    // A reply to a client that went away fails rather than vanishing: the
    // loop drops watchers that are gone (tell_watchers).
    control.set(zmq::sockopt::router_mandatory, true);
    std::filesystem::remove(control_socket_path(data_dir));  // stale from a crash; we hold the lock
    control.bind(control_endpoint(data_dir));
    ::chmod(control_socket_path(data_dir).c_str(), 0600);
  } catch (const zmq::error_t& e) {
    ::close(signal_fd);
    return Status(ErrorCode::kUnavailable,
                  "cannot listen on " + file.listen + " or the control socket: " + e.what());
  }

  const size_t node_count = cluster_spec.nodes.size();
  SystemClock clock;
  SodiumRng rng;
  ZmqTransport transport(context, curve_keys);
  cluster::ExecOptions exec_options;
  exec_options.log_cap_bytes = file.exec_log_cap_bytes;
  exec_options.keep_finished = std::chrono::duration_cast<std::chrono::seconds>(file.exec_keep_finished);
  AgentFactory factory(data_dir, file.timing, std::move(identity), std::move(cluster_spec),
                       std::move(exec_options), clock, transport, *store, rng, logger);
  Loop loop(factory, *store, transport, peers, *guard, control, zap ? &*zap : nullptr, signal_fd,
            PeerRateLimiter(static_cast<double>(file.peer_message_rate),
                            static_cast<double>(file.peer_message_burst)),
            *logger);
  Status booted = loop.boot();
  if (!booted.is_ok()) {
    ::close(signal_fd);
    return booted;
  }
  logger->info(
      "shoald {} listening on {} ({} nodes, wire encryption {}, at most {} inbound connections); "
      "id {}",
      file.cluster, file.listen, node_count, file.wire_encryption,
      ConnectionGuard::connection_cap(descriptors), loop.agent().self_id());

  // The HTTP endpoint reads the agent through its control socket, so it
  // starts once the loop can answer and stops before the loop's socket goes.
  std::unique_ptr<HttpEndpoint> http;
  if (!file.metrics_listen.empty()) {
    auto started = HttpEndpoint::start(file.metrics_listen, data_dir);
    if (!started.is_ok()) {
      ::close(signal_fd);
      std::filesystem::remove(control_socket_path(data_dir));
      return started.status();
    }
    http = std::move(started).value();
    if (file.metrics_listen.rfind("127.", 0) != 0 && file.metrics_listen.rfind("localhost:", 0) != 0 &&
        file.metrics_listen.rfind("[::1]:", 0) != 0) {
      logger->warn("metrics, health and routing counts are served without authentication on {}",
                   file.metrics_listen);
    }
    logger->info("HTTP endpoint on {}: /metrics /healthz /readyz /v1/metrics/<domain>/<metric>",
                 file.metrics_listen);
  }
  Status result = loop.run();
  http.reset();
  ::close(signal_fd);
  std::filesystem::remove(control_socket_path(data_dir));
  if (!result.is_ok()) logger->critical("{}", result.message());
  return result;
}

}  // namespace shoal::runtime
