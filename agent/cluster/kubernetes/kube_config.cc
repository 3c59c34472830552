// Where the API server is and who we are to it: kubeconfigs, and a pod's
// own service account (kube_api.h).
#include <cctype>
#include <filesystem>

#include <sodium.h>

#include "agent/cluster/kubernetes/kube_api.h"
#include "common/file.h"
#include "model/yaml_document.h"

namespace shoal::cluster::kubernetes {
namespace {

// The most a kubeconfig, a token or a certificate file may hold.
constexpr size_t kMaxCredentialBytes = 1 << 20;

Result<std::string> decode_base64(const std::string& text, const std::string& field) {
  std::string out(text.size(), '\0');
  size_t length = 0;
  if (sodium_base642bin(reinterpret_cast<unsigned char*>(out.data()), out.size(), text.data(),
                        text.size(), " \t\r\n", &length, nullptr,
                        sodium_base64_VARIANT_ORIGINAL) != 0) {
    return invalid_argument(field + ": expected base64");
  }
  out.resize(length);
  return out;
}

// The entry of `list` (clusters, users or contexts) named `name`, as its
// inner mapping (`inner`: "cluster", "user" or "context").
Result<std::pair<YAML::Node, std::string>> named_entry(const YAML::Node& root, const char* list,
                                                      const char* inner, const std::string& name,
                                                      const std::string& where) {
  const YAML::Node entries = root[list];
  if (!entries || !entries.IsSequence()) {
    return invalid_argument(where + list + ": expected a list");
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    const YAML::Node entry = entries[i];
    if (!entry.IsMap() || !entry["name"] || !entry["name"].IsScalar()) {
      return invalid_argument(where + list + "[" + std::to_string(i) + "].name: expected a name");
    }
    if (entry["name"].Scalar() != name) continue;
    std::string path = std::string(list) + "[" + std::to_string(i) + "]." + inner;
    if (!entry[inner] || !entry[inner].IsMap()) {
      return invalid_argument(where + path + ": expected a mapping");
    }
    return std::pair{entry[inner], path};
  }
  return invalid_argument(where + list + ": no entry named \"" + name + "\"");
}

// A string field of `node`, or "" when absent.
Result<std::string> text_of(const YAML::Node& node, const char* key, const std::string& where,
                            const std::string& path) {
  const YAML::Node value = node[key];
  if (!value || value.IsNull()) return std::string();
  if (!value.IsScalar()) return invalid_argument(where + path + "." + key + ": expected a string");
  return value.Scalar();
}

// `key` (a file path) or `key`-data (base64) of `node`: the bytes, or "".
Result<std::string> file_or_data(const YAML::Node& node, const std::string& key,
                                 const std::string& where, const std::string& path,
                                 const std::string& base_dir) {
  const std::string data_key = key + "-data";
  SHOAL_ASSIGN_OR_RETURN(std::string data, text_of(node, data_key.c_str(), where, path));
  if (!data.empty()) return decode_base64(data, where + path + "." + data_key);
  SHOAL_ASSIGN_OR_RETURN(std::string file, text_of(node, key.c_str(), where, path));
  if (file.empty()) return std::string();
  std::filesystem::path resolved(file);
  if (resolved.is_relative()) resolved = std::filesystem::path(base_dir) / resolved;
  return read_bounded_file(resolved.string(), kMaxCredentialBytes, where + path + "." + key);
}

void trim_trailing_space(std::string& text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
}

}  // namespace

Result<KubeConfig> parse_kubeconfig(std::string_view text, const std::string& where,
                                    const std::string& base_dir, const std::string& context) {
  std::string prefix = where + ": ";
  SHOAL_ASSIGN_OR_RETURN(YAML::Node root, model::load_yaml(text, where));
  if (!root.IsMap()) return invalid_argument(prefix + "expected a kubeconfig (a mapping with clusters, users, contexts)");
  std::string chosen = context;
  if (chosen.empty()) {
    SHOAL_ASSIGN_OR_RETURN(chosen, text_of(root, "current-context", prefix, ""));
    if (chosen.empty()) return invalid_argument(prefix + "current-context: expected a context's name");
  }
  SHOAL_ASSIGN_OR_RETURN(auto context_entry, named_entry(root, "contexts", "context", chosen, prefix));
  const auto& [context_node, context_path] = context_entry;
  SHOAL_ASSIGN_OR_RETURN(std::string cluster_name, text_of(context_node, "cluster", prefix, context_path));
  SHOAL_ASSIGN_OR_RETURN(std::string user_name, text_of(context_node, "user", prefix, context_path));
  KubeConfig config;
  SHOAL_ASSIGN_OR_RETURN(config.namespace_name, text_of(context_node, "namespace", prefix, context_path));
  if (config.namespace_name.empty()) config.namespace_name = "default";

  SHOAL_ASSIGN_OR_RETURN(auto cluster_entry, named_entry(root, "clusters", "cluster", cluster_name, prefix));
  const auto& [cluster, cluster_path] = cluster_entry;
  SHOAL_ASSIGN_OR_RETURN(config.server, text_of(cluster, "server", prefix, cluster_path));
  if (!config.server.starts_with("https://") && !config.server.starts_with("http://")) {
    return invalid_argument(prefix + cluster_path + ".server: expected https://HOST:PORT, got \"" +
                            config.server + "\"");
  }
  while (config.server.ends_with("/")) config.server.pop_back();
  if (const YAML::Node skip = cluster["insecure-skip-tls-verify"]; skip && skip.IsScalar() && skip.Scalar() == "true") {
    return invalid_argument(prefix + cluster_path +
                            ".insecure-skip-tls-verify: not supported; give the cluster's CA "
                            "(certificate-authority or certificate-authority-data)");
  }
  SHOAL_ASSIGN_OR_RETURN(config.ca_pem,
                         file_or_data(cluster, "certificate-authority", prefix, cluster_path, base_dir));

  SHOAL_ASSIGN_OR_RETURN(auto user_entry, named_entry(root, "users", "user", user_name, prefix));
  const auto& [user, user_path] = user_entry;
  SHOAL_ASSIGN_OR_RETURN(config.token, text_of(user, "token", prefix, user_path));
  if (config.token.empty()) {
    SHOAL_ASSIGN_OR_RETURN(std::string token_file, text_of(user, "tokenFile", prefix, user_path));
    if (!token_file.empty()) {
      std::filesystem::path resolved(token_file);
      if (resolved.is_relative()) resolved = std::filesystem::path(base_dir) / resolved;
      config.token_file = resolved.string();
      SHOAL_ASSIGN_OR_RETURN(config.token, read_token_file(config.token_file, prefix + user_path + ".tokenFile"));
    }
  }
  SHOAL_ASSIGN_OR_RETURN(config.client_cert_pem,
                         file_or_data(user, "client-certificate", prefix, user_path, base_dir));
  SHOAL_ASSIGN_OR_RETURN(config.client_key_pem, file_or_data(user, "client-key", prefix, user_path, base_dir));
  if (config.client_cert_pem.empty() != config.client_key_pem.empty()) {
    return invalid_argument(prefix + user_path + ": expected both client-certificate and client-key, or neither");
  }
  if (user["exec"] || user["auth-provider"]) {
    return invalid_argument(prefix + user_path +
                            ": exec and auth-provider credentials are not supported; use a token "
                            "or a client certificate (e.g. a service account's token)");
  }
  if (config.token.empty() && config.client_cert_pem.empty()) {
    return invalid_argument(prefix + user_path + ": expected a token, tokenFile or client certificate");
  }
  return config;
}

Result<std::string> read_token_file(const std::string& path, const std::string& field) {
  SHOAL_ASSIGN_OR_RETURN(std::string token, read_bounded_file(path, kMaxCredentialBytes, field));
  trim_trailing_space(token);
  if (token.empty()) return invalid_argument(field + ": " + path + " holds no token");
  return token;
}

Result<KubeConfig> load_kubeconfig(const std::string& path, const std::string& context) {
  SHOAL_ASSIGN_OR_RETURN(std::string text, read_bounded_file(path, kMaxCredentialBytes, "kubeconfig"));
  std::string base_dir = std::filesystem::path(path).parent_path().string();
  return parse_kubeconfig(text, "kubeconfig " + path, base_dir.empty() ? "." : base_dir, context);
}

Result<KubeConfig> in_cluster_config(const std::string& secrets_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (!host || !*host || !port || !*port) {
    return invalid_argument(
        "inCluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set (not in a pod?)");
  }
  KubeConfig config;
  std::string address = host;
  if (address.find(':') != std::string::npos) address = "[" + address + "]";  // IPv6
  config.server = "https://" + address + ":" + port;
  config.token_file = secrets_dir + "/token";
  SHOAL_ASSIGN_OR_RETURN(config.token, read_token_file(config.token_file, "inCluster token"));
  SHOAL_ASSIGN_OR_RETURN(config.ca_pem, read_bounded_file(secrets_dir + "/ca.crt", kMaxCredentialBytes, "inCluster CA"));
  SHOAL_ASSIGN_OR_RETURN(config.namespace_name,
                         read_bounded_file(secrets_dir + "/namespace", kMaxCredentialBytes, "inCluster namespace"));
  trim_trailing_space(config.namespace_name);
  return config;
}

}  // namespace shoal::cluster::kubernetes
