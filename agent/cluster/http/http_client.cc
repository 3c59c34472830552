#include "agent/cluster/http/http_client.h"

#include <curl/curl.h>

#include <cstdlib>
#include <mutex>

namespace shoal::cluster::http {
namespace {

void init_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

size_t append_body(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

// What every request shares: the URL, the socket, TLS, the timeouts. Blobs
// are copied by libcurl, so the endpoint may change after.
void prepare(CURL* curl, const Endpoint& endpoint, const Request& request, long timeout_ms) {
  std::string url = endpoint.base_url + request.path;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(request.connect_timeout.count()));
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "https,http");
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
  if (!endpoint.unix_socket.empty()) {
    curl_easy_setopt(curl, CURLOPT_UNIX_SOCKET_PATH, endpoint.unix_socket.c_str());
  }
  if (!endpoint.ca_pem.empty()) {
    curl_blob ca{const_cast<char*>(endpoint.ca_pem.data()), endpoint.ca_pem.size(), CURL_BLOB_COPY};
    curl_easy_setopt(curl, CURLOPT_CAINFO_BLOB, &ca);
  }
  if (!endpoint.client_cert_pem.empty()) {
    curl_blob cert{const_cast<char*>(endpoint.client_cert_pem.data()), endpoint.client_cert_pem.size(),
                   CURL_BLOB_COPY};
    curl_blob key{const_cast<char*>(endpoint.client_key_pem.data()), endpoint.client_key_pem.size(),
                  CURL_BLOB_COPY};
    curl_easy_setopt(curl, CURLOPT_SSLCERT_BLOB, &cert);
    curl_easy_setopt(curl, CURLOPT_SSLCERTTYPE, "PEM");
    curl_easy_setopt(curl, CURLOPT_SSLKEY_BLOB, &key);
    curl_easy_setopt(curl, CURLOPT_SSLKEYTYPE, "PEM");
  }
  if (!request.body.empty()) {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(request.body.size()));
  }
}

curl_slist* header_list(const Request& request) {
  curl_slist* list = nullptr;
  for (const std::string& header : request.headers) list = curl_slist_append(list, header.c_str());
  return list;
}

std::string failed(const Endpoint& endpoint, const Request& request, const std::string& what) {
  return endpoint.name + ": " + request.method + " " + request.path + ": " + what;
}

Status no_client(const Endpoint& endpoint) {
  return Status(ErrorCode::kUnavailable, endpoint.name + ": no HTTP client (curl_easy_init failed)");
}

// A stream cut into lines.
struct LineSink {
  const std::function<bool(std::string_view)>* on_line = nullptr;
  const std::atomic<bool>* cancel = nullptr;
  StreamProgress* progress = nullptr;
  std::string* error_body = nullptr;
  size_t max_line = 0;
  std::string pending;
  long status = 0;
  bool stopped = false;   // on_line or cancel asked to stop
  bool too_long = false;  // a line passed max_line
};

size_t take_stream_bytes(char* data, size_t size, size_t count, void* out) {
  auto* sink = static_cast<LineSink*>(out);
  size_t bytes = size * count;
  if (sink->status >= 300) {
    if (sink->error_body && sink->error_body->size() < 64 << 10) sink->error_body->append(data, bytes);
    return bytes;
  }
  sink->pending.append(data, bytes);
  size_t start = 0;
  for (size_t end; (end = sink->pending.find('\n', start)) != std::string::npos; start = end + 1) {
    std::string_view line(sink->pending.data() + start, end - start);
    if (line.size() > sink->max_line) {
      sink->too_long = true;
      return 0;
    }
    if (!line.empty() && !(*sink->on_line)(line)) {
      sink->stopped = true;
      return 0;  // ends the transfer
    }
  }
  sink->pending.erase(0, start);
  if (sink->pending.size() > sink->max_line) {
    sink->too_long = true;
    return 0;
  }
  return bytes;
}

// The status line's code ("HTTP/1.1 410 Gone"); the last one wins (a
// redirect or a 100 Continue comes before). The headers' end, after a 2xx,
// is when the stream is open.
size_t take_stream_header(char* data, size_t size, size_t count, void* out) {
  std::string_view line(data, size * count);
  auto* sink = static_cast<LineSink*>(out);
  if ((line == "\r\n" || line == "\n") && sink->status >= 200 && sink->status < 300 && sink->progress &&
      sink->progress->on_open) {
    sink->progress->on_open();
  }
  if (line.starts_with("HTTP/")) {
    size_t space = line.find(' ');
    if (space != std::string_view::npos && line.size() >= space + 4) {
      sink->status = std::strtol(std::string(line.substr(space + 1, 3)).c_str(), nullptr, 10);
    }
  }
  return size * count;
}

int cancel_stream(void* data, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* sink = static_cast<LineSink*>(data);
  if (!sink->cancel->load()) return 0;
  sink->stopped = true;
  return 1;  // aborts the transfer
}

}  // namespace

Client::Client(Endpoint endpoint) : endpoint_(std::move(endpoint)) {
  init_curl_once();
  curl_ = curl_easy_init();
}

Client::~Client() {
  if (curl_) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

Result<Answer> Client::call(const Request& request, long* status_seen) {
  auto* curl = static_cast<CURL*>(curl_);
  if (!curl) return no_client(endpoint_);
  Answer answer;
  curl_easy_reset(curl);
  prepare(curl, endpoint_, request, static_cast<long>(request.timeout.count()));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &answer.body);
  curl_slist* headers = header_list(request);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  CURLcode code = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &answer.status);
  if (status_seen) *status_seen = answer.status;
  if (code != CURLE_OK) {
    return Status(ErrorCode::kUnavailable, failed(endpoint_, request, curl_easy_strerror(code)));
  }
  curl_off_t retry_after = 0;  // seconds, from either form of the header
  if (curl_easy_getinfo(curl, CURLINFO_RETRY_AFTER, &retry_after) == CURLE_OK && retry_after > 0) {
    answer.retry_after = std::chrono::seconds(retry_after);
  }
  return answer;
}

Status Client::stream(const Request& request, const std::function<bool(std::string_view)>& on_line,
                      const std::atomic<bool>* cancel, StreamProgress* progress, std::string* error_body,
                      size_t max_line) {
  // A handle of its own: a stream holds its connection for as long as it
  // lasts, and the reused one stays free for calls.
  CURL* curl = curl_easy_init();
  if (!curl) return no_client(endpoint_);
  LineSink sink;
  sink.on_line = &on_line;
  sink.cancel = cancel;
  sink.progress = progress;
  sink.error_body = error_body;
  sink.max_line = max_line;
  if (cancel) {
    // Called at least once a second while the transfer lasts.
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, cancel_stream);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &sink);
  }
  prepare(curl, endpoint_, request, static_cast<long>(request.timeout.count()));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, take_stream_bytes);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
  // The status is known before the first byte of the body.
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, take_stream_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &sink);
  curl_slist* headers = header_list(request);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  CURLcode code = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  if (progress) progress->http_status = sink.status;
  if (sink.too_long) {
    return Status(ErrorCode::kCorrupt,
                  failed(endpoint_, request, "a line longer than " + std::to_string(max_line) + " bytes"));
  }
  if (sink.status >= 300) return Status::ok();  // the caller words the error from its body
  if (sink.stopped || code == CURLE_OK || code == CURLE_OPERATION_TIMEDOUT ||
      code == CURLE_ABORTED_BY_CALLBACK) {
    if (code == CURLE_OPERATION_TIMEDOUT && sink.status == 0) {
      return Status(ErrorCode::kUnavailable, failed(endpoint_, request, "no answer"));
    }
    return Status::ok();  // ended by us, by the server, or at the timeout
  }
  return Status(ErrorCode::kUnavailable, failed(endpoint_, request, curl_easy_strerror(code)));
}

}  // namespace shoal::cluster::http
