// shoald as a process: `shoald init` creates a data directory; `shoald run`
// takes its lock, reads its configuration, opens the state database, the
// peer and control sockets and a signalfd, and hands them to the loop
// (loop.h), which owns the agent until a signal stops it.
#pragma once

#include <optional>
#include <string>

#include "common/status.h"

namespace shoal::runtime {

// Runs until SIGTERM or SIGINT (a clean stop: returns ok) or a fatal error.
// `log_level`: see parse_log_level (logging.h).
Status run_agent(const std::string& data_dir, const std::string& log_level = "info");

// `shoald init`: creates the data dir, identity key, agent.yaml and database.
struct InitOptions {
  std::string data_dir;
  std::string cluster;
  std::string org;
  std::string listen;     // what the peer socket binds
  std::string advertise;  // what peers dial; "" is `listen` (which may then not be a wildcard)
  std::string cluster_config;
  // An identity key to use (a Secret mounted in a pod: the agent keeps its
  // id across volumes); "" creates one.
  std::string identity_file;
};
Status init_agent(const InitOptions& options);

// `shoald configure`: changes the settings of an initialized agent that may
// change (a container's entrypoint applies its environment at every start);
// each unset option leaves its setting as it is, "" resets it. The cluster
// and org are fixed at init: given, they must match. agent.yaml is written
// again whole, checked as `shoald run` would read it; the running agent
// reads it at its next start.
struct ConfigureOptions {
  std::string data_dir;
  std::string cluster;
  std::string org;
  std::optional<std::string> listen;
  std::optional<std::string> advertise;
  std::optional<std::string> metrics_listen;
  std::optional<std::string> log_format;
  std::optional<std::string> cluster_config;
};
Status configure_agent(const ConfigureOptions& options);

}  // namespace shoal::runtime
