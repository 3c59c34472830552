// shoalctl's side of the control API: one JSON request, one JSON reply, over
// the agent's ipc:// socket, with a timeout so a hung agent never hangs us.
#pragma once

#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace shoal::control {

// Sends `request` to the agent whose data dir is `data_dir`. An {"ok": false}
// reply becomes a Status with the agent's code and message.
Result<nlohmann::json> call_agent(const std::string& data_dir, const nlohmann::json& request,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(15));

}  // namespace shoal::control
