// Loading YAML that comes from outside (manifests, inventories, agent.yaml,
// cluster manifests): the text must be UTF-8, no mapping may name a key
// twice, and aliases may not multiply the document. yaml-cpp takes all three
// silently: a duplicate key almost always hides a mistake, and a few lines
// of nested aliases (`b: &b [*a, *a, ...]`, nine levels deep) expand to a
// billion nodes that every later walk over the document would visit.
#pragma once

#include <cstdint>
#include <string_view>

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

}  // namespace shoal::model
