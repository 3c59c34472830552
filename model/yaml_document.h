// Loading YAML that comes from outside (manifests, inventories, agent.yaml):
// the text must be UTF-8 and no mapping may name a key twice. yaml-cpp takes
// both silently, and a duplicate key almost always hides a mistake.
#pragma once

#include <string_view>

#include <yaml-cpp/yaml.h>

#include "common/status.h"

namespace shoal::model {

// The most bytes one manifest, inventory or config may hold.
inline constexpr size_t kMaxYamlBytes = 4 << 20;

// Parses one YAML document. Errors start with `what` and give the line,
// counted from `first_line` (for documents cut out of a larger stream):
// `manifest: line 4: key "cpu" appears twice in this mapping`.
Result<YAML::Node> load_yaml(std::string_view text, std::string_view what, int first_line = 1);

}  // namespace shoal::model
