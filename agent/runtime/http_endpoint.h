// The agent's HTTP endpoint (metricsListen in agent.yaml; off by default):
//   /metrics                       Prometheus text (metrics.h)
//   /healthz                       200 while the process serves HTTP
//   /readyz                        200 when the agent answers, listens and
//                                  can write its state database; else 503
//   /v1/metrics/<domain>/<metric>  the counts weighted routing uses (JSON)
// It runs on its own threads and reads the agent only through its control
// socket, as shoalctl does: the agent's loop stays the one owner of its state.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "common/status.h"

namespace httplib {
class Server;
}

namespace shoal::runtime {

class HttpEndpoint {
 public:
  // Listens on `listen` ("HOST:PORT") and serves the agent whose data dir is
  // `data_dir`. Unavailable when the address cannot be bound.
  static Result<std::unique_ptr<HttpEndpoint>> start(const std::string& listen,
                                                     const std::string& data_dir);
  ~HttpEndpoint();  // stops serving and joins its threads

  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;

 private:
  HttpEndpoint() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

// "HOST:PORT" with a port 1..65535; the error names agent.yaml metricsListen.
Status validate_metrics_listen(const std::string& listen);

}  // namespace shoal::runtime
