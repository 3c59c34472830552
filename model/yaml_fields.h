// Field-path-aware helpers for walking YAML documents; every error names the
// field and what was expected. Internal to the model layer.
#pragma once

#include <set>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "common/status.h"
#include "model/resources.h"
#include "model/workload.h"

namespace shoal::model::detail {

// Walks one YAML document and builds field paths for errors.
class Fields {
 public:
  explicit Fields(std::string prefix) : prefix_(std::move(prefix)) {}

  Status fail(const std::string& path, const std::string& expectation) const {
    return invalid_argument(prefix_ + path + ": " + expectation);
  }

  Result<std::string> scalar(const YAML::Node& node, const std::string& path) const {
    if (!node.IsScalar()) return fail(path, "expected a string or number");
    return node.Scalar();
  }

  // Refuses keys outside `known`, so a typo is an error rather than a silent default.
  Status only_known(const YAML::Node& map, const std::string& path,
                    const std::set<std::string>& known) const {
    if (!map.IsMap()) return fail(path, "expected a mapping");
    for (const auto& item : map) {
      std::string key = item.first.IsScalar() ? item.first.Scalar() : "?";
      if (!known.count(key)) {
        std::string list;
        for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
        return fail(path.empty() ? key : path + "." + key,
                    "unknown field (expected one of: " + list + ")");
      }
    }
    return Status::ok();
  }

  Result<Labels> labels(const YAML::Node& node, const std::string& path) const {
    Labels out;
    if (!node) return out;
    if (!node.IsMap()) return fail(path, "expected a mapping of string to string");
    for (const auto& item : node) {
      if (!item.first.IsScalar() || !item.second.IsScalar()) {
        return fail(path, "expected a mapping of string to string");
      }
      out[item.first.Scalar()] = item.second.Scalar();
    }
    return out;
  }

  Result<int64_t> integer(const YAML::Node& node, const std::string& path, int64_t min,
                          int64_t max) const {
    if (!node.IsScalar()) return fail(path, "expected an integer");
    const std::string& text = node.Scalar();
    size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(text, &used);
    } catch (...) {
      used = 0;
    }
    if (used == 0 || used != text.size() || value < min || value > max) {
      return fail(path, "expected an integer from " + std::to_string(min) + " to " +
                            std::to_string(max) + ", got \"" + text + "\"");
    }
    return static_cast<int64_t>(value);
  }

  Result<Resources> resources(const YAML::Node& node, const std::string& path) const {
    Resources out;
    if (!node) return out;
    SHOAL_RETURN_IF_ERROR(only_known(node, path, {"cpu", "memory", "gpu"}));
    if (node["cpu"]) {
      SHOAL_ASSIGN_OR_RETURN(std::string text, scalar(node["cpu"], path + ".cpu"));
      SHOAL_ASSIGN_OR_RETURN(out.cpu_milli, parse_cpu_milli(text, prefix_ + path + ".cpu"));
    }
    if (node["memory"]) {
      SHOAL_ASSIGN_OR_RETURN(std::string text, scalar(node["memory"], path + ".memory"));
      SHOAL_ASSIGN_OR_RETURN(out.memory_bytes,
                             parse_memory_bytes(text, prefix_ + path + ".memory"));
    }
    if (node["gpu"]) {
      SHOAL_ASSIGN_OR_RETURN(std::string text, scalar(node["gpu"], path + ".gpu"));
      SHOAL_ASSIGN_OR_RETURN(out.gpu, parse_count(text, prefix_ + path + ".gpu"));
    }
    return out;
  }

  Result<std::vector<std::string>> strings(const YAML::Node& node, const std::string& path) const {
    std::vector<std::string> out;
    if (!node) return out;
    if (!node.IsSequence()) return fail(path, "expected a list of strings");
    for (size_t i = 0; i < node.size(); ++i) {
      if (!node[i].IsScalar()) return fail(path + "[" + std::to_string(i) + "]", "expected a string");
      out.push_back(node[i].Scalar());
    }
    return out;
  }

  Result<double> number(const YAML::Node& node, const std::string& path) const {
    if (!node.IsScalar()) return fail(path, "expected a number");
    const std::string& text = node.Scalar();
    size_t used = 0;
    double value = 0;
    try {
      value = std::stod(text, &used);
    } catch (...) {
      used = 0;
    }
    if (used == 0 || used != text.size()) return fail(path, "expected a number, got \"" + text + "\"");
    return value;
  }

  const std::string& prefix() const { return prefix_; }

  Status header(const YAML::Node& doc, const std::string& kind) const {
    if (!doc.IsMap()) return fail("", "expected a mapping with apiVersion, kind, metadata, spec");
    if (!doc["apiVersion"] || !doc["apiVersion"].IsScalar() ||
        doc["apiVersion"].Scalar() != "shoal.dev/v1") {
      return fail("apiVersion", "expected \"shoal.dev/v1\"");
    }
    if (!doc["kind"] || !doc["kind"].IsScalar() || doc["kind"].Scalar() != kind) {
      return fail("kind", "expected \"" + kind + "\"");
    }
    return Status::ok();
  }

 private:
  std::string prefix_;
};

}  // namespace shoal::model::detail
