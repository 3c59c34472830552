#include "agent/runtime/loop.h"

#include <malloc.h>

#include <algorithm>

#include <zmq_addon.hpp>

#include "agent/control/commands.h"
#include "agent/core/batch.h"
#include "agent/runtime/control_handlers.h"

namespace shoal::runtime {
namespace {

// While read-only the loop polls no longer than this, to keep its probe
// on time.
constexpr std::chrono::milliseconds kReadOnlyPollWait{250};
// What one iteration (one store batch) reads at most: envelopes, and the
// messages they carry (a BATCH carries many). Bounds the time a control
// request or a signal waits behind a backlog.
constexpr int kMaxWireMessagesPerIteration = 512;
constexpr size_t kMaxMessagesPerIteration = 4096;
constexpr int kMaxControlRequestsPerIteration = 16;
constexpr std::chrono::milliseconds kMaxTickDelay{100};
constexpr size_t kLargeControlBytes = 1 << 20;

// Who the rate limit counts a message against: the peer id the ZAP
// handler authenticated for its connection (CURVE), else the connection.
// Never the envelope's `from`, which anyone can write.
std::string connection_owner(const zmq::message_t& routing_id, zmq::message_t& payload) {
  if (const char* user = zmq_msg_gets(payload.handle(), "User-Id"); user && *user) return user;
  return "connection:" + routing_id.to_string();
}

// Nothing may throw out of the loop: bytes that are not UTF-8 (stored
// before names were checked, say) are replaced in a reply rather than
// failing it.
std::string dump(const nlohmann::json& reply) {
  return reply.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

bool receive(zmq::socket_t& socket, zmq::multipart_t& message) {
  try {
    return message.recv(socket, static_cast<int>(zmq::recv_flags::dontwait));
  } catch (const zmq::error_t&) {
    return false;
  }
}

}  // namespace

Loop::Loop(const AgentFactory& factory, store::sqlite::SqliteStore& store, ZmqTransport& transport,
           LoopSockets sockets, ConnectionGuard& guard, PeerRateLimiter limiter,
           spdlog::logger& logger)
    : factory_(factory),
      store_(store),
      transport_(transport),
      sockets_(sockets),
      guard_(guard),
      limiter_(std::move(limiter)),
      logger_(logger),
      watches_([this](const std::string& routing_id, const nlohmann::json& message) {
        return send_reply(routing_id, dump(message));
      }) {
  if (sockets_.zap) gate_.emplace(*sockets_.zap, logger_);
}

Status Loop::boot() {
  Status started = start_serving();
  if (started.is_ok()) return Status::ok();
  if (started.code() != ErrorCode::kStorage) return started;
  return enter_read_only(started);
}

Status Loop::run() {
  while (true) {
    SHOAL_ASSIGN_OR_RETURN(Next next, run_once());
    if (next == Next::kStop) return Status::ok();
  }
}

Result<Loop::Next> Loop::run_once(std::chrono::milliseconds max_wait) {
  std::vector<zmq::pollitem_t> items = {{sockets_.control.handle(), 0, ZMQ_POLLIN, 0},
                                        {nullptr, sockets_.stop_fd, ZMQ_POLLIN, 0}};
  if (sockets_.zap) items.push_back({sockets_.zap->handle(), 0, ZMQ_POLLIN, 0});
  // Read-only, peer messages stay queued in the socket (bounded by its
  // high-water mark) rather than waking the loop it would not act on.
  if (!read_only()) items.push_back({sockets_.peers.handle(), 0, ZMQ_POLLIN, 0});
  try {
    zmq::poll(items.data(), items.size(), std::min(poll_wait(), max_wait));
  } catch (const zmq::error_t& e) {
    if (e.num() != EINTR) return internal_error(std::string("poll: ") + e.what());
  }
  if (items[1].revents & ZMQ_POLLIN) {
    logger_.info("asked to stop; stopping");
    SHOAL_RETURN_IF_ERROR(commit_open_group());
    watches_.end_all("the agent is stopping");
    return Next::kStop;
  }
  // Each read of an empty ZeroMQ socket costs system calls (it checks its
  // command pipe): only the sockets the poll found readable are read.
  readable_.control = items[0].revents & ZMQ_POLLIN;
  readable_.peers = !read_only() && (items.back().revents & ZMQ_POLLIN);
  SHOAL_RETURN_IF_ERROR(guard_.on_events());
  if (gate_ && (items[2].revents & ZMQ_POLLIN))
    gate_->answer(instance_.agent->operations(), kMaxWireMessagesPerIteration);
  SHOAL_RETURN_IF_ERROR(read_only() ? read_only_iteration() : serving_iteration());
  return Next::kGoOn;
}

// Until the agent's next timer, within [0, kMaxPollWait]. Right after a
// tick at least 1 ms: a timer that stays due after its tick (a bug) costs
// a slow loop, never a spinning one.
std::chrono::milliseconds Loop::poll_wait() const {
  if (read_only()) return kReadOnlyPollWait;
  std::chrono::milliseconds floor{ticked_ ? 1 : 0};
  TimePoint next = std::min(instance_.agent->next_deadline(), group_.commit_due());
  for (const AwaitedLog& awaited : awaiting_logs_) next = std::min(next, awaited.deadline);
  next = std::min(next, watches_.next_keepalive());
  TimePoint now = clock_.now();
  if (next <= now) return floor;  // (TimePoint::min() must not be subtracted from)
  auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - now);
  return std::clamp(wait, floor, kMaxPollWait);
}

// What quiet batches left open is committed before the agent stops (and
// what they deferred goes out).
Status Loop::commit_open_group() {
  if (!group_.open()) return Status::ok();
  core::Agent& agent = *instance_.agent;
  core::BatchOutcome batch = core::run_batch(
      agent, store_, transport_,
      [&] {
        group_.answers_waiting = true;
        return Status::ok();
      },
      nullptr, &group_);
  return batch.why;
}

// A fresh agent from the store, started in its own batch.
Status Loop::start_serving() {
  SHOAL_ASSIGN_OR_RETURN(AgentInstance instance, factory_.make());
  instance_ = std::move(instance);
  core::Agent& agent = *instance_.agent;
  group_ = core::GroupCommit{agent.commit_linger()};
  return core::run_batch(agent, store_, transport_, [&] { return agent.start(); }).why;
}

Status Loop::serving_iteration() {
  core::Agent& agent = *instance_.agent;
  std::vector<ControlRequest> requests;
  std::vector<nlohmann::json> replies;
  core::BatchOutcome batch = core::run_batch(
      agent, store_, transport_,
      [&] {
        serve(agent, requests, replies);
        // Whoever waits on this loop is answered after a commit: control
        // requests, peer logs held for a client, and watchers.
        group_.answers_waiting = !requests.empty() || !awaiting_logs_.empty() || !watches_.empty();
        return Status::ok();
      },
      nullptr, &group_);
  if (batch.end == core::BatchEnd::kOpen) return Status::ok();  // nothing to tell anyone yet
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
    if (replies[i].contains(kStartWatch)) {
      replies[i] = watches_.start(requests[i].routing_id, replies[i][kStartWatch], clock_.now());
      if (!watches_.empty()) instance_.agent->operations().watch_workloads(true);
    }
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
void Loop::serve(core::Agent& agent, std::vector<ControlRequest>& requests,
           std::vector<nlohmann::json>& replies) {
  auto now = std::chrono::steady_clock::now();
  bool inbox_drained = !readable_.peers;
  size_t handled = 0;
  for (int i = 0; !inbox_drained && i < kMaxWireMessagesPerIteration && handled < kMaxMessagesPerIteration;
       ++i) {
    zmq::multipart_t message;
    if (!receive(sockets_.peers, message)) {
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

Status Loop::enter_read_only(const Status& fault) {
  fail_awaited_logs("the agent cannot write its state database; try again once it can");
  watches_.end_all("the agent cannot write its state database; watch again once it can");
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

Status Loop::read_only_iteration() {
  for (const auto& request : receive_control())
    send_reply(request.routing_id, answer_control(request.text));
  if (std::chrono::steady_clock::now() < next_probe_) return Status::ok();
  Status writable = store_.probe_write();
  if (writable.is_ok()) writable = start_serving();
  if (writable.is_ok()) {
    logger_.info("state database writable again; serving (boot {})",
                 instance_.agent->operations().boot());
    storage_fault_.reset();
    return Status::ok();
  }
  if (writable.code() != ErrorCode::kStorage) return writable.with_context("stopping");
  // start_serving may have replaced the agent before failing: rebuild the view.
  return enter_read_only(writable);
}

void Loop::note_rate_limited(const std::string& sender, std::chrono::steady_clock::time_point now) {
  if (now - last_rate_limit_log_ < std::chrono::minutes(1)) return;
  last_rate_limit_log_ = now;
  logger_.warn(
      "peer {} sends more than peerMessageRate allows; dropping the excess unread "
      "(counted as RateLimited in shoalctl status)",
      sender);
}

std::vector<Loop::ControlRequest> Loop::receive_control() {
  std::vector<ControlRequest> requests;
  for (int i = 0; readable_.control && i < kMaxControlRequestsPerIteration; ++i) {
    zmq::multipart_t message;
    if (!receive(sockets_.control, message)) break;
    if (message.size() != 3) continue;
    requests.push_back({message[0].to_string(), message[2].to_string()});
  }
  return requests;
}

// False when the client is gone (or cannot take more now).
bool Loop::send_reply(const std::string& routing_id, const std::string& body) {
  zmq::multipart_t reply;
  reply.addstr(routing_id);
  reply.addstr("");
  reply.addstr(body);
  try {
    return reply.send(sockets_.control, static_cast<int>(zmq::send_flags::dontwait));
  } catch (const zmq::error_t&) {
    return false;  // shoalctl went away; nothing to do
  }
}

// One control request in, one JSON reply out; read-only, only reads are
// answered and the rest refused with the reason.
std::string Loop::answer_control(const std::string& text) { return dump(answer_control_json(text)); }

// Replies to the "logs" requests held for a peer's LOG_CHUNK that has
// come, or that has not come within kPeerLogTimeout.
void Loop::answer_awaited_logs() {
  TimePoint now = clock_.now();
  std::erase_if(awaiting_logs_, [&](const AwaitedLog& awaited) {
    if (auto answer = instance_.agent->operations().take_peer_log(awaited.request_id)) {
      send_reply(awaited.routing_id, dump(log_reply(*answer)));
      return true;
    }
    if (now < awaited.deadline) return false;
    instance_.agent->operations().abandon_peer_log(awaited.request_id);
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
void Loop::fail_awaited_logs(const std::string& why) {
  for (const AwaitedLog& awaited : awaiting_logs_) {
    send_reply(awaited.routing_id, dump(log_reply(Status(ErrorCode::kUnavailable, why))));
  }
  awaiting_logs_.clear();
}

// After a committed batch: each watcher hears of its workloads that changed.
void Loop::tell_watchers() {
  if (watches_.empty()) return;
  watches_.tell(instance_.agent->operations().take_workload_changes(), clock_.now());
  if (watches_.empty()) instance_.agent->operations().watch_workloads(false);
}

// `shoalctl backup`: an online copy of the state database at `path`.
nlohmann::json Loop::backup(const std::string& path) {
  Status copied = store_.backup_to(path);
  if (!copied.is_ok()) {
    return {{"ok", false}, {"code", error_code_name(copied.code())}, {"error", copied.message()}};
  }
  logger_.info("state database backed up to {}", path);
  return {{"ok", true}, {"path", path}};
}

nlohmann::json Loop::answer_control_json(const std::string& text) {
  try {
    Result<nlohmann::json> request = control::parse_request(text);
    if (storage_fault_ && request.is_ok() && !control::is_read_only_command(*request)) {
      return nlohmann::json{
          {"ok", false},
          {"code", error_code_name(ErrorCode::kStorage)},
          {"error", "the agent cannot write its state database (" + storage_fault_->message() +
                        "), so it takes no new work; reads still answer, and it "
                        "resumes by itself once a write succeeds"}};
    }
    ControlContext context{instance_.agent->operations(),
                           *instance_.cluster,
                           transport_.dropped_unconnected(),
                           gate_ ? gate_->refused() : 0,
                           limiter_.limited(),
                           storage_fault_ ? storage_fault_->message() : std::string(),
                           store_.commit_stats(),
                           watches_.size()};
    nlohmann::json response = request.is_ok()
                                  ? handle_control(context, *request)
                                  : nlohmann::json{{"ok", false},
                                                   {"code", "InvalidArgument"},
                                                   {"error", request.status().message()}};
    // Read-only, no batch is open: the copy is made now.
    if (response.contains(kPendingBackup) && storage_fault_) return backup(response[kPendingBackup]);
    if (uint64_t id = response.value(kPendingPeerLog, uint64_t{0}); id && storage_fault_) {
      // Read-only, nothing reaches the wire: the request was never sent.
      instance_.agent->operations().abandon_peer_log(id);
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

}  // namespace shoal::runtime
