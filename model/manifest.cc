#include "model/manifest.h"

#include <functional>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "model/placement_parse.h"
#include "model/quota.h"
#include "model/yaml_document.h"
#include "model/yaml_fields.h"

namespace shoal::model {
namespace {

using detail::Fields;

Result<WorkloadSpec> parse_workload_document(const YAML::Node& doc, int index) {
  Fields f("manifest document " + std::to_string(index) + " ");
  SHOAL_RETURN_IF_ERROR(f.header(doc, "Workload"));
  SHOAL_RETURN_IF_ERROR(f.only_known(doc, "", {"apiVersion", "kind", "metadata", "spec"}));
  WorkloadSpec spec;
  const YAML::Node metadata = doc["metadata"];
  if (!metadata) return f.fail("metadata", "expected a mapping with name and namespace");
  SHOAL_RETURN_IF_ERROR(f.only_known(metadata, "metadata", {"name", "namespace", "labels"}));
  if (!metadata["name"]) return f.fail("metadata.name", "expected a name, got nothing");
  SHOAL_ASSIGN_OR_RETURN(spec.name, f.scalar(metadata["name"], "metadata.name"));
  SHOAL_RETURN_IF_ERROR(validate_name(spec.name, "manifest document " + std::to_string(index) +
                                                     " metadata.name"));
  if (metadata["namespace"]) {
    SHOAL_ASSIGN_OR_RETURN(spec.namespace_name,
                           f.scalar(metadata["namespace"], "metadata.namespace"));
    SHOAL_RETURN_IF_ERROR(validate_name(
        spec.namespace_name, "manifest document " + std::to_string(index) + " metadata.namespace"));
  }
  SHOAL_ASSIGN_OR_RETURN(spec.labels, f.labels(metadata["labels"], "metadata.labels"));
  // A workload's labels are its pods' on a Kubernetes target: refused here,
  // at submit, rather than by that target's API server.
  for (const auto& [key, value] : spec.labels) {
    SHOAL_RETURN_IF_ERROR(validate_kubernetes_label(
        key, value, "manifest document " + std::to_string(index) + " metadata.labels"));
  }

  const YAML::Node body = doc["spec"];
  if (!body) return f.fail("spec", "expected a mapping with resources");
  SHOAL_RETURN_IF_ERROR(f.only_known(
      body, "spec",
      {"queue", "priority", "replicas", "resources", "duration", "exitCode", "sim", "command",
       "args", "env", "workingDir", "image", "terminationGracePeriod", "startTimeout", "placement", "nodeSelector",
       "minAvailable", "restartPolicy", "preemptionPolicy", "maxDisruptions", "maxRestarts"}));
  if (body["queue"]) {
    SHOAL_ASSIGN_OR_RETURN(spec.queue, f.scalar(body["queue"], "spec.queue"));
    SHOAL_RETURN_IF_ERROR(
        validate_name(spec.queue, "manifest document " + std::to_string(index) + " spec.queue"));
  }
  if (body["priority"]) {
    SHOAL_ASSIGN_OR_RETURN(int64_t priority,
                           f.integer(body["priority"], "spec.priority", -kMaxPriority, kMaxPriority));
    spec.priority = static_cast<int32_t>(priority);
  }
  if (body["replicas"]) {
    SHOAL_ASSIGN_OR_RETURN(int64_t replicas,
                           f.integer(body["replicas"], "spec.replicas", 1, 10000));
    spec.replicas = static_cast<int32_t>(replicas);
  }
  SHOAL_ASSIGN_OR_RETURN(spec.resources, f.resources(body["resources"], "spec.resources"));
  if (spec.resources.is_zero()) {
    return f.fail("spec.resources", "expected at least one of cpu, memory, gpu above zero");
  }
  // Sim settings: spec.sim {duration, exitCode}; the top-level spellings
  // are the older form of the same two settings.
  const std::string where = "manifest document " + std::to_string(index) + " ";
  auto read_sim = [&](const YAML::Node& holder, const std::string& path) -> Status {
    if (holder["duration"]) {
      SHOAL_ASSIGN_OR_RETURN(std::string text, f.scalar(holder["duration"], path + "duration"));
      SHOAL_ASSIGN_OR_RETURN(spec.sim.duration, parse_duration(text, where + path + "duration"));
    }
    if (holder["exitCode"]) {
      SHOAL_ASSIGN_OR_RETURN(int64_t code, f.integer(holder["exitCode"], path + "exitCode", 0, 255));
      spec.sim.exit_code = static_cast<int32_t>(code);
    }
    return Status::ok();
  };
  SHOAL_RETURN_IF_ERROR(read_sim(body, "spec."));
  if (const YAML::Node sim = body["sim"]) {
    SHOAL_RETURN_IF_ERROR(f.only_known(sim, "spec.sim", {"duration", "exitCode"}));
    SHOAL_RETURN_IF_ERROR(read_sim(sim, "spec.sim."));
  }
  // What a real backend runs. Like a Kubernetes container: command and args
  // are lists; a single string is a one-word command.
  auto words = [&](const char* key) -> Result<std::vector<std::string>> {
    const YAML::Node node = body[key];
    if (!node) return std::vector<std::string>{};
    if (node.IsScalar()) return std::vector<std::string>{node.Scalar()};
    return f.strings(node, std::string("spec.") + key);
  };
  SHOAL_ASSIGN_OR_RETURN(spec.command, words("command"));
  SHOAL_ASSIGN_OR_RETURN(spec.args, words("args"));
  if (!spec.args.empty() && spec.command.empty()) {
    return f.fail("spec.args", "expected spec.command too (args are appended to it)");
  }
  if (!spec.command.empty() && spec.command.front().empty()) {
    return f.fail("spec.command", "expected a program name first, got \"\"");
  }
  if (const YAML::Node env = body["env"]) {
    if (env.IsSequence()) {  // Kubernetes' form: [{name, value}]
      for (size_t i = 0; i < env.size(); ++i) {
        std::string path = "spec.env[" + std::to_string(i) + "]";
        SHOAL_RETURN_IF_ERROR(f.only_known(env[i], path, {"name", "value"}));
        if (!env[i]["name"]) return f.fail(path + ".name", "expected a variable name");
        SHOAL_ASSIGN_OR_RETURN(std::string name, f.scalar(env[i]["name"], path + ".name"));
        std::string value;
        if (env[i]["value"]) {
          SHOAL_ASSIGN_OR_RETURN(value, f.scalar(env[i]["value"], path + ".value"));
        }
        spec.env[name] = value;
      }
    } else {
      SHOAL_ASSIGN_OR_RETURN(spec.env, f.labels(env, "spec.env"));
    }
    for (const auto& [name, value] : spec.env) {
      if (name.empty() || name.find_first_of("=\0") != std::string::npos ||
          value.find('\0') != std::string::npos) {
        return f.fail("spec.env", "expected variable names without '=' or NUL, got \"" + name + "\"");
      }
    }
  }
  if (body["workingDir"]) {
    SHOAL_ASSIGN_OR_RETURN(spec.working_dir, f.scalar(body["workingDir"], "spec.workingDir"));
  }
  if (body["image"]) {
    SHOAL_ASSIGN_OR_RETURN(spec.image, f.scalar(body["image"], "spec.image"));
    SHOAL_RETURN_IF_ERROR(validate_image(spec.image, where + "spec.image"));
  }
  if (body["terminationGracePeriod"]) {
    SHOAL_ASSIGN_OR_RETURN(std::string text, f.scalar(body["terminationGracePeriod"],
                                                      "spec.terminationGracePeriod"));
    SHOAL_ASSIGN_OR_RETURN(spec.termination_grace,
                           parse_duration(text, where + "spec.terminationGracePeriod"));
  }
  if (body["startTimeout"]) {
    SHOAL_ASSIGN_OR_RETURN(std::string text, f.scalar(body["startTimeout"], "spec.startTimeout"));
    SHOAL_ASSIGN_OR_RETURN(spec.start_timeout, parse_duration(text, where + "spec.startTimeout"));
  }
  SHOAL_ASSIGN_OR_RETURN(spec.node_selector, f.labels(body["nodeSelector"], "spec.nodeSelector"));
  if (body["minAvailable"]) {
    SHOAL_ASSIGN_OR_RETURN(int64_t min_available,
                           f.integer(body["minAvailable"], "spec.minAvailable", 1, spec.replicas));
    spec.min_available = static_cast<int32_t>(min_available);
  }
  for (auto [key, out] : {std::pair{"maxDisruptions", &spec.max_disruptions},
                          std::pair{"maxRestarts", &spec.max_restarts}}) {
    if (!body[key]) continue;
    SHOAL_ASSIGN_OR_RETURN(int64_t budget, f.integer(body[key], std::string("spec.") + key, 0, kMaxBudget));
    *out = static_cast<int32_t>(budget);
  }
  if (body["preemptionPolicy"]) {
    SHOAL_ASSIGN_OR_RETURN(std::string policy,
                           f.scalar(body["preemptionPolicy"], "spec.preemptionPolicy"));
    if (policy == "Never") spec.preemption_policy = PreemptionPolicy::kNever;
    else if (policy != "PreemptLowerPriority") {
      return f.fail("spec.preemptionPolicy",
                    "expected PreemptLowerPriority or Never, got \"" + policy + "\"");
    }
  }
  if (body["restartPolicy"]) {
    SHOAL_ASSIGN_OR_RETURN(std::string policy, f.scalar(body["restartPolicy"], "spec.restartPolicy"));
    if (policy == "OnFailure") spec.restart_policy = RestartPolicy::kOnFailure;
    else if (policy != "Never") {
      return f.fail("spec.restartPolicy", "expected Never or OnFailure, got \"" + policy + "\"");
    }
  }
  if (body["placement"]) {
    SHOAL_ASSIGN_OR_RETURN(
        spec.placement,
        parse_placement(body["placement"],
                        "manifest document " + std::to_string(index) + " spec.placement"));
  }
  return spec;
}

struct Document {
  std::string text;
  int first_line = 1;  // 1-based line of the stream where this document starts
};

// Splits a YAML stream into documents at "---" lines, as Kubernetes' YAML
// reader does. yaml-cpp 0.7's LoadAll can loop forever on malformed input
// (found by fuzzing: ",;."), so each document goes through Load instead.
std::vector<Document> split_documents(std::string_view stream) {
  std::vector<Document> out(1);
  int line_number = 0;
  size_t start = 0;
  while (start <= stream.size()) {
    size_t end = stream.find('\n', start);
    if (end == std::string_view::npos) end = stream.size();
    std::string_view line = stream.substr(start, end - start);
    ++line_number;
    bool marker = line.substr(0, 3) == "---" &&
                  (line.size() == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r');
    if (marker) {
      out.push_back({std::string(line.substr(3)) + "\n", line_number});
    } else if (line.substr(0, 3) == "..." && line.find_first_not_of(" \t\r", 3) == std::string_view::npos) {
      // An explicit document end: what follows before the next "---" is ignored.
      out.push_back({"", line_number});
    } else {
      out.back().text.append(line).append("\n");
    }
    start = end + 1;
  }
  return out;
}

// Checks a manifest's documents one at a time, as each is read: its fields,
// and that no workload is named twice. The YAML and the JSON reader share
// it, so a document means the same whichever form it came in.
class WorkloadDocuments {
 public:
  // The spec of the next document; nullopt for an empty one (nothing
  // between two "---"), which is skipped.
  Result<std::optional<WorkloadSpec>> check(const YAML::Node& doc) {
    if (doc.IsNull()) return std::optional<WorkloadSpec>();
    ++index_;
    Result<WorkloadSpec> spec = [&]() -> Result<WorkloadSpec> {
      try {
        return parse_workload_document(doc, index_);
      } catch (const YAML::Exception& e) {
        return invalid_argument("manifest document " + std::to_string(index_) + ": " + e.msg);
      }
    }();
    if (!spec.is_ok()) return spec.status();
    if (!seen_.insert(spec->key()).second) {
      return invalid_argument("manifest document " + std::to_string(index_) + " metadata.name: \"" +
                              spec->key() + "\" appears twice in this file");
    }
    return std::optional<WorkloadSpec>(std::move(spec).value());
  }

  Status finished() const {
    if (index_ == 0) return invalid_argument("manifest: expected at least one Workload document");
    return Status::ok();
  }

 private:
  int index_ = 0;  // documents read that were not empty
  std::set<std::string> seen_;
};

// Each Workload document of a YAML stream, checked (WorkloadDocuments),
// handed to `take` with its spec; empty documents are skipped. One
// document at a time: a parsed YAML tree costs many times its text, so
// holding every tree of a 20,000-document manifest at once cost the agent
// hundreds of MB it never gave back.
Status for_each_workload(std::string_view yaml,
                         const std::function<Status(const YAML::Node&, WorkloadSpec)>& take) {
  if (yaml.size() > kMaxYamlBytes) return load_yaml(yaml, "manifest").status();
  WorkloadDocuments documents;
  for (const Document& document : split_documents(yaml)) {
    SHOAL_ASSIGN_OR_RETURN(YAML::Node doc, load_yaml(document.text, "manifest", document.first_line));
    SHOAL_ASSIGN_OR_RETURN(std::optional<WorkloadSpec> spec, documents.check(doc));
    if (spec) {
      SHOAL_RETURN_IF_ERROR(take(doc, std::move(*spec)));
    }
  }
  return documents.finished();
}

}  // namespace

Result<std::vector<WorkloadSpec>> parse_workloads(std::string_view yaml) {
  std::vector<WorkloadSpec> out;
  SHOAL_RETURN_IF_ERROR(for_each_workload(yaml, [&](const YAML::Node&, WorkloadSpec spec) {
    out.push_back(std::move(spec));
    return Status::ok();
  }));
  return out;
}

Result<std::vector<nlohmann::json>> workload_documents_as_json(std::string_view yaml) {
  std::vector<nlohmann::json> out;
  SHOAL_RETURN_IF_ERROR(for_each_workload(yaml, [&](const YAML::Node& doc, WorkloadSpec) -> Status {
    SHOAL_ASSIGN_OR_RETURN(nlohmann::json json,
                           yaml_to_json(doc, "manifest document " + std::to_string(out.size() + 1)));
    out.push_back(std::move(json));
    return Status::ok();
  }));
  return out;
}

Result<std::vector<WorkloadSpec>> parse_workload_list(const nlohmann::json& documents) {
  if (!documents.is_array()) return invalid_argument("workloads: expected a list of Workload documents");
  std::vector<WorkloadSpec> out;
  WorkloadDocuments checked;
  for (size_t i = 0; i < documents.size(); ++i) {
    // Each is a mapping: a null would be skipped as an empty YAML document is.
    if (!documents[i].is_object()) {
      return invalid_argument("manifest document " + std::to_string(i + 1) +
                              ": expected a mapping with apiVersion, kind, metadata, spec");
    }
    SHOAL_ASSIGN_OR_RETURN(YAML::Node doc,
                           json_to_yaml(documents[i], "manifest document " + std::to_string(i + 1)));
    SHOAL_ASSIGN_OR_RETURN(std::optional<WorkloadSpec> spec, checked.check(doc));
    if (spec) out.push_back(std::move(*spec));
  }
  SHOAL_RETURN_IF_ERROR(checked.finished());
  return out;
}

namespace {

Result<QuotaSpec> parse_quota_document(const YAML::Node& doc, int index) {
  Fields f("quota document " + std::to_string(index) + " ");
  SHOAL_RETURN_IF_ERROR(f.header(doc, "Quota"));
  SHOAL_RETURN_IF_ERROR(f.only_known(doc, "", {"apiVersion", "kind", "metadata", "spec"}));
  const YAML::Node metadata = doc["metadata"];
  if (!metadata) return f.fail("metadata", "expected a mapping with namespace");
  SHOAL_RETURN_IF_ERROR(f.only_known(metadata, "metadata", {"name", "namespace"}));
  if (metadata["name"]) {
    SHOAL_ASSIGN_OR_RETURN(std::string name, f.scalar(metadata["name"], "metadata.name"));
    SHOAL_RETURN_IF_ERROR(validate_name(name, f.prefix() + "metadata.name"));
  }
  std::string namespace_name = "default";
  if (metadata["namespace"]) {
    SHOAL_ASSIGN_OR_RETURN(namespace_name, f.scalar(metadata["namespace"], "metadata.namespace"));
  }
  const YAML::Node body = doc["spec"];
  if (!body || !body["hard"]) return f.fail("spec.hard", "expected a mapping of cpu, memory, gpu, workloads");
  SHOAL_RETURN_IF_ERROR(f.only_known(body, "spec", {"hard"}));
  SHOAL_RETURN_IF_ERROR(f.only_known(body["hard"], "spec.hard", {"cpu", "memory", "gpu", "workloads"}));
  SHOAL_ASSIGN_OR_RETURN(Labels hard, f.labels(body["hard"], "spec.hard"));
  auto text = [&](const char* key) { return hard.count(key) ? hard.at(key) : std::string(); };
  Result<QuotaSpec> quota =
      quota_from_text(namespace_name, text("cpu"), text("memory"), text("gpu"), text("workloads"));
  if (!quota.is_ok()) return invalid_argument(f.prefix() + quota.status().message());
  return quota;
}

}  // namespace

Result<std::vector<QuotaSpec>> parse_quotas(std::string_view yaml) {
  if (yaml.size() > kMaxYamlBytes) return load_yaml(yaml, "quota manifest").status();
  std::vector<QuotaSpec> out;
  std::set<std::string> seen;
  int index = 0;
  for (const Document& document : split_documents(yaml)) {
    SHOAL_ASSIGN_OR_RETURN(YAML::Node doc, load_yaml(document.text, "quota manifest", document.first_line));
    if (doc.IsNull()) continue;
    ++index;
    Result<QuotaSpec> quota = [&]() -> Result<QuotaSpec> {
      try {
        return parse_quota_document(doc, index);
      } catch (const YAML::Exception& e) {
        return invalid_argument("quota document " + std::to_string(index) + ": " + e.msg);
      }
    }();
    if (!quota.is_ok()) return quota.status();
    if (!seen.insert(quota->namespace_name).second) {
      return invalid_argument("quota document " + std::to_string(index) + " metadata.namespace: \"" +
                              quota->namespace_name + "\" has a quota earlier in this file");
    }
    out.push_back(std::move(quota).value());
  }
  if (out.empty()) return invalid_argument("quota manifest: expected at least one Quota document");
  return out;
}

ClusterSpec default_cluster_spec(const std::string& name) {
  ClusterSpec spec;
  spec.name = name;
  for (int i = 0; i < 4; ++i) {
    spec.nodes.push_back({"node-" + std::to_string(i),
                          Resources{8000, int64_t{32} << 30, 0},
                          {}});
  }
  spec.queues.push_back({"default", 1});
  return spec;
}

namespace {

Result<SlurmSpec> parse_slurm(Fields& f, const YAML::Node& slurm) {
  if (!slurm || !slurm.IsMap()) {
    return f.fail("spec.slurm", "expected a mapping with endpoint (backend slurm)");
  }
  SHOAL_RETURN_IF_ERROR(f.only_known(slurm, "spec.slurm",
                                     {"endpoint", "tokenFile", "userName", "partition", "account",
                                      "apiVersion", "outputDir", "completionLog", "timeout"}));
  SlurmSpec spec;
  if (!slurm["endpoint"]) {
    return f.fail("spec.slurm.endpoint", "expected unix:///path/to/slurmrestd.sock or http://host:port");
  }
  SHOAL_ASSIGN_OR_RETURN(spec.endpoint, f.scalar(slurm["endpoint"], "spec.slurm.endpoint"));
  bool over_unix = spec.endpoint.rfind("unix://", 0) == 0;
  if (!over_unix && spec.endpoint.rfind("http://", 0) != 0) {
    return f.fail("spec.slurm.endpoint", "expected unix:///path/to/slurmrestd.sock or http://host:port, got \"" +
                                             spec.endpoint + "\"");
  }
  auto optional_text = [&](const char* key, std::string& out) -> Status {
    if (!slurm[key]) return Status::ok();
    SHOAL_ASSIGN_OR_RETURN(out, f.scalar(slurm[key], std::string("spec.slurm.") + key));
    return Status::ok();
  };
  SHOAL_RETURN_IF_ERROR(optional_text("tokenFile", spec.token_file));
  SHOAL_RETURN_IF_ERROR(optional_text("userName", spec.user_name));
  SHOAL_RETURN_IF_ERROR(optional_text("partition", spec.partition));
  SHOAL_RETURN_IF_ERROR(optional_text("account", spec.account));
  SHOAL_RETURN_IF_ERROR(optional_text("apiVersion", spec.api_version));
  SHOAL_RETURN_IF_ERROR(optional_text("outputDir", spec.output_dir));
  SHOAL_RETURN_IF_ERROR(optional_text("completionLog", spec.completion_log));
  if (spec.api_version != "v0.0.38") {
    return f.fail("spec.slurm.apiVersion", "expected v0.0.38 (Slurm 22.05), got \"" + spec.api_version + "\"");
  }
  if (!over_unix && (spec.token_file.empty() || spec.user_name.empty())) {
    return f.fail("spec.slurm.tokenFile",
                  "expected a JWT file and spec.slurm.userName with an http:// endpoint");
  }
  for (const std::string* path : {&spec.output_dir, &spec.completion_log, &spec.token_file}) {
    if (!path->empty() && (*path)[0] != '/') {
      return f.fail("spec.slurm", "expected absolute paths, got \"" + *path + "\"");
    }
  }
  if (slurm["timeout"]) {
    SHOAL_ASSIGN_OR_RETURN(std::string text, f.scalar(slurm["timeout"], "spec.slurm.timeout"));
    SHOAL_ASSIGN_OR_RETURN(Duration timeout,
                           parse_duration(text, "cluster manifest spec.slurm.timeout"));
    if (timeout < std::chrono::milliseconds(10) || timeout > std::chrono::minutes(1)) {
      return f.fail("spec.slurm.timeout", "expected a duration from 10ms to 1m");
    }
    spec.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
  }
  return spec;
}

Result<Toleration> parse_toleration(Fields& f, const YAML::Node& node, const std::string& path) {
  if (!node.IsMap()) return f.fail(path, "expected a mapping with key, operator, value, effect");
  SHOAL_RETURN_IF_ERROR(f.only_known(node, path, {"key", "operator", "value", "effect", "tolerationSeconds"}));
  Toleration toleration;
  if (node["key"]) {
    SHOAL_ASSIGN_OR_RETURN(toleration.key, f.scalar(node["key"], path + ".key"));
  }
  std::string op = "Equal";
  if (node["operator"]) {
    SHOAL_ASSIGN_OR_RETURN(op, f.scalar(node["operator"], path + ".operator"));
  }
  if (op != "Equal" && op != "Exists") return f.fail(path + ".operator", "expected Equal or Exists, got \"" + op + "\"");
  toleration.exists = op == "Exists";
  if (node["value"]) {
    SHOAL_ASSIGN_OR_RETURN(toleration.value, f.scalar(node["value"], path + ".value"));
  }
  if (toleration.exists && !toleration.value.empty()) {
    return f.fail(path + ".value", "expected none with operator Exists");
  }
  if (toleration.key.empty() && !toleration.exists) return f.fail(path + ".key", "expected a key (or operator Exists)");
  if (!toleration.key.empty()) {
    SHOAL_RETURN_IF_ERROR(validate_kubernetes_label(toleration.key, toleration.value, path));
  }
  if (node["effect"]) {
    SHOAL_ASSIGN_OR_RETURN(toleration.effect, f.scalar(node["effect"], path + ".effect"));
  }
  if (!toleration.effect.empty() && toleration.effect != "NoSchedule" && toleration.effect != "PreferNoSchedule" &&
      toleration.effect != "NoExecute") {
    return f.fail(path + ".effect", "expected NoSchedule, PreferNoSchedule or NoExecute, got \"" + toleration.effect + "\"");
  }
  if (node["tolerationSeconds"]) {
    if (toleration.effect != "NoExecute") return f.fail(path + ".tolerationSeconds", "expected only with effect NoExecute");
    SHOAL_ASSIGN_OR_RETURN(toleration.seconds,
                           f.integer(node["tolerationSeconds"], path + ".tolerationSeconds", 0, 1'000'000'000));
  }
  return toleration;
}

// What the agent's pods carry besides the workload's own: tolerations,
// priority class, pull secrets, annotations, the user they run as.
Status parse_pod_fields(Fields& f, const YAML::Node& node, KubernetesSpec* spec) {
  if (const YAML::Node tolerations = node["tolerations"]) {
    if (!tolerations.IsSequence()) return f.fail("spec.kubernetes.tolerations", "expected a list of tolerations");
    for (size_t i = 0; i < tolerations.size(); ++i) {
      SHOAL_ASSIGN_OR_RETURN(Toleration toleration,
                             parse_toleration(f, tolerations[i], "spec.kubernetes.tolerations[" + std::to_string(i) + "]"));
      spec->tolerations.push_back(std::move(toleration));
    }
  }
  if (node["priorityClassName"]) {
    SHOAL_ASSIGN_OR_RETURN(spec->priority_class_name,
                           f.scalar(node["priorityClassName"], "spec.kubernetes.priorityClassName"));
    SHOAL_RETURN_IF_ERROR(validate_dns_subdomain(spec->priority_class_name, "cluster manifest spec.kubernetes.priorityClassName"));
  }
  if (const YAML::Node secrets = node["imagePullSecrets"]) {
    if (!secrets.IsSequence()) return f.fail("spec.kubernetes.imagePullSecrets", "expected a list of Secret names");
    for (size_t i = 0; i < secrets.size(); ++i) {
      std::string path = "spec.kubernetes.imagePullSecrets[" + std::to_string(i) + "]";
      SHOAL_ASSIGN_OR_RETURN(std::string name, f.scalar(secrets[i], path));
      SHOAL_RETURN_IF_ERROR(validate_dns_subdomain(name, "cluster manifest " + path));
      spec->image_pull_secrets.push_back(std::move(name));
    }
  }
  SHOAL_ASSIGN_OR_RETURN(spec->annotations, f.labels(node["annotations"], "spec.kubernetes.annotations"));
  for (const auto& [key, value] : spec->annotations) {
    SHOAL_RETURN_IF_ERROR(validate_kubernetes_label(key, "", "cluster manifest spec.kubernetes.annotations"));
  }
  if (const YAML::Node security = node["securityContext"]) {
    if (!security.IsMap()) return f.fail("spec.kubernetes.securityContext", "expected a mapping with runAsUser, runAsGroup");
    SHOAL_RETURN_IF_ERROR(f.only_known(security, "spec.kubernetes.securityContext", {"runAsUser", "runAsGroup"}));
    if (security["runAsUser"]) {
      SHOAL_ASSIGN_OR_RETURN(spec->run_as_user, f.integer(security["runAsUser"], "spec.kubernetes.securityContext.runAsUser",
                                                           0, 2147483647));
    }
    if (security["runAsGroup"]) {
      SHOAL_ASSIGN_OR_RETURN(spec->run_as_group, f.integer(security["runAsGroup"],
                                                            "spec.kubernetes.securityContext.runAsGroup", 0, 2147483647));
    }
  }
  return Status::ok();
}

Result<KubernetesSpec> parse_kubernetes(Fields& f, const YAML::Node& node) {
  if (!node || !node.IsMap()) {
    return f.fail("spec.kubernetes", "expected a mapping with kubeconfig or inCluster: true (backend kubernetes)");
  }
  SHOAL_RETURN_IF_ERROR(f.only_known(node, "spec.kubernetes",
                                     {"kubeconfig", "context", "inCluster", "nodeSelector", "image", "timeout",
                                      "parallelCalls", "tolerations", "priorityClassName", "imagePullSecrets", "annotations",
                                      "securityContext"}));
  KubernetesSpec spec;
  if (node["kubeconfig"]) {
    SHOAL_ASSIGN_OR_RETURN(spec.kubeconfig, f.scalar(node["kubeconfig"], "spec.kubernetes.kubeconfig"));
  }
  if (node["context"]) {
    SHOAL_ASSIGN_OR_RETURN(spec.context, f.scalar(node["context"], "spec.kubernetes.context"));
  }
  if (node["inCluster"]) {
    SHOAL_ASSIGN_OR_RETURN(std::string text, f.scalar(node["inCluster"], "spec.kubernetes.inCluster"));
    if (text != "true" && text != "false") return f.fail("spec.kubernetes.inCluster", "expected true or false");
    spec.in_cluster = text == "true";
  }
  if (spec.in_cluster == !spec.kubeconfig.empty()) {
    return f.fail("spec.kubernetes", "expected either kubeconfig: PATH or inCluster: true");
  }
  if (!spec.kubeconfig.empty() && spec.kubeconfig[0] != '/') {
    return f.fail("spec.kubernetes.kubeconfig", "expected an absolute path, got \"" + spec.kubeconfig + "\"");
  }
  SHOAL_ASSIGN_OR_RETURN(spec.node_selector, f.labels(node["nodeSelector"], "spec.kubernetes.nodeSelector"));
  if (node["image"]) {
    SHOAL_ASSIGN_OR_RETURN(spec.image, f.scalar(node["image"], "spec.kubernetes.image"));
    if (spec.image.empty()) return f.fail("spec.kubernetes.image", "expected an image reference");
  }
  if (node["timeout"]) {
    SHOAL_ASSIGN_OR_RETURN(std::string text, f.scalar(node["timeout"], "spec.kubernetes.timeout"));
    SHOAL_ASSIGN_OR_RETURN(Duration timeout, parse_duration(text, "cluster manifest spec.kubernetes.timeout"));
    if (timeout < std::chrono::milliseconds(10) || timeout > std::chrono::minutes(1)) {
      return f.fail("spec.kubernetes.timeout", "expected a duration from 10ms to 1m");
    }
    spec.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
  }
  if (node["parallelCalls"]) {
    SHOAL_ASSIGN_OR_RETURN(int64_t calls, f.integer(node["parallelCalls"], "spec.kubernetes.parallelCalls", 1, 64));
    spec.parallel_calls = static_cast<int>(calls);
  }
  SHOAL_RETURN_IF_ERROR(parse_pod_fields(f, node, &spec));
  return spec;
}

Result<ClusterSpec> parse_cluster_document(const YAML::Node& doc) {
  Fields f("cluster manifest ");
  SHOAL_RETURN_IF_ERROR(f.header(doc, "Cluster"));
  SHOAL_RETURN_IF_ERROR(f.only_known(doc, "", {"apiVersion", "kind", "metadata", "spec"}));
  ClusterSpec spec;
  const YAML::Node metadata = doc["metadata"];
  if (!metadata) return f.fail("metadata", "expected a mapping with name");
  SHOAL_RETURN_IF_ERROR(f.only_known(metadata, "metadata", {"name", "labels"}));
  if (!metadata["name"]) return f.fail("metadata.name", "expected a name, got nothing");
  SHOAL_ASSIGN_OR_RETURN(spec.name, f.scalar(metadata["name"], "metadata.name"));
  SHOAL_RETURN_IF_ERROR(validate_name(spec.name, "cluster manifest metadata.name"));
  SHOAL_ASSIGN_OR_RETURN(spec.labels, f.labels(metadata["labels"], "metadata.labels"));
  const YAML::Node body = doc["spec"];
  if (!body) return f.fail("spec", "expected a mapping with nodes");
  SHOAL_RETURN_IF_ERROR(f.only_known(
      body, "spec",
      {"claims", "backend", "nodes", "queues", "resourceQuotas", "fairShare", "nodeOrder", "preemption", "slurm",
       "kubernetes"}));
  SHOAL_ASSIGN_OR_RETURN(spec.claims, f.labels(body["claims"], "spec.claims"));
  if (body["backend"]) {
    SHOAL_ASSIGN_OR_RETURN(spec.backend, f.scalar(body["backend"], "spec.backend"));
    if (spec.backend != "sim" && spec.backend != "exec" && spec.backend != "slurm" &&
        spec.backend != "kubernetes") {
      return f.fail("spec.backend", "expected \"sim\", \"exec\", \"slurm\" or \"kubernetes\", got \"" +
                                        spec.backend + "\"");
    }
  }
  if (spec.backend == "slurm") {
    SHOAL_ASSIGN_OR_RETURN(spec.slurm, parse_slurm(f, body["slurm"]));
    if (body["nodes"]) return f.fail("spec.nodes", "expected none with backend slurm: Slurm's nodes are used");
  } else if (body["slurm"]) {
    return f.fail("spec.slurm", "expected only with backend slurm");
  }
  if (spec.backend == "kubernetes") {
    SHOAL_ASSIGN_OR_RETURN(spec.kubernetes, parse_kubernetes(f, body["kubernetes"]));
    if (body["nodes"]) {
      return f.fail("spec.nodes", "expected none with backend kubernetes: the cluster's Nodes are used");
    }
  } else if (body["kubernetes"]) {
    return f.fail("spec.kubernetes", "expected only with backend kubernetes");
  }
  const bool nodes_elsewhere = spec.backend == "slurm" || spec.backend == "kubernetes";
  const YAML::Node nodes = body["nodes"];
  if (!nodes_elsewhere && (!nodes || !nodes.IsSequence() || nodes.size() == 0)) {
    return f.fail("spec.nodes", "expected a non-empty list of node groups");
  }
  std::set<std::string> names;
  for (size_t i = 0; nodes && i < nodes.size(); ++i) {
    std::string path = "spec.nodes[" + std::to_string(i) + "]";
    const YAML::Node group = nodes[i];
    SHOAL_RETURN_IF_ERROR(f.only_known(group, path, {"name", "count", "capacity", "labels"}));
    if (!group["name"]) return f.fail(path + ".name", "expected a name, got nothing");
    SHOAL_ASSIGN_OR_RETURN(std::string name, f.scalar(group["name"], path + ".name"));
    SHOAL_RETURN_IF_ERROR(validate_name(name, "cluster manifest " + path + ".name"));
    int64_t count = 1;
    bool grouped = static_cast<bool>(group["count"]);
    if (grouped) {
      SHOAL_ASSIGN_OR_RETURN(count, f.integer(group["count"], path + ".count", 1, 100000));
    }
    SHOAL_ASSIGN_OR_RETURN(Resources capacity,
                           f.resources(group["capacity"], path + ".capacity"));
    if (capacity.is_zero()) return f.fail(path + ".capacity", "expected cpu, memory or gpu above zero");
    SHOAL_ASSIGN_OR_RETURN(Labels labels, f.labels(group["labels"], path + ".labels"));
    for (int64_t n = 0; n < count; ++n) {
      std::string node_name = grouped ? name + "-" + std::to_string(n) : name;
      if (!names.insert(node_name).second) {
        return f.fail(path + ".name", "node \"" + node_name + "\" is defined twice");
      }
      spec.nodes.push_back({node_name, capacity, labels});
    }
  }
  std::set<std::string> queue_names;
  if (const YAML::Node queues = body["queues"]) {
    if (!queues.IsSequence()) return f.fail("spec.queues", "expected a list of {name, weight}");
    for (size_t i = 0; i < queues.size(); ++i) {
      std::string path = "spec.queues[" + std::to_string(i) + "]";
      SHOAL_RETURN_IF_ERROR(f.only_known(queues[i], path, {"name", "weight"}));
      QueueSpec queue;
      if (!queues[i]["name"]) return f.fail(path + ".name", "expected a queue name");
      SHOAL_ASSIGN_OR_RETURN(queue.name, f.scalar(queues[i]["name"], path + ".name"));
      SHOAL_RETURN_IF_ERROR(validate_name(queue.name, "cluster manifest " + path + ".name"));
      if (queues[i]["weight"]) {
        SHOAL_ASSIGN_OR_RETURN(queue.weight, f.integer(queues[i]["weight"], path + ".weight", 1, 1000000));
      }
      if (!queue_names.insert(queue.name).second) return f.fail(path + ".name", "queue \"" + queue.name + "\" is defined twice");
      spec.queues.push_back(queue);
    }
  }
  if (spec.queues.empty()) spec.queues.push_back({"default", 1});
  if (const YAML::Node quotas = body["resourceQuotas"]) {
    if (!quotas.IsSequence()) return f.fail("spec.resourceQuotas", "expected a list of {namespace, hard}");
    for (size_t i = 0; i < quotas.size(); ++i) {
      std::string path = "spec.resourceQuotas[" + std::to_string(i) + "]";
      SHOAL_RETURN_IF_ERROR(f.only_known(quotas[i], path, {"namespace", "hard"}));
      ResourceQuotaSpec quota;
      if (!quotas[i]["namespace"]) return f.fail(path + ".namespace", "expected a namespace");
      SHOAL_ASSIGN_OR_RETURN(quota.namespace_name, f.scalar(quotas[i]["namespace"], path + ".namespace"));
      SHOAL_ASSIGN_OR_RETURN(quota.hard, f.labels(quotas[i]["hard"], path + ".hard"));
      spec.resource_quotas.push_back(std::move(quota));
    }
  }
  if (const YAML::Node fair_share = body["fairShare"]) {
    SHOAL_RETURN_IF_ERROR(f.only_known(fair_share, "spec.fairShare", {"borrowing"}));
    if (fair_share["borrowing"]) {
      SHOAL_ASSIGN_OR_RETURN(std::string text, f.scalar(fair_share["borrowing"], "spec.fairShare.borrowing"));
      if (text != "true" && text != "false") return f.fail("spec.fairShare.borrowing", "expected true or false");
      spec.borrowing = text == "true";
    }
  }
  if (body["nodeOrder"]) {
    SHOAL_ASSIGN_OR_RETURN(std::string order, f.scalar(body["nodeOrder"], "spec.nodeOrder"));
    if (order == "LeastAllocated") spec.node_order = NodeOrder::kLeastAllocated;
    else if (order == "MostAllocated") spec.node_order = NodeOrder::kMostAllocated;
    else return f.fail("spec.nodeOrder", "expected LeastAllocated or MostAllocated, got \"" + order + "\"");
  }
  if (const YAML::Node preemption = body["preemption"]) {
    SHOAL_RETURN_IF_ERROR(f.only_known(preemption, "spec.preemption", {"withinQueue", "reclaim"}));
    if (preemption["withinQueue"]) {
      SHOAL_ASSIGN_OR_RETURN(std::string text,
                             f.scalar(preemption["withinQueue"], "spec.preemption.withinQueue"));
      if (text == "LowerPriority") spec.preemption.within_queue = PreemptionSpec::WithinQueue::kLowerPriority;
      else if (text != "Never") {
        return f.fail("spec.preemption.withinQueue", "expected Never or LowerPriority, got \"" + text + "\"");
      }
    }
    if (preemption["reclaim"]) {
      SHOAL_ASSIGN_OR_RETURN(std::string text, f.scalar(preemption["reclaim"], "spec.preemption.reclaim"));
      if (text == "LowerPriority") spec.preemption.reclaim = PreemptionSpec::Reclaim::kLowerPriority;
      else if (text == "Any") spec.preemption.reclaim = PreemptionSpec::Reclaim::kAny;
      else if (text != "Never") {
        return f.fail("spec.preemption.reclaim", "expected Never, LowerPriority or Any, got \"" + text + "\"");
      }
    }
  }
  return spec;
}

}  // namespace

Result<ClusterSpec> parse_cluster(std::string_view yaml) {
  SHOAL_ASSIGN_OR_RETURN(YAML::Node doc, load_yaml(yaml, "cluster manifest"));
  try {
    return parse_cluster_document(doc);
  } catch (const YAML::Exception& e) {
    return invalid_argument("cluster manifest: line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
}

bool Toleration::tolerates(const std::string& taint_key, const std::string& taint_value,
                           const std::string& taint_effect) const {
  if (!effect.empty() && effect != taint_effect) return false;
  if (key.empty()) return exists;
  if (key != taint_key) return false;
  return exists || value == taint_value;
}

}  // namespace shoal::model
