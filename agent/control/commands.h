// The control contract's commands (protocol/README.md, "Control API").
#pragma once

#include <cstddef>

#include <nlohmann/json.hpp>

namespace shoal::control {

// The most one "submit" request may carry. The agent reads a request on its
// loop, between peers' messages and timers, so what one request can cost
// is bounded: about 0.2 s of parsing and submitting on a 2-core host.
// shoalctl sends a larger file in parts of this size (each its own request).
inline constexpr size_t kMaxSubmitBytes = 512 << 10;
inline constexpr size_t kMaxWorkloadsPerSubmit = 100;

// Whether `request` only reads: what a read-only agent (its state database
// cannot be written) still answers.
bool is_read_only_command(const nlohmann::json& request);

}  // namespace shoal::control
