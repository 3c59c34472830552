#include "agent/runtime/daemon.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <optional>

#include <spdlog/spdlog.h>
#include <zmq.hpp>

#include "agent/cluster/node_cluster.h"
#include "agent/runtime/agent_factory.h"
#include "agent/runtime/config.h"
#include "agent/runtime/connection_guard.h"
#include "agent/runtime/http_endpoint.h"
#include "agent/runtime/logging.h"
#include "agent/runtime/loop.h"
#include "agent/runtime/process.h"
#include "agent/runtime/zmq_transport.h"
#include "common/file.h"
#include "common/text.h"
#include "crypto/identity.h"
#include "model/manifest.h"
#include "store/sqlite/sqlite_store.h"

namespace shoal::runtime {
namespace {

// Per connection: what one peer can have queued here unread. Past it,
// ZeroMQ stops reading that connection (TCP pushes back on the sender);
// other connections are not affected.
constexpr int kPeerReceiveHighWaterMark = 10000;

}  // namespace

Status init_agent(const InitOptions& options) {
  SHOAL_RETURN_IF_ERROR(model::validate_name(options.cluster, "--cluster"));
  SHOAL_RETURN_IF_ERROR(model::validate_name(options.org, "--org"));
  SHOAL_RETURN_IF_ERROR(validate_listen(options.listen, "--listen"));
  AgentFile file;
  SHOAL_ASSIGN_OR_RETURN(file.advertise,
                         control::advertised_endpoint(options.listen, options.advertise, "--advertise"));
  SHOAL_RETURN_IF_ERROR(crypto::initialize());
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
    // A key imported once, e.g. from a Kubernetes Secret: fsGroup makes
    // its mount group-readable (0440), by the pod's own group.
    Result<crypto::Identity> given =
        crypto::Identity::load(options.identity_file, crypto::KeyFileAccess::kOwnerOrGroupRead);
    if (!given.is_ok()) return given.status().with_context("--identity " + options.identity_file);
    SHOAL_RETURN_IF_ERROR(given->save(identity_path(options.data_dir)));
  }
  SHOAL_RETURN_IF_ERROR(write_agent_file(options.data_dir, file));
  SHOAL_ASSIGN_OR_RETURN(auto store, store::sqlite::SqliteStore::open(database_path(options.data_dir)));
  return Status::ok();
}

Status configure_agent(const ConfigureOptions& options) {
  SHOAL_ASSIGN_OR_RETURN(AgentFile file, load_agent_file(options.data_dir));
  if (!options.cluster.empty() && options.cluster != file.cluster) {
    return invalid_argument("--cluster: this agent is \"" + file.cluster + "\", got \"" + options.cluster +
                            "\" (a cluster's name is fixed at init: its peers know it by it)");
  }
  if (!options.org.empty() && options.org != file.org) {
    return invalid_argument("--org: this agent's organization is \"" + file.org + "\", got \"" +
                            options.org + "\" (fixed at init)");
  }
  // "": peers dial the listen address (an advertise that only repeated the
  // old listen follows a new one).
  std::string advertise = file.advertise == file.listen ? "" : file.advertise;
  if (options.listen) {
    SHOAL_RETURN_IF_ERROR(validate_listen(*options.listen, "--listen"));
    file.listen = *options.listen;
  }
  if (options.advertise) advertise = *options.advertise;
  SHOAL_ASSIGN_OR_RETURN(file.advertise, control::advertised_endpoint(file.listen, advertise, "--advertise"));
  if (options.metrics_listen) {
    if (!options.metrics_listen->empty()) {
      SHOAL_RETURN_IF_ERROR(validate_metrics_listen(*options.metrics_listen));
    }
    file.metrics_listen = *options.metrics_listen;
  }
  if (options.log_format) {
    if (*options.log_format != "text" && *options.log_format != "json") {
      return invalid_argument("--log-format: expected \"text\" or \"json\", got " +
                              quoted_text(*options.log_format));
    }
    file.log_format = *options.log_format;
  }
  if (options.cluster_config) {
    file.cluster_config =
        options.cluster_config->empty() ? "" : std::filesystem::absolute(*options.cluster_config).string();
    SHOAL_RETURN_IF_ERROR(load_cluster_spec(file).status());
  }
  return write_agent_file(options.data_dir, file);
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
  SHOAL_ASSIGN_OR_RETURN(auto store, store::sqlite::SqliteStore::open(database_path(data_dir)));
  // A file-size limit (ulimit -f) must fail the write, which the loop
  // survives, rather than kill the process.
  std::signal(SIGXFSZ, SIG_IGN);
  SHOAL_ASSIGN_OR_RETURN(int signal_fd, open_signal_fd());
  auto logger = make_logger(file);
  logger->set_level(level);
  for (const auto& path : tightened) {
    logger->warn("{} was open to group or others; changed it to mode {}", path,
                 path == data_dir ? "0700" : "0600");
  }

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
  Loop loop(factory, *store, transport, LoopSockets{peers, control, zap ? &*zap : nullptr, signal_fd},
            *guard, PeerRateLimiter(static_cast<double>(file.peer_message_rate),
                            static_cast<double>(file.peer_message_burst)),
            *logger);
  Status booted = loop.boot();
  if (!booted.is_ok()) {
    ::close(signal_fd);
    return booted;
  }
  logger->info(
      "shoald {} listening on {}, peers dial {} ({} nodes, wire encryption {}, at most {} inbound "
      "connections); id {}",
      file.cluster, file.listen, file.advertise, node_count, file.wire_encryption,
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
