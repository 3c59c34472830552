#include "model/placement_parse.h"

#include <algorithm>
#include <climits>
#include <map>
#include <set>

#include "model/yaml_document.h"
#include "model/yaml_fields.h"

namespace shoal::model {
namespace {

using detail::Fields;

Result<LabelSelector> parse_selector(const Fields& f, const YAML::Node& node,
                                     const std::string& path) {
  LabelSelector selector;
  if (!node) return selector;
  SHOAL_RETURN_IF_ERROR(f.only_known(node, path, {"matchLabels", "matchExpressions"}));
  SHOAL_ASSIGN_OR_RETURN(selector.match_labels, f.labels(node["matchLabels"], path + ".matchLabels"));
  const YAML::Node expressions = node["matchExpressions"];
  if (!expressions) return selector;
  if (!expressions.IsSequence()) return f.fail(path + ".matchExpressions", "expected a list");
  for (size_t i = 0; i < expressions.size(); ++i) {
    std::string item = path + ".matchExpressions[" + std::to_string(i) + "]";
    SHOAL_RETURN_IF_ERROR(f.only_known(expressions[i], item, {"key", "operator", "values"}));
    LabelRequirement requirement;
    if (!expressions[i]["key"]) return f.fail(item + ".key", "expected a label key");
    SHOAL_ASSIGN_OR_RETURN(requirement.key, f.scalar(expressions[i]["key"], item + ".key"));
    std::string op = expressions[i]["operator"] ? expressions[i]["operator"].as<std::string>() : "";
    if (op == "In") requirement.op = LabelRequirement::Operator::kIn;
    else if (op == "NotIn") requirement.op = LabelRequirement::Operator::kNotIn;
    else if (op == "Exists") requirement.op = LabelRequirement::Operator::kExists;
    else if (op == "DoesNotExist") requirement.op = LabelRequirement::Operator::kDoesNotExist;
    else return f.fail(item + ".operator", "expected In, NotIn, Exists or DoesNotExist, got \"" + op + "\"");
    SHOAL_ASSIGN_OR_RETURN(requirement.values, f.strings(expressions[i]["values"], item + ".values"));
    bool needs_values = requirement.op == LabelRequirement::Operator::kIn ||
                        requirement.op == LabelRequirement::Operator::kNotIn;
    if (needs_values == requirement.values.empty()) {
      return f.fail(item + ".values", needs_values ? "expected at least one value for " + op
                                                   : "expected no values for " + op);
    }
    selector.match_expressions.push_back(std::move(requirement));
  }
  return selector;
}

Result<RoutingPolicy> parse_routing(const Fields& f, const YAML::Node& node, const std::string& path,
                                    std::vector<std::string>* spellings) {
  SHOAL_RETURN_IF_ERROR(f.only_known(node, path, {"weights", "metric", "domain"}));
  RoutingPolicy routing;
  const YAML::Node weights = node["weights"];
  if (!weights || !weights.IsMap() || weights.size() == 0) {
    return f.fail(path + ".weights", "expected a mapping of cluster name to weight");
  }
  for (const auto& item : weights) {
    std::string cluster = item.first.as<std::string>();
    SHOAL_ASSIGN_OR_RETURN(int64_t weight,
                           f.integer(item.second, path + ".weights." + cluster, 0, 1000000));
    routing.weights[cluster] = weight;
  }
  std::string metric = node["metric"] ? node["metric"].as<std::string>() : "";
  // The Spark gateway's names for the same metrics.
  static const std::map<std::string, std::string> kSparkGateway = {
      {"None", ""}, {"SparkApp", "workloads"}, {"CPU", "cpu"}, {"Memory", "memory"}, {"Queue_Name", "queue"}};
  if (auto spark = kSparkGateway.find(metric); spark != kSparkGateway.end()) {
    spellings->push_back(".routing.metric " + metric + " (Spark gateway) -> \"" + spark->second + "\"");
    metric = spark->second;
  }
  if (metric == "") routing.metric = RoutingMetric::kRandom;
  else if (metric == "workloads") routing.metric = RoutingMetric::kWorkloads;
  else if (metric == "cpu") routing.metric = RoutingMetric::kCpu;
  else if (metric == "memory") routing.metric = RoutingMetric::kMemory;
  else if (metric == "queue") routing.metric = RoutingMetric::kQueue;
  else return f.fail(path + ".metric", "expected \"\", workloads, cpu, memory or queue (or the Spark gateway's None, SparkApp, CPU, Memory, Queue_Name), got \"" + metric + "\"");
  std::string domain = node["domain"] ? node["domain"].as<std::string>() : "namespace";
  if (domain == "namespace") routing.domain = RoutingDomain::kNamespace;
  else if (domain == "cluster") routing.domain = RoutingDomain::kCluster;
  else return f.fail(path + ".domain", "expected namespace or cluster, got \"" + domain + "\"");
  return routing;
}

Status parse_spread(const Fields& f, const YAML::Node& node, const std::string& path,
                    PlacementSpec* spec) {
  SHOAL_RETURN_IF_ERROR(f.only_known(node, path, {"spreadConstraints"}));
  const YAML::Node terms = node["spreadConstraints"];
  if (!terms) return Status::ok();
  if (!terms.IsSequence()) return f.fail(path + ".spreadConstraints", "expected a list");
  if (terms.size() > 8) return f.fail(path + ".spreadConstraints", "expected at most 8 terms");
  for (size_t i = 0; i < terms.size(); ++i) {
    std::string item = path + ".spreadConstraints[" + std::to_string(i) + "]";
    SHOAL_RETURN_IF_ERROR(f.only_known(terms[i], item,
                                       {"topologyKey", "topologyKeyType", "maxSkew", "whenUnsatisfiable"}));
    SpreadConstraint term;
    if (!terms[i]["topologyKey"]) return f.fail(item + ".topologyKey", "expected a label or claim key");
    SHOAL_ASSIGN_OR_RETURN(term.topology_key, f.scalar(terms[i]["topologyKey"], item + ".topologyKey"));
    std::string type = terms[i]["topologyKeyType"] ? terms[i]["topologyKeyType"].as<std::string>() : "Label";
    if (type != "Label" && type != "Claim") {
      return f.fail(item + ".topologyKeyType", "expected Label or Claim, got \"" + type + "\"");
    }
    term.key_is_claim = type == "Claim";
    if (terms[i]["maxSkew"]) {
      SHOAL_ASSIGN_OR_RETURN(int64_t skew, f.integer(terms[i]["maxSkew"], item + ".maxSkew", 1, 1000000));
      term.max_skew = static_cast<int32_t>(skew);
    }
    std::string when = terms[i]["whenUnsatisfiable"] ? terms[i]["whenUnsatisfiable"].as<std::string>()
                                                      : "ScheduleAnyway";
    if (when == "ScheduleAnyway") term.when_unsatisfiable = WhenUnsatisfiable::kScheduleAnyway;
    else if (when == "DoNotSchedule") term.when_unsatisfiable = WhenUnsatisfiable::kDoNotSchedule;
    else return f.fail(item + ".whenUnsatisfiable", "expected DoNotSchedule or ScheduleAnyway, got \"" + when + "\"");
    spec->spread_constraints.push_back(term);
  }
  return Status::ok();
}

Status parse_prioritizers(const Fields& f, const YAML::Node& node, const std::string& path,
                          PlacementSpec* spec) {
  SHOAL_RETURN_IF_ERROR(f.only_known(node, path, {"mode", "configurations"}));
  std::string mode = node["mode"] ? node["mode"].as<std::string>() : "Additive";
  if (mode != "Additive" && mode != "Exact") {
    return f.fail(path + ".mode", "expected Additive or Exact, got \"" + mode + "\"");
  }
  spec->exact_mode = mode == "Exact";
  const YAML::Node configurations = node["configurations"];
  if (!configurations) return Status::ok();
  if (!configurations.IsSequence()) return f.fail(path + ".configurations", "expected a list");
  for (size_t i = 0; i < configurations.size(); ++i) {
    std::string item = path + ".configurations[" + std::to_string(i) + "]";
    SHOAL_RETURN_IF_ERROR(f.only_known(configurations[i], item, {"name", "weight", "scoreCoordinate"}));
    PrioritizerConfig config;
    if (const YAML::Node coordinate = configurations[i]["scoreCoordinate"]) {
      // OCM's spelling: {type: BuiltIn, builtIn: NAME} or {type: AddOn,
      // addOn: {resourceName, scoreName}} (a named score of the inventory).
      std::string at = item + ".scoreCoordinate";
      if (configurations[i]["name"]) return f.fail(at, "expected either name or scoreCoordinate, not both");
      SHOAL_RETURN_IF_ERROR(f.only_known(coordinate, at, {"type", "builtIn", "addOn"}));
      std::string type = coordinate["type"] ? coordinate["type"].as<std::string>() : "BuiltIn";
      if (type == "BuiltIn") {
        if (!coordinate["builtIn"]) return f.fail(at + ".builtIn", "expected a prioritizer name");
        SHOAL_ASSIGN_OR_RETURN(config.name, f.scalar(coordinate["builtIn"], at + ".builtIn"));
      } else if (type == "AddOn") {
        const YAML::Node addon = coordinate["addOn"];
        if (!addon) return f.fail(at + ".addOn", "expected {resourceName, scoreName}");
        SHOAL_RETURN_IF_ERROR(f.only_known(addon, at + ".addOn", {"resourceName", "scoreName"}));
        if (!addon["scoreName"]) return f.fail(at + ".addOn.scoreName", "expected a score name");
        SHOAL_ASSIGN_OR_RETURN(config.name, f.scalar(addon["scoreName"], at + ".addOn.scoreName"));
      } else {
        return f.fail(at + ".type", "expected BuiltIn or AddOn, got \"" + type + "\"");
      }
      spec->spellings.push_back(".prioritizerPolicy.configurations[" + std::to_string(i) +
                                "].scoreCoordinate (OCM) -> name: " + config.name);
    } else {
      if (!configurations[i]["name"]) return f.fail(item + ".name", "expected a prioritizer name");
      SHOAL_ASSIGN_OR_RETURN(config.name, f.scalar(configurations[i]["name"], item + ".name"));
    }
    if (configurations[i]["weight"]) {
      SHOAL_ASSIGN_OR_RETURN(config.weight, f.integer(configurations[i]["weight"], item + ".weight", -10, 10));
    }
    spec->prioritizers.push_back(config);
  }
  return Status::ok();
}

}  // namespace

bool LabelSelector::matches(const Labels& labels) const {
  for (const auto& [key, value] : match_labels) {
    auto it = labels.find(key);
    if (it == labels.end() || it->second != value) return false;
  }
  for (const auto& requirement : match_expressions) {
    auto it = labels.find(requirement.key);
    bool has = it != labels.end();
    bool listed = has && std::find(requirement.values.begin(), requirement.values.end(),
                                   it->second) != requirement.values.end();
    switch (requirement.op) {
      case LabelRequirement::Operator::kIn: if (!listed) return false; break;
      case LabelRequirement::Operator::kNotIn: if (listed) return false; break;
      case LabelRequirement::Operator::kExists: if (!has) return false; break;
      case LabelRequirement::Operator::kDoesNotExist: if (has) return false; break;
    }
  }
  return true;
}

Result<PlacementSpec> parse_placement(const YAML::Node& node, const std::string& prefix) {
  Fields f(prefix);
  PlacementSpec spec;
  if (!node) return spec;
  SHOAL_RETURN_IF_ERROR(f.only_known(node, "", {"numberOfClusters", "clusters", "clusterSelector",
                                                "claimSelector", "routing", "spreadPolicy",
                                                "prioritizerPolicy", "dispatcher", "incrementalBatch",
                                                "roundTimeout", "sampleFactor", "readyWindow",
                                                "minReady", "predicates"}));
  if (node["dispatcher"]) {
    SHOAL_ASSIGN_OR_RETURN(std::string name, f.scalar(node["dispatcher"], ".dispatcher"));
    spec.dispatcher = dispatcher_named(name);
    if (!spec.dispatcher) {
      return f.fail(".dispatcher", "expected AllAtOnce, Incremental, Sample, External or Preferred, got \"" + name + "\"");
    }
  }
  if (node["incrementalBatch"]) {
    SHOAL_ASSIGN_OR_RETURN(int64_t k, f.integer(node["incrementalBatch"], ".incrementalBatch", 1, 10000));
    spec.incremental_batch = static_cast<int32_t>(k);
  }
  if (node["roundTimeout"]) {
    SHOAL_ASSIGN_OR_RETURN(std::string text, f.scalar(node["roundTimeout"], ".roundTimeout"));
    SHOAL_ASSIGN_OR_RETURN(spec.round_timeout, parse_duration(text, f.prefix() + ".roundTimeout"));
    if (spec.round_timeout < std::chrono::milliseconds(100)) {
      return f.fail(".roundTimeout", "expected at least 100ms");
    }
  }
  if (node["sampleFactor"]) {
    SHOAL_ASSIGN_OR_RETURN(int64_t d, f.integer(node["sampleFactor"], ".sampleFactor", 1, 100));
    spec.sample_factor = static_cast<int32_t>(d);
  }
  if (node["readyWindow"]) {
    SHOAL_ASSIGN_OR_RETURN(std::string text, f.scalar(node["readyWindow"], ".readyWindow"));
    SHOAL_ASSIGN_OR_RETURN(spec.ready_window, parse_duration(text, f.prefix() + ".readyWindow"));
  }
  if (node["minReady"]) {
    SHOAL_ASSIGN_OR_RETURN(int64_t n, f.integer(node["minReady"], ".minReady", 1, 10000));
    spec.min_ready = static_cast<int32_t>(n);
  }
  if (node["numberOfClusters"]) {
    SHOAL_ASSIGN_OR_RETURN(int64_t n, f.integer(node["numberOfClusters"], ".numberOfClusters", 1, 10000));
    spec.number_of_clusters = static_cast<int32_t>(n);
  }
  SHOAL_ASSIGN_OR_RETURN(spec.clusters, f.strings(node["clusters"], ".clusters"));
  SHOAL_ASSIGN_OR_RETURN(spec.cluster_selector, parse_selector(f, node["clusterSelector"], ".clusterSelector"));
  SHOAL_ASSIGN_OR_RETURN(spec.claim_selector, parse_selector(f, node["claimSelector"], ".claimSelector"));
  if (const YAML::Node predicates = node["predicates"]) {
    // OCM's spelling of the two selectors. OCM ORs several predicates;
    // shoal has one of each selector, all of which must match.
    if (!predicates.IsSequence() || predicates.size() != 1) {
      return f.fail(".predicates", "expected a list of exactly one {requiredClusterSelector: {labelSelector, "
                                   "claimSelector}} (several predicates, which OCM ORs, are not supported)");
    }
    if (node["clusterSelector"] || node["claimSelector"]) {
      return f.fail(".predicates", "expected either predicates (OCM) or clusterSelector/claimSelector, not both");
    }
    SHOAL_RETURN_IF_ERROR(f.only_known(predicates[0], ".predicates[0]", {"requiredClusterSelector"}));
    const YAML::Node required = predicates[0]["requiredClusterSelector"];
    if (!required) return f.fail(".predicates[0].requiredClusterSelector", "expected {labelSelector, claimSelector}");
    const std::string at = ".predicates[0].requiredClusterSelector";
    SHOAL_RETURN_IF_ERROR(f.only_known(required, at, {"labelSelector", "claimSelector"}));
    SHOAL_ASSIGN_OR_RETURN(spec.cluster_selector, parse_selector(f, required["labelSelector"], at + ".labelSelector"));
    SHOAL_ASSIGN_OR_RETURN(spec.claim_selector, parse_selector(f, required["claimSelector"], at + ".claimSelector"));
    if (required["labelSelector"]) spec.spellings.push_back(at + ".labelSelector (OCM) -> clusterSelector");
    if (required["claimSelector"]) spec.spellings.push_back(at + ".claimSelector (OCM) -> claimSelector");
  }
  if (node["routing"]) {
    SHOAL_ASSIGN_OR_RETURN(spec.routing, parse_routing(f, node["routing"], ".routing", &spec.spellings));
  }
  if (node["spreadPolicy"]) {
    SHOAL_RETURN_IF_ERROR(parse_spread(f, node["spreadPolicy"], ".spreadPolicy", &spec));
  }
  if (node["prioritizerPolicy"]) {
    SHOAL_RETURN_IF_ERROR(parse_prioritizers(f, node["prioritizerPolicy"], ".prioritizerPolicy", &spec));
  }
  if (spec.routing && node["spreadPolicy"]) {
    return f.fail(".routing", "routing and spreadPolicy cannot be used together: routing picks one "
                              "cluster by weight, spreadPolicy spreads N clusters over a topology");
  }
  if (spec.routing && spec.number_of_clusters > 1) {
    return f.fail(".numberOfClusters", "expected 1 with routing (weighted routing picks one cluster)");
  }
  return spec;
}

namespace {

Result<UsageCounts> parse_counts(const Fields& f, const YAML::Node& node, const std::string& path) {
  UsageCounts counts;
  if (!node) return counts;
  SHOAL_RETURN_IF_ERROR(f.only_known(node, path, {"workloads", "cpu", "memory", "queued"}));
  if (node["queued"]) {
    SHOAL_ASSIGN_OR_RETURN(counts.queued, f.integer(node["queued"], path + ".queued", 0, INT64_MAX / 2));
  }
  if (node["workloads"]) {
    SHOAL_ASSIGN_OR_RETURN(counts.workloads, f.integer(node["workloads"], path + ".workloads", 0, INT64_MAX / 2));
  }
  if (node["cpu"]) {
    SHOAL_ASSIGN_OR_RETURN(std::string text, f.scalar(node["cpu"], path + ".cpu"));
    SHOAL_ASSIGN_OR_RETURN(counts.cpu_milli, parse_cpu_milli(text, f.prefix() + path + ".cpu"));
  }
  if (node["memory"]) {
    SHOAL_ASSIGN_OR_RETURN(std::string text, f.scalar(node["memory"], path + ".memory"));
    SHOAL_ASSIGN_OR_RETURN(counts.memory_bytes, parse_memory_bytes(text, f.prefix() + path + ".memory"));
  }
  return counts;
}

Result<ClusterCandidate> parse_inventory_cluster(const Fields& f, const YAML::Node& node,
                                                 const std::string& path) {
  SHOAL_RETURN_IF_ERROR(f.only_known(node, path, {"name", "labels", "claims", "namespaces", "capacity",
                                                  "counts", "scores", "sourceWorkloads",
                                                  "previouslySelected"}));
  ClusterCandidate c;
  if (!node["name"]) return f.fail(path + ".name", "expected a cluster name");
  SHOAL_ASSIGN_OR_RETURN(c.name, f.scalar(node["name"], path + ".name"));
  SHOAL_ASSIGN_OR_RETURN(c.labels, f.labels(node["labels"], path + ".labels"));
  SHOAL_ASSIGN_OR_RETURN(c.claims, f.labels(node["claims"], path + ".claims"));
  if (node["namespaces"]) {
    SHOAL_ASSIGN_OR_RETURN(c.namespaces, f.strings(node["namespaces"], path + ".namespaces"));
  }
  if (const YAML::Node capacity = node["capacity"]) {
    SHOAL_RETURN_IF_ERROR(f.only_known(capacity, path + ".capacity", {"free", "largestFreeNode", "allocatable"}));
    SHOAL_ASSIGN_OR_RETURN(c.allocatable, f.resources(capacity["allocatable"], path + ".capacity.allocatable"));
    SHOAL_ASSIGN_OR_RETURN(c.free, f.resources(capacity["free"], path + ".capacity.free"));
    SHOAL_ASSIGN_OR_RETURN(c.largest_free_node,
                           f.resources(capacity["largestFreeNode"], path + ".capacity.largestFreeNode"));
  }
  if (const YAML::Node counts = node["counts"]) {
    SHOAL_RETURN_IF_ERROR(f.only_known(counts, path + ".counts", {"cluster", "namespaces", "queues"}));
    SHOAL_ASSIGN_OR_RETURN(c.cluster_counts, parse_counts(f, counts["cluster"], path + ".counts.cluster"));
    if (const YAML::Node namespaces = counts["namespaces"]) {
      if (!namespaces.IsMap()) return f.fail(path + ".counts.namespaces", "expected a mapping");
      for (const auto& item : namespaces) {
        std::string ns = item.first.as<std::string>();
        SHOAL_ASSIGN_OR_RETURN(c.namespace_counts[ns],
                               parse_counts(f, item.second, path + ".counts.namespaces." + ns));
      }
    }
    if (const YAML::Node queues = counts["queues"]) {
      if (!queues.IsMap()) return f.fail(path + ".counts.queues", "expected a mapping");
      for (const auto& item : queues) {
        std::string queue = item.first.as<std::string>();
        SHOAL_ASSIGN_OR_RETURN(c.queue_counts[queue],
                               f.integer(item.second, path + ".counts.queues." + queue, 0, INT64_MAX / 2));
      }
    }
  }
  if (const YAML::Node scores = node["scores"]) {
    if (!scores.IsMap()) return f.fail(path + ".scores", "expected a mapping of name to score");
    for (const auto& item : scores) {
      std::string name = item.first.as<std::string>();
      SHOAL_ASSIGN_OR_RETURN(double score, f.number(item.second, path + ".scores." + name));
      if (score < -100 || score > 100) return f.fail(path + ".scores." + name, "expected a score from -100 to 100");
      c.scores[name] = score;
    }
  }
  if (node["sourceWorkloads"]) {
    SHOAL_ASSIGN_OR_RETURN(c.source_workloads, f.integer(node["sourceWorkloads"], path + ".sourceWorkloads", 0, INT64_MAX / 2));
  }
  if (node["previouslySelected"]) c.previously_selected = node["previouslySelected"].as<bool>();
  return c;
}

}  // namespace

Result<std::vector<ClusterCandidate>> parse_inventory(std::string_view yaml) {
  SHOAL_ASSIGN_OR_RETURN(YAML::Node doc, load_yaml(yaml, "inventory"));
  try {
    Fields f("inventory ");
    SHOAL_RETURN_IF_ERROR(f.header(doc, "Inventory"));
    SHOAL_RETURN_IF_ERROR(f.only_known(doc, "", {"apiVersion", "kind", "clusters"}));
    const YAML::Node clusters = doc["clusters"];
    if (!clusters || !clusters.IsSequence()) return f.fail("clusters", "expected a list of clusters");
    std::vector<ClusterCandidate> out;
    std::set<std::string> names;
    for (size_t i = 0; i < clusters.size(); ++i) {
      std::string path = "clusters[" + std::to_string(i) + "]";
      SHOAL_ASSIGN_OR_RETURN(ClusterCandidate c, parse_inventory_cluster(f, clusters[i], path));
      if (!names.insert(c.name).second) return f.fail(path + ".name", "cluster \"" + c.name + "\" appears twice");
      out.push_back(std::move(c));
    }
    return out;
  } catch (const YAML::Exception& e) {
    return invalid_argument("inventory: " + e.msg + " at line " + std::to_string(e.mark.line + 1));
  }
}

}  // namespace shoal::model
