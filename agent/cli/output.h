// How shoalctl prints what the agent answers: -o json, -o yaml (the same
// document; reading the YAML back gives the JSON), -o name (one
// "kind/name" per item), and kubectl-style ages.
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace shoal::cli {

// The document as YAML: strings always quoted, so nothing reads back as
// another type; numbers exact; empty maps and lists in flow style.
std::string to_yaml(const nlohmann::json& document);

// For -o json|yaml|name: prints `document` (name: `name_of` each of its
// "items") and returns true; false for the other formats (tables).
bool print_structured(const std::string& output, const nlohmann::json& document,
                      const std::function<std::string(const nlohmann::json&)>& name_of);

// Seconds as kubectl prints an age: "45s", "5m12s", "42m", "3h5m", "20h",
// "3d4h", "12d", "2y".
std::string human_duration(long long seconds);

}  // namespace shoal::cli
