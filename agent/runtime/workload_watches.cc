#include "agent/runtime/workload_watches.h"

#include <map>

#include "agent/runtime/control_views.h"

namespace shoal::runtime {

nlohmann::json WorkloadWatches::start(const std::string& routing_id,
                                      const std::string& namespace_name, TimePoint now) {
  if (watchers_.size() >= kMaxWatches) {
    return {{"ok", false},
            {"code", "Unavailable"},
            {"error", std::to_string(kMaxWatches) + " watches are open already; try again later"}};
  }
  watchers_.push_back({routing_id, namespace_name});
  next_keepalive_ = now + kKeepalive;
  return {{"ok", true}, {"watching", namespace_name.empty() ? "all namespaces" : namespace_name}};
}

void WorkloadWatches::tell(const std::vector<store::WorkloadRecord>& changed, TimePoint now) {
  bool keepalive = now >= next_keepalive_;
  if (watchers_.empty() || (changed.empty() && !keepalive)) return;
  if (keepalive) next_keepalive_ = now + kKeepalive;
  std::map<std::string, nlohmann::json> by_namespace;
  nlohmann::json all = nlohmann::json::array();
  for (const auto& record : changed) {
    nlohmann::json item = workload_to_json(record);
    by_namespace[record.spec.namespace_name].push_back(item);
    all.push_back(std::move(item));
  }
  std::erase_if(watchers_, [&](const Watcher& watcher) {
    nlohmann::json items = all;
    if (!watcher.namespace_name.empty()) {
      auto it = by_namespace.find(watcher.namespace_name);
      items = it == by_namespace.end() ? nlohmann::json::array() : it->second;
    }
    if (items.empty() && !keepalive) return false;
    return !send_(watcher.routing_id, {{"ok", true}, {"items", items}});
  });
}

void WorkloadWatches::end_all(const std::string& why) {
  for (const Watcher& watcher : watchers_) {
    send_(watcher.routing_id, {{"ok", false}, {"code", "Unavailable"}, {"error", why}});
  }
  watchers_.clear();
}

}  // namespace shoal::runtime
