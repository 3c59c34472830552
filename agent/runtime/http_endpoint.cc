#include "agent/runtime/http_endpoint.h"

#include <httplib.h>

#include <nlohmann/json.hpp>

#include "agent/control/client.h"

namespace shoal::runtime {
namespace {

// Short: a scrape in flight when the agent stops must not hold the stop up.
constexpr auto kControlTimeout = std::chrono::seconds(2);

// The status an error of the agent's maps to.
int http_status(const Status& status) {
  switch (status.code()) {
    case ErrorCode::kInvalidArgument: return 400;
    case ErrorCode::kNotFound: return 404;
    case ErrorCode::kUnavailable:
    case ErrorCode::kStorage: return 503;
    default: return 500;
  }
}

void reply_error(httplib::Response& response, const Status& status) {
  response.status = http_status(status);
  response.set_content(nlohmann::json{{"error", status.message()}, {"code", error_code_name(status.code())}}.dump() + "\n",
                       "application/json");
}

std::pair<std::string, int> split_listen(const std::string& listen) {
  size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return {"", -1};
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  std::string port = listen.substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) return {host, -1};
  return {host, std::stoi(port)};
}

}  // namespace

Status validate_metrics_listen(const std::string& listen) {
  auto [host, port] = split_listen(listen);
  if (host.empty() || port < 1 || port > 65535) {
    return invalid_argument("agent.yaml metricsListen: expected HOST:PORT with a port 1..65535 (e.g. 127.0.0.1:9400), got \"" +
                            listen + "\"");
  }
  return Status::ok();
}

Result<std::unique_ptr<HttpEndpoint>> HttpEndpoint::start(const std::string& listen,
                                                          const std::string& data_dir) {
  SHOAL_RETURN_IF_ERROR(validate_metrics_listen(listen));
  auto [host, port] = split_listen(listen);
  std::unique_ptr<HttpEndpoint> endpoint(new HttpEndpoint());
  endpoint->server_ = std::make_unique<httplib::Server>();
  httplib::Server& server = *endpoint->server_;

  server.Get("/healthz", [](const httplib::Request&, httplib::Response& response) {
    response.set_content("ok\n", "text/plain");
  });
  server.Get("/readyz", [data_dir](const httplib::Request&, httplib::Response& response) {
    auto status = control::call(data_dir, control::StatusRequest{}, kControlTimeout);
    if (!status.is_ok()) return reply_error(response, status.status());
    const nlohmann::json& storage = (*status)["storage"];
    if (storage.is_object() && !storage.value("writable", true)) {
      return reply_error(response, Status(ErrorCode::kStorage,
                                          "state database not writable: " + storage.value("error", std::string())));
    }
    response.set_content("ready\n", "text/plain");
  });
  server.Get("/metrics", [data_dir](const httplib::Request&, httplib::Response& response) {
    auto metrics = control::call(data_dir, control::MetricsRequest{}, kControlTimeout);
    if (!metrics.is_ok()) return reply_error(response, metrics.status());
    response.set_content((*metrics)["text"].get<std::string>(), "text/plain; version=0.0.4; charset=utf-8");
  });
  server.Get(R"(/v1/metrics/([^/]+)/([^/]+))", [data_dir](const httplib::Request& request,
                                                           httplib::Response& response) {
    auto answer = control::call(
        data_dir,
        control::RoutingMetricsRequest{.domain = request.matches[1].str(), .metric = request.matches[2].str()},
        kControlTimeout);
    if (!answer.is_ok()) return reply_error(response, answer.status());
    nlohmann::json body = *answer;
    body.erase("ok");
    response.set_content(body.dump() + "\n", "application/json");
  });

  if (!server.bind_to_port(host, port)) {
    return Status(ErrorCode::kUnavailable, "agent.yaml metricsListen: cannot listen on " + listen +
                                               " (in use, or not an address of this host)");
  }
  endpoint->thread_ = std::thread([&server] { server.listen_after_bind(); });
  return endpoint;
}

HttpEndpoint::~HttpEndpoint() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace shoal::runtime
