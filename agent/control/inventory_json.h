// The live inventory as JSON (`shoalctl get clusters -o json`, and what
// `shoalctl place --live` reads back): one placement-engine candidate per
// item, in the shape docs/placement.md shows.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "model/placement_spec.h"

namespace shoal::control {

// {"cpu": "500m", "memory": "1Gi", "gpu": 0}: resources as every reply
// shows them.
nlohmann::json resources_to_json(const model::Resources& resources);

// `namespace_name`: the namespace whose counts the item shows as
// counts.namespace (the one `free` was computed for).
nlohmann::json candidate_to_json(const model::ClusterCandidate& candidate,
                                 const std::string& namespace_name);
// The inverse, for one item; a wrong field gets an error that names it.
Result<model::ClusterCandidate> candidate_from_json(const nlohmann::json& item);

}  // namespace shoal::control
