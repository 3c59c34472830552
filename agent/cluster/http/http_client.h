// One HTTP client for the backends that speak to an API server
// (slurmrestd, kube-apiserver): libcurl behind a small interface, one
// library init for the process, a handle reused call after call so its
// connection is kept, TLS verified against the server's CA (or a client
// certificate), Unix sockets, a timeout on every call, and a stream read
// line by line for watches.
//
// A client is not thread-safe: a thread keeps its own (a watch is a
// stream() of its own handle, so it runs beside calls on another client).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace shoal::cluster::http {

// Where a server is and how to trust it.
struct Endpoint {
  std::string base_url;     // "https://10.0.0.1:6443", "http://localhost"
  std::string unix_socket;  // when set, the connection goes there
  std::string ca_pem;       // verify the server against this CA, not the system's
  std::string client_cert_pem, client_key_pem;  // TLS client authentication
  std::string name;         // who it is in errors: "kube-apiserver", "slurmrestd"
};

struct Request {
  const char* method = "GET";
  std::string path;                  // appended to the endpoint's base_url
  std::vector<std::string> headers;  // "Name: value"
  std::string body;                  // sent when not empty
  std::chrono::milliseconds timeout{5000};          // the whole call
  std::chrono::milliseconds connect_timeout{5000};  // the connection alone
};

struct Answer {
  long status = 0;  // the HTTP status; also set when a call broke after it arrived
  std::string body;
  std::chrono::seconds retry_after{0};  // its Retry-After header, 0 when none
};

// What a stream's caller learns besides its lines.
struct StreamProgress {
  long http_status = 0;           // what the server answered, 0 for none
  std::function<void()> on_open;  // once it answered 2xx, before any line
};

class Client {
 public:
  explicit Client(Endpoint endpoint);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const Endpoint& endpoint() const { return endpoint_; }

  // One request. Its answer whatever its status; Unavailable, naming the
  // server and the call, when none came within the timeout or the transfer
  // broke — `status_seen` (if given) then says what status line came first.
  Result<Answer> call(const Request& request, long* status_seen = nullptr);

  // Streams a long answer: each non-empty line to `on_line`, until the
  // server ends it, `on_line` returns false, `request.timeout` passes, or
  // `cancel` (if given) turns true (noticed within a second). Ok in all
  // four cases; Unavailable when it could not be opened or broke; for an
  // HTTP error status, `error_body` (at most 64 KiB of it) and the status
  // in `progress`, and Ok — the caller words the error. A line longer than
  // `max_line` is refused (Corrupt).
  Status stream(const Request& request, const std::function<bool(std::string_view)>& on_line,
                const std::atomic<bool>* cancel, StreamProgress* progress, std::string* error_body,
                size_t max_line = 16 << 20);

 private:
  Endpoint endpoint_;
  void* curl_ = nullptr;  // the handle calls reuse (keeps the connection)
};

}  // namespace shoal::cluster::http
