// The HTTP of the Kubernetes API (kube_api.h) over the backends' one HTTP
// client (agent/cluster/http): the cluster's CA and client certificate, a
// bearer token read again as it rotates, and watches streamed line by line.
#include "agent/cluster/kubernetes/kube_api.h"

namespace shoal::cluster::kubernetes {
namespace {

// The longest line of a watch (one event): a pod or node is far smaller.
constexpr size_t kMaxWatchLine = 16 << 20;

// How often a token file is read again (client-go's cached token source).
constexpr auto kTokenRereadInterval = std::chrono::minutes(1);

http::Endpoint endpoint_of(const KubeConfig& config) {
  http::Endpoint endpoint;
  endpoint.base_url = config.server;
  endpoint.ca_pem = config.ca_pem;
  endpoint.client_cert_pem = config.client_cert_pem;
  endpoint.client_key_pem = config.client_key_pem;
  endpoint.name = "kube-apiserver";
  return endpoint;
}

}  // namespace

KubeClient::KubeClient(KubeClientOptions options)
    : options_(std::move(options)), http_(endpoint_of(options_.config)) {}

const std::string& KubeClient::token() {
  KubeConfig& config = options_.config;
  auto now = std::chrono::steady_clock::now();
  if (config.token_file.empty() || now - token_read_at_ < kTokenRereadInterval) return config.token;
  token_read_at_ = now;
  if (Result<std::string> read = read_token_file(config.token_file, "tokenFile"); read.is_ok()) {
    config.token = std::move(*read);
  }
  return config.token;
}

void KubeClient::note_status(long status) {
  if (status == 401) token_read_at_ = {};
}

http::Request KubeClient::request(const char* method, const std::string& path, const std::string& body) {
  http::Request request;
  request.method = method;
  request.path = path;
  request.headers.push_back("Accept: application/json");
  if (!body.empty()) request.headers.push_back("Content-Type: application/json");
  if (const std::string& bearer = token(); !bearer.empty()) {
    request.headers.push_back("Authorization: Bearer " + bearer);
  }
  request.body = body;
  request.timeout = options_.timeout;
  request.connect_timeout = options_.timeout;
  return request;
}

Result<KubeClient::Answer> KubeClient::call(const char* method, const std::string& path,
                                            const std::string& body) {
  long status_seen = 0;
  Result<http::Answer> answer = http_.call(request(method, path, body), &status_seen);
  // Even when the transfer broke after the status (a 401 to a POST may
  // close the stream before its body is read): the token is read again.
  note_status(status_seen);
  return answer;
}

Status KubeClient::watch(const std::string& path, const std::function<bool(std::string_view)>& on_line,
                         std::chrono::milliseconds longest, const std::atomic<bool>* cancel,
                         WatchProgress* progress) {
  http::Request watch = request("GET", path, "");
  watch.timeout = longest;
  http::StreamProgress stream;
  if (progress) stream.on_open = progress->on_open;
  std::string error_body;
  Status streamed = http_.stream(watch, on_line, cancel, &stream, &error_body, kMaxWatchLine);
  if (progress) progress->http_status = stream.http_status;
  note_status(stream.http_status);
  if (!streamed.is_ok()) return streamed;
  if (stream.http_status >= 300) {
    return Status(stream.http_status == 401 || stream.http_status == 403 ? ErrorCode::kPermissionDenied
                                                                         : ErrorCode::kUnavailable,
                  "kube-apiserver: watch " + path + ": HTTP " + std::to_string(stream.http_status) + ": " +
                      kube_status_message(error_body));
  }
  return Status::ok();
}

}  // namespace shoal::cluster::kubernetes
