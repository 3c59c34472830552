#include "agent/control/data_dir.h"

#include <filesystem>

#include "common/file.h"
#include "common/text.h"
#include "crypto/id_card.h"
#include "model/yaml_document.h"

namespace shoal::control {

std::string config_path(const std::string& d) { return d + "/agent.yaml"; }
std::string identity_path(const std::string& d) { return d + "/identity.key"; }
std::string database_path(const std::string& d) { return d + "/state.db"; }
std::string control_socket_path(const std::string& d) { return d + "/control.sock"; }
std::string control_endpoint(const std::string& d) { return "ipc://" + control_socket_path(d); }

namespace {

bool is_wildcard_endpoint(const std::string& endpoint) {
  for (const char* wildcard : {"tcp://*:", "tcp://0.0.0.0:", "tcp://[::]:", "tcp://[*]:"}) {
    if (endpoint.rfind(wildcard, 0) == 0) return true;
  }
  return false;
}

Status validate_advertise(const std::string& advertise, const std::string& field) {
  SHOAL_RETURN_IF_ERROR(validate_listen(advertise, field));
  if (is_wildcard_endpoint(advertise)) {
    return invalid_argument(field + ": expected the name or address peers dial, got the wildcard " +
                            quoted_text(advertise) + " (it binds every address but names none)");
  }
  return Status::ok();
}

}  // namespace

Status validate_listen(const std::string& listen, const std::string& field) {
  return crypto::validate_endpoint(listen, field);
}

Result<std::string> advertised_endpoint(const std::string& listen, const std::string& advertise,
                                        const std::string& field) {
  if (!advertise.empty()) {
    SHOAL_RETURN_IF_ERROR(validate_advertise(advertise, field));
    return advertise;
  }
  if (is_wildcard_endpoint(listen)) {
    return invalid_argument(field + ": expected the endpoint peers dial, tcp://HOST:PORT (listen " + listen +
                            " binds every address but names none)");
  }
  return listen;
}

Result<YAML::Node> load_agent_yaml(const std::string& data_dir) {
  if (!std::filesystem::exists(config_path(data_dir))) {
    return not_found("agent config " + config_path(data_dir) +
                     ": not found; run `shoald init --data " + data_dir + " ...` first");
  }
  SHOAL_ASSIGN_OR_RETURN(std::string text,
                         read_bounded_file(config_path(data_dir), model::kMaxYamlBytes, "agent config"));
  SHOAL_ASSIGN_OR_RETURN(YAML::Node node, model::load_yaml(text, config_path(data_dir)));
  if (!node.IsMap()) return invalid_argument("agent.yaml: expected a mapping");
  return node;
}

Result<AgentName> agent_name_of(const YAML::Node& node) {
  auto required = [&](const char* key, std::string* out) -> Status {
    if (!node[key] || !node[key].IsScalar() || node[key].Scalar().empty()) {
      return invalid_argument(std::string("agent.yaml ") + key + ": expected a value");
    }
    *out = node[key].Scalar();
    return Status::ok();
  };
  AgentName name;
  SHOAL_RETURN_IF_ERROR(required("cluster", &name.cluster));
  SHOAL_RETURN_IF_ERROR(required("org", &name.org));
  SHOAL_RETURN_IF_ERROR(validate_name(name.cluster, "agent.yaml cluster"));
  SHOAL_RETURN_IF_ERROR(validate_name(name.org, "agent.yaml org"));
  SHOAL_RETURN_IF_ERROR(required("listen", &name.listen));
  SHOAL_RETURN_IF_ERROR(validate_listen(name.listen, "agent.yaml listen"));
  std::string advertise;
  if (const YAML::Node given = node["advertise"]; given && !given.IsNull()) {
    if (!given.IsScalar() || given.Scalar().empty()) {
      return invalid_argument("agent.yaml advertise: expected tcp://HOST:PORT");
    }
    advertise = given.Scalar();
  }
  SHOAL_ASSIGN_OR_RETURN(name.advertise, advertised_endpoint(name.listen, advertise, "agent.yaml advertise"));
  return name;
}

Result<AgentName> read_agent_name(const std::string& data_dir) {
  SHOAL_ASSIGN_OR_RETURN(YAML::Node node, load_agent_yaml(data_dir));
  try {
    return agent_name_of(node);
  } catch (const YAML::Exception& e) {
    return invalid_argument("agent.yaml: " + e.msg);
  }
}

}  // namespace shoal::control
