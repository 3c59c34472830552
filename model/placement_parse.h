// YAML parsing of spec.placement and of the Inventory used by `shoalctl place`.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "common/status.h"
#include "model/placement_spec.h"

namespace shoal::model {

// `prefix` starts every error ("manifest document 1 spec.placement").
Result<PlacementSpec> parse_placement(const YAML::Node& node, const std::string& prefix);

Result<std::vector<ClusterCandidate>> parse_inventory(std::string_view yaml);

}  // namespace shoal::model
