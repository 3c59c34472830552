// The client side of the control API (commands.h): one typed request, one
// JSON reply, over the agent's ipc:// socket, with a timeout so a hung
// agent never hangs the caller; and the stream a watch opens.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/control/commands.h"
#include "common/status.h"

namespace shoal::control {

inline constexpr std::chrono::milliseconds kDefaultCallTimeout = std::chrono::seconds(15);

// Sends `request` (an encoded one: {"command": ..., fields}) to the agent
// whose data dir is `data_dir`. An {"ok": false} reply becomes a Status
// with the agent's code and message.
Result<nlohmann::json> call_agent(const std::string& data_dir, const nlohmann::json& request,
                                  std::chrono::milliseconds timeout = kDefaultCallTimeout);

template <class Request>
Result<nlohmann::json> call(const std::string& data_dir, const Request& request,
                            std::chrono::milliseconds timeout = kDefaultCallTimeout) {
  return call_agent(data_dir, encode(request), timeout);
}

struct DealerSocket;  // a connection that may have several requests in flight

// Requests sent without waiting for the answers to earlier ones, answered
// in the order they were sent (the agent reads and answers its control
// requests in order). shoalctl submit sends its parts so: the agent never
// waits between one part's answer and the next part, and takes several
// parts in one batch.
class Pipeline {
 public:
  static Result<Pipeline> open(const std::string& data_dir);
  Pipeline(Pipeline&&) noexcept;
  Pipeline& operator=(Pipeline&&) noexcept;
  ~Pipeline();

  template <class Request>
  Status send(const Request& request) {
    return send_encoded(encode(request));
  }
  // The answer to the earliest request not yet answered, as call() returns
  // it; kUnavailable when none came within `timeout`.
  Result<nlohmann::json> next(std::chrono::milliseconds timeout = kDefaultCallTimeout);

 private:
  Pipeline(std::unique_ptr<DealerSocket> socket, std::string data_dir);
  Status send_encoded(const nlohmann::json& request);
  std::unique_ptr<DealerSocket> socket_;
  std::string data_dir_;
  size_t in_flight_ = 0;  // sent, not yet answered
};

// A watch of the agent's workloads (shoalctl get workloads -w): the agent
// sends the workloads that changed after every batch that changed any, and
// an empty batch every kWatchKeepalive; a reply with ok false ends it.
class WorkloadWatch {
 public:
  // Sends the request and waits for the agent to start the watch.
  static Result<WorkloadWatch> open(const std::string& data_dir, const WatchWorkloadsRequest& request,
                                    std::chrono::milliseconds timeout = kDefaultCallTimeout);
  WorkloadWatch(WorkloadWatch&&) noexcept;
  WorkloadWatch& operator=(WorkloadWatch&&) noexcept;
  ~WorkloadWatch();

  // The next batch of changed workloads (a JSON array, empty for a
  // keepalive); nullopt when nothing came within `timeout`; an error when
  // the agent ended the watch or went away.
  Result<std::optional<nlohmann::json>> next(std::chrono::milliseconds timeout);

 private:
  explicit WorkloadWatch(std::unique_ptr<DealerSocket> socket);
  std::unique_ptr<DealerSocket> socket_;
};

}  // namespace shoal::control
