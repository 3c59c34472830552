// Loading YAML that comes from outside (manifests, inventories, agent.yaml,
// cluster manifests): the text must be UTF-8, no mapping may name a key
// twice, and aliases may not multiply the document. yaml-cpp takes all three
// silently: a duplicate key almost always hides a mistake, and a few lines
// of nested aliases (`b: &b [*a, *a, ...]`, nine levels deep) expand to a
// billion nodes that every later walk over the document would visit.
#pragma once

#include <cstdint>
#include <string_view>

#include <nlohmann/json_fwd.hpp>
#include <yaml-cpp/yaml.h>

#include "common/status.h"

namespace shoal::model {

// The most bytes one manifest, inventory or config may hold.
inline constexpr size_t kMaxYamlBytes = 4 << 20;

// The most nodes one document may hold with every alias expanded: one per
// four bytes of the largest input, about what the largest document written
// out in full holds. So aliases never make a document cost more to read
// than one that has none (Kubernetes' reader refuses "excessive aliasing"
// for the same reason).
inline constexpr uint64_t kMaxYamlNodes = kMaxYamlBytes / 4;

// Parses one YAML document. Errors start with `what` and give the line,
// counted from `first_line` (for documents cut out of a larger stream):
// `manifest: line 4: key "cpu" appears twice in this mapping`. A document
// whose aliases add more than `max_nodes` is refused before it is built, in
// time proportional to its text.
Result<YAML::Node> load_yaml(std::string_view text, std::string_view what, int first_line = 1,
                             uint64_t max_nodes = kMaxYamlNodes);

// The JSON form of a YAML document, to send a document that was checked
// here on to a reader elsewhere (shoalctl's manifest to the agent, which
// parses JSON three times faster than YAML). Every scalar becomes a string,
// so json_to_yaml gives the reader the very text the YAML held; a mapping
// key that is not a scalar is an error naming `what`.
Result<nlohmann::json> yaml_to_json(const YAML::Node& node, std::string_view what);

// JSON from outside as a YAML document, for the readers that walk YAML: a
// string, number or boolean becomes a scalar of its text, null a null
// node. Nested deeper than kMaxJsonDepth is refused.
inline constexpr int kMaxJsonDepth = 64;
Result<YAML::Node> json_to_yaml(const nlohmann::json& json, std::string_view what);

}  // namespace shoal::model
