// shoald: the agent that runs beside one cluster.
//
//   shoald init --data DIR --cluster NAME --org ORG --listen tcp://HOST:PORT
//               [--advertise tcp://HOST:PORT] [--cluster-config FILE] [--identity FILE]
//   shoald configure --data DIR [--listen ...] [--advertise ...] [--metrics-listen ...]
//               [--log-format ...] [--cluster-config ...]
//   shoald run --data DIR
//
// Exit codes: 0 ok, 1 runtime error, 2 bad usage or bad input.
#include <sys/stat.h>

#include <cstdlib>
#include <iostream>

#include <CLI/CLI.hpp>

#include "agent/runtime/daemon.h"

namespace {

int exit_code_for(const shoal::Status& status) {
  if (status.is_ok()) return 0;
  std::cerr << "shoald: " << status.message() << "\n";
  switch (status.code()) {
    case shoal::ErrorCode::kInvalidArgument:
    case shoal::ErrorCode::kAlreadyExists:
      return 2;
    default:
      return 1;
  }
}

std::string default_data_dir() {
  const char* env = std::getenv("SHOAL_DATA");
  return env ? env : "";
}

}  // namespace

int main(int argc, char** argv) {
  // Everything shoald creates (state.db and its -wal/-shm, agent.yaml, the
  // control socket) is for its own user alone.
  ::umask(0077);
  CLI::App app{"shoald: the shoal agent, one beside each cluster"};
  app.require_subcommand(1);

  shoal::runtime::InitOptions init;
  init.data_dir = default_data_dir();
  CLI::App* init_command = app.add_subcommand("init", "Create the data dir, identity key and config");
  init_command->add_option("--data", init.data_dir, "Data directory (or SHOAL_DATA)")->required(init.data_dir.empty());
  init_command->add_option("--cluster", init.cluster, "This cluster's name (lowercase letters, digits, '-')")->required();
  init_command->add_option("--org", init.org, "The organization that owns it (lowercase letters, digits, '-')")->required();
  init_command->add_option("--listen", init.listen,
                           "Address the peer socket binds, tcp://HOST:PORT; tcp://*:PORT binds every address")
      ->required();
  init_command->add_option("--advertise", init.advertise,
                           "Endpoint peers dial, tcp://HOST:PORT (a Service's or load balancer's name); "
                           "default: --listen, which must then name a host");
  init_command->add_option("--identity", init.identity_file,
                           "Use this identity key (another agent's identity.key, e.g. from a Kubernetes "
                           "Secret) instead of creating one")
      ->check(CLI::ExistingFile);
  init_command->add_option("--cluster-config", init.cluster_config,
                           "Cluster manifest (kind: Cluster); default 4 nodes x 8 cpu x 32Gi");

  shoal::runtime::ConfigureOptions configure;
  configure.data_dir = default_data_dir();
  CLI::App* configure_command = app.add_subcommand(
      "configure",
      "Change an initialized agent's settings (read at its next start); an option not given keeps its "
      "value, an empty one resets it");
  configure_command->add_option("--data", configure.data_dir, "Data directory (or SHOAL_DATA)")
      ->required(configure.data_dir.empty());
  configure_command->add_option("--cluster", configure.cluster, "Must be the agent's cluster name, if given");
  configure_command->add_option("--org", configure.org, "Must be the agent's organization, if given");
  configure_command->add_option("--listen", configure.listen, "Address the peer socket binds, tcp://HOST:PORT");
  configure_command->add_option("--advertise", configure.advertise,
                                "Endpoint peers dial, tcp://HOST:PORT; \"\": the listen address");
  configure_command->add_option("--metrics-listen", configure.metrics_listen,
                                "HOST:PORT of /metrics, /healthz and /readyz; \"\": none");
  configure_command->add_option("--log-format", configure.log_format, "text or json");
  configure_command->add_option("--cluster-config", configure.cluster_config,
                                "Cluster manifest (kind: Cluster); \"\": the default sim nodes");

  std::string run_data_dir = default_data_dir();
  CLI::App* run_command = app.add_subcommand("run", "Run the agent in the foreground (logs to stderr)");
  run_command->add_option("--data", run_data_dir, "Data directory (or SHOAL_DATA)")->required(run_data_dir.empty());
  std::string log_level = "info";
  run_command->add_option("--log-level", log_level,
                          "trace, debug, info (default), warn, error, critical or off");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  if (*init_command) return exit_code_for(shoal::runtime::init_agent(init));
  if (*configure_command) return exit_code_for(shoal::runtime::configure_agent(configure));
  return exit_code_for(shoal::runtime::run_agent(run_data_dir, log_level));
}
