// <data>/agent.yaml: what `shoald init` decided and `shoald run` reads.
#pragma once

#include <optional>
#include <string>

#include "agent/control/data_dir.h"
#include "agent/core/agent.h"
#include "common/status.h"

namespace shoal::runtime {

// The data directory's layout is part of the control contract (agent/control).
using control::config_path;
using control::control_endpoint;
using control::control_socket_path;
using control::database_path;
using control::identity_path;
using control::validate_listen;

struct AgentFile {
  std::string cluster;
  std::string org;
  std::string listen;          // tcp://HOST:PORT the peer socket binds (may be tcp://*:PORT)
  std::string advertise;       // tcp://HOST:PORT peers dial, the id card's endpoint (control::AgentName)
  std::string cluster_config;  // path of a Cluster manifest, or "" for the default sim cluster
  std::string log_format = "text";  // text | json
  std::string wire_encryption = "curve";  // curve (ZeroMQ CURVE + ZAP) | none (tests, debugging)
  // Inbound messages a peer may send, a second on average and at once; the
  // excess is dropped unread (rate_limiter.h).
  int64_t peer_message_rate = 2000;
  int64_t peer_message_burst = 4000;
  // HOST:PORT of the HTTP endpoint (http_endpoint.h); "" (the default): none.
  std::string metrics_listen;
  // The exec backend (docs/backends.md): output kept per replica before it
  // is rotated once (so twice this at most), and how long a finished
  // workload's directory outlives the agent's record of it.
  int64_t exec_log_cap_bytes = 10 << 20;
  Duration exec_keep_finished = std::chrono::hours(1);
  core::AgentConfig timing;    // durations; cluster/org/endpoint are filled from above
};

Result<AgentFile> load_agent_file(const std::string& data_dir);
Status write_agent_file(const std::string& data_dir, const AgentFile& file);

}  // namespace shoal::runtime
