// shoald's side of the control API (agent/control/commands.h): each
// command's request decoded into its typed form and handed to the agent;
// the reply built from control_views.h. Runs on the loop, inside the
// store batch the loop commits before any reply leaves.
#pragma once

#include <chrono>

#include <nlohmann/json.hpp>

#include "agent/runtime/control_views.h"

namespace shoal::runtime {

// Never throws. A response is {"ok": true, ...} or
// {"ok": false, "code": "<ErrorCode name>", "error": "<one line>"}.
nlohmann::json handle_control(const ControlContext& context, const nlohmann::json& request);

// Three commands are finished by the loop rather than in their batch; the
// handler answers them with a marker the loop acts on:
//
// "logs" of a copy at a peer: {"ok": true, kPendingPeerLog: id}; the loop
// holds the client's request until take_peer_log(id) has the answer (then
// log_reply) or kPeerLogTimeout has passed.
inline constexpr const char* kPendingPeerLog = "pendingPeerLog";
inline constexpr std::chrono::seconds kPeerLogTimeout{5};

// "backup": {"ok": true, kPendingBackup: path}; the loop copies the
// database once no batch is open (SqliteStore::backup_to).
inline constexpr const char* kPendingBackup = "pendingBackup";

// "watch-workloads": {"ok": true, kStartWatch: namespace ("" for all)};
// the loop then keeps the client among its WorkloadWatches
// (workload_watches.h).
inline constexpr const char* kStartWatch = "startWatch";

}  // namespace shoal::runtime
