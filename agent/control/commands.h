// The control contract's commands (protocol/README.md, "Control API").
#pragma once

#include <nlohmann/json.hpp>

namespace shoal::control {

// Whether `request` only reads: what a read-only agent (its state database
// cannot be written) still answers.
bool is_read_only_command(const nlohmann::json& request);

}  // namespace shoal::control
