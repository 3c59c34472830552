// The clients watching the agent's workloads (shoalctl get workloads -w,
// control::WorkloadWatch): after every committed batch each hears of the
// workloads of its namespace that changed, and every kKeepalive an
// empty message tells which clients are gone (a send to a departed client
// fails: the control socket is router_mandatory). A watch ends when its
// client is gone or the agent ends them all (stopping, or turning
// read-only).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/time.h"
#include "store/records.h"

namespace shoal::runtime {

class WorkloadWatches {
 public:
  // Sends one message to a client; false when the client is gone.
  using Send = std::function<bool(const std::string& routing_id, const nlohmann::json& message)>;
  static constexpr std::chrono::seconds kKeepalive{10};
  static constexpr size_t kMaxWatches = 64;

  explicit WorkloadWatches(Send send) : send_(std::move(send)) {}

  // The reply to a client's watch request: started ({"ok": true}), or
  // refused while kMaxWatches are open. `namespace_name` "": all.
  nlohmann::json start(const std::string& routing_id, const std::string& namespace_name,
                       TimePoint now);
  // After a committed batch: each watcher hears of its workloads among
  // `changed`; at a keepalive, every watcher hears (an empty list when
  // nothing of its changed). Watchers that are gone are dropped.
  void tell(const std::vector<store::WorkloadRecord>& changed, TimePoint now);
  // Every watch ends with {"ok": false, "code": "Unavailable", "error": why}.
  void end_all(const std::string& why);

  bool empty() const { return watchers_.empty(); }
  size_t size() const { return watchers_.size(); }
  // When the next keepalive is due (TimePoint::max() with no watcher).
  TimePoint next_keepalive() const { return empty() ? TimePoint::max() : next_keepalive_; }

 private:
  struct Watcher {
    std::string routing_id;
    std::string namespace_name;  // "": all
  };
  Send send_;
  std::vector<Watcher> watchers_;
  TimePoint next_keepalive_{};
};

}  // namespace shoal::runtime
