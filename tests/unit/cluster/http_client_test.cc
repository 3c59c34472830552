// The backends' HTTP client against a real HTTP server on loopback:
// answers whatever their status, Retry-After, a server that is not there,
// and streams cut into lines, refused when a line is too long, ended by
// the caller or by a cancel, and an error status with its body. (Unix
// sockets: slurm_live_test, against slurmrestd.)
#include "agent/cluster/http/http_client.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <thread>

namespace shoal::cluster::http {
namespace {

using namespace std::chrono_literals;

// An HTTP server on a port of its own for one test.
class Server {
 public:
  // Serving before it returns (a stop() that came before the server's
  // thread ran would be missed, and the thread would never end).
  Server() {
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    auto until = std::chrono::steady_clock::now() + 10s;
    while (!server_.is_running() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
  }
  ~Server() {
    quit_ = true;
    server_.stop();
    thread_.join();
  }
  httplib::Server& routes() { return server_; }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  const std::atomic<bool>& quitting() const { return quit_; }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<bool> quit_{false};
};

Endpoint endpoint_at(const std::string& base_url) {
  Endpoint endpoint;
  endpoint.base_url = base_url;
  endpoint.name = "test-server";
  return endpoint;
}

Request get(const std::string& path) {
  Request request;
  request.path = path;
  request.timeout = 5s;
  request.connect_timeout = 5s;
  return request;
}

TEST(HttpClient, ACallReturnsTheAnswerWhateverItsStatusWithRetryAfterAndTheHeadersSent) {
  Server server;
  server.routes().Post("/things", [](const httplib::Request& request, httplib::Response& response) {
    response.status = 429;
    response.set_header("Retry-After", "7");
    response.set_content(request.get_header_value("X-Who") + ":" + request.body, "text/plain");
  });
  Client client(endpoint_at(server.base_url()));
  Request post = get("/things");
  post.method = "POST";
  post.headers = {"X-Who: me"};
  post.body = "payload";
  for (int round = 0; round < 2; ++round) {  // the reused handle answers again
    Result<Answer> answer = client.call(post);
    ASSERT_TRUE(answer.is_ok()) << answer.status().message();
    EXPECT_EQ(answer->status, 429);
    EXPECT_EQ(answer->body, "me:payload");
    EXPECT_EQ(answer->retry_after, 7s);
  }
}

TEST(HttpClient, AServerThatIsNotThereIsUnavailableNamingItAndTheCall) {
  int port = 0;
  {
    Server gone;  // a port that was just free, then closed again
    port = std::stoi(gone.base_url().substr(gone.base_url().rfind(':') + 1));
  }
  Client client(endpoint_at("http://127.0.0.1:" + std::to_string(port)));
  long seen = -1;
  Result<Answer> answer = client.call(get("/nothing"), &seen);
  ASSERT_FALSE(answer.is_ok());
  EXPECT_EQ(answer.status().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(answer.status().message().rfind("test-server: GET /nothing: ", 0), 0u) << answer.status().message();
  EXPECT_EQ(seen, 0);
}

// Lines written in pieces that do not follow the lines.
void serve_lines(Server& server) {
  server.routes().Get("/lines", [](const httplib::Request&, httplib::Response& response) {
    response.set_chunked_content_provider("application/json", [](size_t, httplib::DataSink& sink) {
      sink.write("one\ntw", 6);
      sink.write("o\n\nthree\n", 9);
      sink.done();
      return true;
    });
  });
}

TEST(HttpClient, AStreamIsCutIntoItsLinesAndSaysWhenItOpened) {
  Server server;
  serve_lines(server);
  Client client(endpoint_at(server.base_url()));
  std::vector<std::string> lines;
  bool opened_before_a_line = false;
  StreamProgress progress;
  progress.on_open = [&] { opened_before_a_line = lines.empty(); };
  Status streamed = client.stream(
      get("/lines"), [&](std::string_view line) { lines.emplace_back(line); return true; }, nullptr, &progress,
      nullptr);
  ASSERT_TRUE(streamed.is_ok()) << streamed.message();
  EXPECT_EQ(lines, (std::vector<std::string>{"one", "two", "three"}));
  EXPECT_TRUE(opened_before_a_line);
  EXPECT_EQ(progress.http_status, 200);
}

TEST(HttpClient, AStreamEndsWhenItsReaderSaysSoAndRefusesALineTooLong) {
  Server server;
  serve_lines(server);
  Client client(endpoint_at(server.base_url()));
  std::vector<std::string> lines;
  Status stopped = client.stream(
      get("/lines"), [&](std::string_view line) { lines.emplace_back(line); return false; }, nullptr, nullptr,
      nullptr);
  EXPECT_TRUE(stopped.is_ok()) << stopped.message();
  EXPECT_EQ(lines, (std::vector<std::string>{"one"}));

  Status too_long = client.stream(get("/lines"), [](std::string_view) { return true; }, nullptr, nullptr, nullptr,
                                  /*max_line=*/2);
  EXPECT_EQ(too_long.code(), ErrorCode::kCorrupt) << too_long.message();
  EXPECT_NE(too_long.message().find("a line longer than 2 bytes"), std::string::npos) << too_long.message();
}

TEST(HttpClient, AStreamWithAnErrorStatusKeepsItsBodyForTheCaller) {
  Server server;
  server.routes().Get("/gone", [](const httplib::Request&, httplib::Response& response) {
    response.status = 410;
    response.set_content("{\"reason\":\"Expired\"}\n", "application/json");
  });
  Client client(endpoint_at(server.base_url()));
  StreamProgress progress;
  std::string error_body;
  int lines = 0;
  Status streamed = client.stream(get("/gone"), [&](std::string_view) { return ++lines, true; }, nullptr,
                                  &progress, &error_body);
  EXPECT_TRUE(streamed.is_ok()) << streamed.message();
  EXPECT_EQ(progress.http_status, 410);
  EXPECT_EQ(error_body, "{\"reason\":\"Expired\"}\n");
  EXPECT_EQ(lines, 0);
}

TEST(HttpClient, ACancelEndsAStreamThatWouldLastLonger) {
  Server server;
  const std::atomic<bool>& quitting = server.quitting();
  server.routes().Get("/forever", [&quitting](const httplib::Request&, httplib::Response& response) {
    response.set_chunked_content_provider("application/json", [&quitting](size_t, httplib::DataSink& sink) {
      sink.write("tick\n", 5);
      std::this_thread::sleep_for(50ms);  // the server's pace, not a wait for a condition
      return !quitting.load();
    });
  });
  Client client(endpoint_at(server.base_url()));
  Request forever = get("/forever");
  forever.timeout = 120s;  // a line each 50 ms: about 2,400 lines if the cancel did nothing
  std::atomic<bool> cancel{false};
  int lines = 0;
  Status streamed = client.stream(
      forever, [&](std::string_view) { if (++lines == 3) cancel = true; return true; }, &cancel, nullptr, nullptr);
  EXPECT_TRUE(streamed.is_ok()) << streamed.message();
  EXPECT_GE(lines, 3);
  EXPECT_LT(lines, 600) << "the stream ran on after its cancel";  // noticed within a second: about 20 more
}

}  // namespace
}  // namespace shoal::cluster::http
