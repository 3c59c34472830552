#include "agent/control/commands.h"

#include <set>
#include <string>

namespace shoal::control {

using nlohmann::json;

bool is_read_only_command(const json& request) {
  static const std::set<std::string> kReads = {
      "identity",      "invite-list",      "describe-peer",     "peers",
      "get-workloads", "get-reservations", "describe-workload", "status",
      "get-clusters",  "logs",             "metrics",           "routing-metrics",
      "backup"};
  // Not "watch-workloads": a read-only agent commits no batches, so it
  // would have no changes to tell; it is refused with the reason instead.
  if (!request.is_object()) return false;
  auto command = request.find("command");
  return command != request.end() && command->is_string() &&
         kReads.count(command->get<std::string>()) > 0;
}

}  // namespace shoal::control
