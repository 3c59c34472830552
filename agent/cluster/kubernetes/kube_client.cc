// The HTTP of the Kubernetes API (kube_api.h): libcurl, TLS verified
// against the cluster's CA, a token or client certificate, a timeout on
// every call, and watches streamed line by line.
#include <curl/curl.h>

#include <cstdlib>
#include <mutex>

#include "agent/cluster/kubernetes/kube_api.h"

namespace shoal::cluster::kubernetes {
namespace {

// The longest line of a watch (one event): a pod or node is far smaller.
constexpr size_t kMaxWatchLine = 16 << 20;

void init_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

size_t append_body(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

// A watch's stream, cut into lines.
struct WatchSink {
  const std::function<bool(std::string_view)>* on_line = nullptr;
  const std::atomic<bool>* cancel = nullptr;
  std::string pending;
  bool stopped = false;    // on_line asked to stop
  bool too_long = false;   // a line passed kMaxWatchLine
  long status = 0;
  std::string error_body;  // an HTTP error's body
  KubeClient::WatchProgress* progress = nullptr;
};

size_t take_watch_bytes(char* data, size_t size, size_t count, void* out) {
  auto* sink = static_cast<WatchSink*>(out);
  size_t bytes = size * count;
  if (sink->status >= 300) {
    if (sink->error_body.size() < 64 << 10) sink->error_body.append(data, bytes);
    return bytes;
  }
  sink->pending.append(data, bytes);
  size_t start = 0;
  for (size_t end; (end = sink->pending.find('\n', start)) != std::string::npos; start = end + 1) {
    std::string_view line(sink->pending.data() + start, end - start);
    if (!line.empty() && !(*sink->on_line)(line)) {
      sink->stopped = true;
      return 0;  // ends the transfer
    }
  }
  sink->pending.erase(0, start);
  if (sink->pending.size() > kMaxWatchLine) {
    sink->too_long = true;
    return 0;
  }
  return bytes;
}

// The status line's code ("HTTP/1.1 410 Gone"); the last one wins (a
// redirect or a 100 Continue comes before).
size_t take_watch_header(char* data, size_t size, size_t count, void* out) {
  std::string_view line(data, size * count);
  auto* sink = static_cast<WatchSink*>(out);
  if ((line == "\r\n" || line == "\n") && sink->status == 200 && sink->progress && sink->progress->on_open) {
    sink->progress->on_open();  // the headers' end: the stream is open
  }
  if (line.starts_with("HTTP/")) {
    size_t space = line.find(' ');
    if (space != std::string_view::npos && line.size() >= space + 4) {
      static_cast<WatchSink*>(out)->status =
          std::strtol(std::string(line.substr(space + 1, 3)).c_str(), nullptr, 10);
    }
  }
  return size * count;
}

int cancel_watch(void* data, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* sink = static_cast<WatchSink*>(data);
  if (!sink->cancel->load()) return 0;
  sink->stopped = true;
  return 1;  // aborts the transfer
}

curl_slist* headers_for(const std::string& token, bool has_body) {
  curl_slist* headers = curl_slist_append(nullptr, "Accept: application/json");
  if (has_body) headers = curl_slist_append(headers, "Content-Type: application/json");
  if (!token.empty()) headers = curl_slist_append(headers, ("Authorization: Bearer " + token).c_str());
  return headers;
}

// How often a token file is read again (client-go's cached token source).
constexpr auto kTokenRereadInterval = std::chrono::minutes(1);

}  // namespace

KubeClient::KubeClient(KubeClientOptions options) : options_(std::move(options)) {
  init_curl_once();
  curl_ = curl_easy_init();
}

KubeClient::~KubeClient() {
  if (curl_) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

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

void KubeClient::prepare(void* handle, const char* method, const std::string& path, long timeout_ms) const {
  auto* curl = static_cast<CURL*>(handle);
  const KubeConfig& config = options_.config;
  std::string url = config.server + path;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options_.timeout.count()));
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "https,http");
  if (!config.ca_pem.empty()) {
    curl_blob ca{const_cast<char*>(config.ca_pem.data()), config.ca_pem.size(), CURL_BLOB_COPY};
    curl_easy_setopt(curl, CURLOPT_CAINFO_BLOB, &ca);
  }
  if (!config.client_cert_pem.empty()) {
    curl_blob cert{const_cast<char*>(config.client_cert_pem.data()), config.client_cert_pem.size(), CURL_BLOB_COPY};
    curl_blob key{const_cast<char*>(config.client_key_pem.data()), config.client_key_pem.size(), CURL_BLOB_COPY};
    curl_easy_setopt(curl, CURLOPT_SSLCERT_BLOB, &cert);
    curl_easy_setopt(curl, CURLOPT_SSLCERTTYPE, "PEM");
    curl_easy_setopt(curl, CURLOPT_SSLKEY_BLOB, &key);
    curl_easy_setopt(curl, CURLOPT_SSLKEYTYPE, "PEM");
  }
}

Result<KubeClient::Answer> KubeClient::call(const char* method, const std::string& path,
                                            const std::string& body) {
  auto* curl = static_cast<CURL*>(curl_);
  if (!curl) return Status(ErrorCode::kUnavailable, "kube-apiserver: no HTTP client (curl_easy_init failed)");
  Answer answer;
  curl_easy_reset(curl);
  prepare(curl, method, path, static_cast<long>(options_.timeout.count()));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &answer.body);
  curl_slist* headers = headers_for(token(), !body.empty());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  if (!body.empty()) {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  }
  CURLcode code = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &answer.status);
  // Even when the transfer broke after the status (a 401 to a POST may
  // close the stream before its body is read): the token is read again.
  note_status(answer.status);
  if (code != CURLE_OK) {
    return Status(ErrorCode::kUnavailable,
                  std::string("kube-apiserver: ") + method + " " + path + ": " + curl_easy_strerror(code));
  }
  curl_off_t retry_after = 0;  // seconds, from either form of the header
  if (curl_easy_getinfo(curl, CURLINFO_RETRY_AFTER, &retry_after) == CURLE_OK && retry_after > 0) {
    answer.retry_after = std::chrono::seconds(retry_after);
  }
  return answer;
}

Status KubeClient::watch(const std::string& path, const std::function<bool(std::string_view)>& on_line,
                         std::chrono::milliseconds longest, const std::atomic<bool>* cancel,
                         WatchProgress* progress) {
  // A handle of its own: a watch may run on one thread while calls run on
  // another's client, and it holds its connection for as long as it lasts.
  CURL* curl = curl_easy_init();
  if (!curl) return Status(ErrorCode::kUnavailable, "kube-apiserver: no HTTP client (curl_easy_init failed)");
  WatchSink sink;
  sink.on_line = &on_line;
  sink.progress = progress;
  sink.cancel = cancel;
  if (cancel) {
    // Called at least once a second while the transfer lasts.
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, cancel_watch);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &sink);
  }
  prepare(curl, "GET", path, static_cast<long>(longest.count()));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, take_watch_bytes);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
  // The status is known before the first byte of the body.
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, take_watch_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &sink);
  curl_slist* headers = headers_for(token(), false);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  CURLcode code = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  if (progress) progress->http_status = sink.status;
  note_status(sink.status);
  if (sink.too_long) {
    return Status(ErrorCode::kCorrupt, "kube-apiserver: watch " + path + ": an event longer than 16 MiB");
  }
  if (sink.status >= 300) {
    return Status(sink.status == 401 || sink.status == 403 ? ErrorCode::kPermissionDenied : ErrorCode::kUnavailable,
                  "kube-apiserver: watch " + path + ": HTTP " + std::to_string(sink.status) + ": " +
                      kube_status_message(sink.error_body));
  }
  if (sink.stopped || code == CURLE_OK || code == CURLE_OPERATION_TIMEDOUT ||
      code == CURLE_ABORTED_BY_CALLBACK) {
    // Ended by us, by the server, or at `longest`: the caller watches on.
    if (code == CURLE_OPERATION_TIMEDOUT && sink.status == 0) {
      return Status(ErrorCode::kUnavailable, "kube-apiserver: watch " + path + ": no answer");
    }
    return Status::ok();
  }
  return Status(ErrorCode::kUnavailable,
                "kube-apiserver: watch " + path + ": " + curl_easy_strerror(code));
}

}  // namespace shoal::cluster::kubernetes
