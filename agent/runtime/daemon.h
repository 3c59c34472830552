// shoald as a process: `shoald init` creates a data directory; `shoald run`
// takes its lock, reads its configuration, opens the state database, the
// peer and control sockets and a signalfd, and hands them to the loop
// (loop.h), which owns the agent until a signal stops it.
#pragma once

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
  std::string listen;
  std::string cluster_config;
  // An identity key to use (a Secret mounted in a pod: the agent keeps its
  // id across volumes); "" creates one.
  std::string identity_file;
};
Status init_agent(const InitOptions& options);

}  // namespace shoal::runtime
