#include "agent/runtime/event_loop.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/file.h>
#include <sys/signalfd.h>
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

#include "agent/cluster/sim_cluster.h"
#include "agent/core/agent.h"
#include "agent/runtime/config.h"
#include "agent/runtime/connection_guard.h"
#include "agent/runtime/control.h"
#include "agent/runtime/zmq_transport.h"
#include "common/file.h"
#include "crypto/identity.h"
#include "model/manifest.h"
#include "model/yaml_document.h"
#include "store/sqlite_store.h"

namespace shoal::runtime {
namespace {

constexpr int kPollMillis = 50;
constexpr int kMaxWireMessagesPerIteration = 512;
constexpr int kMaxControlRequestsPerIteration = 16;

class SystemClock final : public Clock {
 public:
  TimePoint now() const override {
    return std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now());
  }
};

class SodiumRng final : public core::Rng {
 public:
  uint64_t next() override {
    uint64_t value;
    randombytes_buf(&value, sizeof value);
    return value;
  }
};

Result<model::ClusterSpec> load_cluster_spec(const AgentFile& file) {
  if (file.cluster_config.empty()) return model::default_cluster_spec(file.cluster);
  SHOAL_ASSIGN_OR_RETURN(std::string text, read_bounded_file(file.cluster_config, model::kMaxYamlBytes,
                                                             "cluster manifest"));
  SHOAL_ASSIGN_OR_RETURN(model::ClusterSpec spec, model::parse_cluster(text));
  SHOAL_RETURN_IF_ERROR(cluster::FairShareScheduler::create(spec).status());
  if (spec.name != file.cluster) {
    return invalid_argument("cluster manifest metadata.name: expected \"" + file.cluster +
                            "\" (the agent's cluster), got \"" + spec.name + "\"");
  }
  return spec;
}

// Holds an exclusive lock on <data>/shoald.lock for the process's life, so two
// agents never share one data dir (and one control socket).
class DataDirLock {
 public:
  static Result<DataDirLock> acquire(const std::string& data_dir) {
    std::string path = data_dir + "/shoald.lock";
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return internal_error("cannot open " + path);
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd);
      return Status(ErrorCode::kUnavailable,
                    "another shoald is already running on " + data_dir);
    }
    return DataDirLock(fd);
  }
  DataDirLock(DataDirLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  ~DataDirLock() {
    if (fd_ >= 0) ::close(fd_);
  }

 private:
  explicit DataDirLock(int fd) : fd_(fd) {}
  int fd_;
};

// SIGTERM and SIGINT arrive on a file descriptor the loop polls, so no
// signal handler touches agent state.
Result<int> open_signal_fd() {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  if (sigprocmask(SIG_BLOCK, &mask, nullptr) != 0) return internal_error("sigprocmask failed");
  int fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd < 0) return internal_error("signalfd failed");
  return fd;
}

std::shared_ptr<spdlog::logger> make_logger(const AgentFile& file) {
  auto logger = spdlog::stderr_color_mt("shoald-" + file.cluster);
  if (file.log_format == "json") {
    logger->set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l","cluster":")" + file.cluster +
            R"(","msg":"%v"})",
        spdlog::pattern_time_type::utc);
  } else {
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %^%l%$ [" + file.cluster + "] %v",
                        spdlog::pattern_time_type::utc);
  }
  return logger;
}

// The loop proper, once everything is open.
class Loop {
 public:
  Loop(core::Agent& agent, store::Store& store, ZmqTransport& transport, zmq::socket_t& peers,
       ConnectionGuard& guard, zmq::socket_t& control, zmq::socket_t* zap, int signal_fd,
       const cluster::Cluster& cluster, spdlog::logger& logger)
      : agent_(agent),
        store_(store),
        transport_(transport),
        peers_(peers),
        guard_(guard),
        control_(control),
        zap_(zap),
        signal_fd_(signal_fd),
        cluster_(cluster),
        logger_(logger) {}

  Status run() {
    while (true) {
      zmq::pollitem_t items[] = {{peers_.handle(), 0, ZMQ_POLLIN, 0},
                                 {control_.handle(), 0, ZMQ_POLLIN, 0},
                                 {nullptr, signal_fd_, ZMQ_POLLIN, 0},
                                 {zap_ ? zap_->handle() : nullptr, zap_ ? 0 : -1, ZMQ_POLLIN, 0}};
      try {
        zmq::poll(items, zap_ ? 4 : 3, std::chrono::milliseconds(kPollMillis));
      } catch (const zmq::error_t& e) {
        if (e.num() != EINTR) return internal_error(std::string("poll: ") + e.what());
      }
      if (items[2].revents & ZMQ_POLLIN) {
        logger_.info("signal received; stopping");
        return Status::ok();
      }
      SHOAL_RETURN_IF_ERROR(guard_.on_events());
      if (zap_) answer_handshakes();
      SHOAL_RETURN_IF_ERROR(iteration());
    }
  }

 private:
  Status iteration() {
    SHOAL_RETURN_IF_ERROR(store_.begin());
    for (int i = 0; i < kMaxWireMessagesPerIteration; ++i) {
      zmq::multipart_t message;
      if (!receive(peers_, message)) break;
      // ROUTER frames: [sender routing id, payload]; the payload names its sender.
      if (message.size() == 2) {
        const zmq::message_t& payload = message[1];
        agent_.handle_wire({static_cast<const uint8_t*>(payload.data()), payload.size()});
      }
    }
    std::vector<std::pair<std::string, std::string>> replies;
    for (int i = 0; i < kMaxControlRequestsPerIteration; ++i) {
      zmq::multipart_t message;
      if (!receive(control_, message)) break;
      if (message.size() != 3) continue;
      std::string routing_id = message[0].to_string();
      replies.emplace_back(routing_id, answer_control(message[2].to_string()));
    }
    agent_.tick();
    if (!agent_.store_health().is_ok()) {
      store_.rollback();
      transport_.discard();
      return agent_.store_health().with_context("state database write failed; stopping");
    }
    Status committed = store_.commit();
    if (!committed.is_ok()) {
      store_.rollback();
      transport_.discard();
      return committed.with_context("state database commit failed; stopping");
    }
    // Only now may the world hear about this batch.
    transport_.flush();
    for (auto& [routing_id, body] : replies) {
      zmq::multipart_t reply;
      reply.addstr(routing_id);
      reply.addstr("");
      reply.addstr(body);
      try {
        reply.send(control_, static_cast<int>(zmq::send_flags::dontwait));
      } catch (const zmq::error_t&) {
        // shoalctl went away; nothing to do.
      }
    }
    return Status::ok();
  }

  // One control request in, one JSON reply out. Nothing here may throw out
  // of the loop: bytes that are not UTF-8 (stored before names were
  // checked, say) are replaced in the reply rather than failing it.
  std::string answer_control(const std::string& text) {
    try {
      auto request = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
      nlohmann::json response =
          request.is_discarded()
              ? nlohmann::json{{"ok", false}, {"code", "InvalidArgument"},
                               {"error", "control request: not JSON"}}
              : handle_control({agent_, cluster_, transport_.dropped_unconnected(), handshakes_refused_},
                               request);
      return response.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    } catch (const std::exception& e) {
      logger_.error("control request failed: {}", e.what());
      return nlohmann::json{{"ok", false}, {"code", "Internal"}, {"error", std::string("control request failed: ") + e.what()}}
          .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
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
        if (auto peer = peer_with_curve_key(key); peer && agent_.admits_connection(*peer)) {
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
    for (const std::string& id : agent_.peer_ids()) {
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

 public:
  uint64_t handshakes_refused() const { return handshakes_refused_; }

 private:
  static bool receive(zmq::socket_t& socket, zmq::multipart_t& message) {
    try {
      return message.recv(socket, static_cast<int>(zmq::recv_flags::dontwait));
    } catch (const zmq::error_t&) {
      return false;
    }
  }

  core::Agent& agent_;
  store::Store& store_;
  ZmqTransport& transport_;
  zmq::socket_t& peers_;
  ConnectionGuard& guard_;
  zmq::socket_t& control_;
  zmq::socket_t* zap_;  // null without CURVE
  std::map<std::string, crypto::CurveKey> curve_keys_;  // by peer id
  uint64_t handshakes_refused_ = 0;
  std::chrono::steady_clock::time_point last_refusal_log_{};
  int signal_fd_;
  const cluster::Cluster& cluster_;
  spdlog::logger& logger_;
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
  SHOAL_RETURN_IF_ERROR(crypto::Identity::generate().save(identity_path(options.data_dir)));
  SHOAL_RETURN_IF_ERROR(write_agent_file(options.data_dir, file));
  SHOAL_ASSIGN_OR_RETURN(auto store, store::SqliteStore::open(database_path(options.data_dir)));
  return Status::ok();
}

// The data directory holds the identity key and every peer's state: it is
// for this agent's user alone. A directory others can enter is refused (as
// a readable key file is); files in it that others could read are tightened,
// saying so, since earlier versions created them 0644.
Result<std::vector<std::string>> make_data_dir_private(const std::string& data_dir) {
  struct stat info {};
  // A missing directory is left to load_agent_file, which says how to init.
  if (::stat(data_dir.c_str(), &info) != 0) return std::vector<std::string>{};
  if ((info.st_mode & 0077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(info.st_mode & 07777));
    return invalid_argument("--data " + data_dir + ": mode " + mode +
                            " lets group or others in; expected 0700 (run: chmod 700 " + data_dir + ")");
  }
  std::vector<std::string> tightened;
  for (const std::string& path : {database_path(data_dir), database_path(data_dir) + "-wal",
                                  database_path(data_dir) + "-shm", config_path(data_dir)}) {
    if (::stat(path.c_str(), &info) == 0 && (info.st_mode & 0077) != 0) {
      if (::chmod(path.c_str(), 0600) != 0) return internal_error("cannot chmod 600 " + path);
      tightened.push_back(path);
    }
  }
  return tightened;
}

Status run_agent(const std::string& data_dir) {
  SHOAL_RETURN_IF_ERROR(crypto::initialize());
  SHOAL_ASSIGN_OR_RETURN(std::vector<std::string> tightened, make_data_dir_private(data_dir));
  SHOAL_ASSIGN_OR_RETURN(AgentFile file, load_agent_file(data_dir));
  SHOAL_ASSIGN_OR_RETURN(DataDirLock lock, DataDirLock::acquire(data_dir));
  SHOAL_ASSIGN_OR_RETURN(crypto::Identity identity, crypto::Identity::load(identity_path(data_dir)));
  SHOAL_ASSIGN_OR_RETURN(model::ClusterSpec cluster_spec, load_cluster_spec(file));
  SHOAL_ASSIGN_OR_RETURN(auto store, store::SqliteStore::open(database_path(data_dir)));
  SHOAL_ASSIGN_OR_RETURN(int signal_fd, open_signal_fd());
  auto logger = make_logger(file);
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
    peers.set(zmq::sockopt::rcvhwm, 100000);
    // A connection that has not finished its handshake soon is an attack
    // or a mistake; either way it must not hold a descriptor for long.
    peers.set(zmq::sockopt::handshake_ivl, ConnectionGuard::kHandshakeTimeoutMillis);
    peers.bind(file.listen);
    guard.emplace(context, peers, file.listen, ConnectionGuard::connection_cap(descriptors), *logger);
    control.set(zmq::sockopt::linger, 0);
    std::filesystem::remove(control_socket_path(data_dir));  // stale from a crash; we hold the lock
    control.bind(control_endpoint(data_dir));
    ::chmod(control_socket_path(data_dir).c_str(), 0600);
  } catch (const zmq::error_t& e) {
    ::close(signal_fd);
    return Status(ErrorCode::kUnavailable,
                  "cannot listen on " + file.listen + " or the control socket: " + e.what());
  }

  SHOAL_ASSIGN_OR_RETURN(std::unique_ptr<cluster::SimCluster> sim, cluster::SimCluster::create(cluster_spec));
  cluster::SimCluster& cluster = *sim;
  SystemClock clock;
  SodiumRng rng;
  ZmqTransport transport(context, curve_keys);
  core::Agent agent(file.timing, std::move(identity), clock, transport, *store, cluster, rng,
                    logger);
  SHOAL_RETURN_IF_ERROR(store->begin());
  Status started = agent.start();
  if (!started.is_ok()) {
    store->rollback();
    ::close(signal_fd);
    return started;
  }
  SHOAL_RETURN_IF_ERROR(store->commit());
  transport.flush();
  logger->info("shoald {} listening on {} ({} nodes, wire encryption {}, at most {} inbound connections); id {}",
               file.cluster, file.listen, cluster_spec.nodes.size(), file.wire_encryption,
               ConnectionGuard::connection_cap(descriptors), agent.self_id());

  Loop loop(agent, *store, transport, peers, *guard, control, zap ? &*zap : nullptr, signal_fd, cluster,
            *logger);
  Status result = loop.run();
  ::close(signal_fd);
  std::filesystem::remove(control_socket_path(data_dir));
  if (!result.is_ok()) logger->critical("{}", result.message());
  return result;
}

}  // namespace shoal::runtime
