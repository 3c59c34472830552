// The control contract's half that lives on disk: where an agent's files
// are in its data directory, and who agent.yaml says the agent is. shoald
// (agent/runtime) and shoalctl (agent/cli) both depend on this, so neither
// has to know the other.
#pragma once

#include <string>

#include <yaml-cpp/yaml.h>

#include "common/status.h"

namespace shoal::control {

std::string config_path(const std::string& data_dir);          // agent.yaml
std::string identity_path(const std::string& data_dir);        // identity.key (0600)
std::string database_path(const std::string& data_dir);        // state.db
std::string control_socket_path(const std::string& data_dir);  // control.sock (0600)
std::string control_endpoint(const std::string& data_dir);     // ipc://<control.sock>

// Who the agent is, as agent.yaml says: all an id card needs besides the key.
struct AgentName {
  std::string cluster;
  std::string org;
  // tcp://HOST:PORT the peer socket binds: an address of this host, or
  // tcp://*:PORT (tcp://0.0.0.0:PORT) for every one of them.
  std::string listen;
  // tcp://HOST:PORT peers dial (the id card's endpoint): a name or address
  // that reaches `listen` from the other clusters, such as a Service's or a
  // load balancer's. agent.yaml's `advertise`, else `listen`.
  std::string advertise;
};

// agent.yaml as YAML; NotFound (saying how to init) when there is none.
Result<YAML::Node> load_agent_yaml(const std::string& data_dir);
// The required cluster, org and listen keys and the optional advertise, each
// checked, errors naming the key.
Result<AgentName> agent_name_of(const YAML::Node& agent_yaml);
Result<AgentName> read_agent_name(const std::string& data_dir);

// Checks a listen endpoint is tcp://HOST:PORT with a port in 1..65535.
Status validate_listen(const std::string& listen, const std::string& field);
// The endpoint peers dial: `advertise` when given, checked as validate_listen
// and not a wildcard host (*, 0.0.0.0, [::]) that names no machine; else
// `listen`, which must then name a host. `field` names the advertise in the
// error.
Result<std::string> advertised_endpoint(const std::string& listen, const std::string& advertise,
                                        const std::string& field);

}  // namespace shoal::control
