// An HTTP proxy on loopback between an agent and a real kube-apiserver that
// answers as a busy production API server and the network in front of it
// do: 429 with Retry-After, 503, creates that landed but whose answer was
// lost (a 504, or no answer within the client's timeout), watches cut in
// the middle or answered 410 Gone, lists refused. Plain HTTP towards the
// agent (KubeClient takes http://), TLS towards the API server. What the
// API server really did (each pod's creates it took, deletes that found
// nothing) is counted here, where the agent cannot blur it.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace shoal::testing {

class KubeFaultProxy {
 public:
  // Pods carrying this label with value "1", in their first epoch, are never
  // created: every create is answered 504 and not passed on, and their
  // first two deletes 503. The agent must give them up, and fail their copy
  // only once a delete has found the pod gone.
  static constexpr const char* kNoAnswerLabel = "fault.shoal.dev/no-answer";

  struct PodHistory {
    int created = 0;  // creates the API server took (201)
    std::chrono::steady_clock::time_point first_created{};
    std::chrono::system_clock::time_point found_gone{};  // a delete answered 404 ({}: never)
    std::string uid;  // shoal.dev/uid
    std::string epoch;  // shoal.dev/epoch
  };

  // `client_timeout`: the agent's call timeout; a lost answer waits past it.
  KubeFaultProxy(std::string upstream_host, int upstream_port, std::chrono::milliseconds client_timeout,
                 uint32_t seed)
      : upstream_host_(std::move(upstream_host)),
        upstream_port_(upstream_port),
        client_timeout_(client_timeout),
        random_(seed) {
    server_.new_task_queue = [] { return new httplib::ThreadPool(64); };
    auto handle = [this](const httplib::Request& request, httplib::Response& response) {
      serve(request, response);
    };
    server_.Get(".*", handle);
    server_.Post(".*", handle);
    server_.Delete(".*", handle);
    server_.Patch(".*", handle);
    server_.Put(".*", handle);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~KubeFaultProxy() {
    quit_ = true;
    server_.stop();
    thread_.join();
  }
  int port() const { return port_; }

  std::map<std::string, PodHistory> pods() const {
    std::lock_guard lock(mutex_);
    return pods_;
  }
  // How often each fault was injected, by name.
  std::map<std::string, int> injected() const {
    std::lock_guard lock(mutex_);
    return injected_;
  }

 private:
  bool chance(double p) {
    std::lock_guard lock(mutex_);
    return std::uniform_real_distribution<double>(0, 1)(random_) < p;
  }
  void count(const std::string& fault) {
    std::lock_guard lock(mutex_);
    ++injected_[fault];
  }
  void refuse(httplib::Response& response, int status, const std::string& fault) {
    count(fault);
    if (status == 429) response.set_header("Retry-After", "1");
    response.status = status;
    response.set_content(R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected )" + fault +
                             R"(","code":)" + std::to_string(status) + "}",
                         "application/json");
  }
  std::unique_ptr<httplib::SSLClient> upstream() const {
    auto client = std::make_unique<httplib::SSLClient>(upstream_host_, upstream_port_);
    client->enable_server_certificate_verification(false);  // loopback, the test's own cluster
    client->set_connection_timeout(5);
    client->set_read_timeout(360);
    return client;
  }
  static httplib::Headers passed_headers(const httplib::Request& request) {
    httplib::Headers headers;
    for (const char* name : {"Authorization", "Accept", "Content-Type"}) {
      if (request.has_header(name)) headers.emplace(name, request.get_header_value(name));
    }
    return headers;
  }
  static std::string target_of(const httplib::Request& request) {
    std::string target = request.path;
    std::string query;
    for (const auto& [key, value] : request.params) {
      query += (query.empty() ? "?" : "&") + httplib::detail::encode_query_param(key) + "=" +
               httplib::detail::encode_query_param(value);
    }
    return target + query;
  }
  // The request passed on as it is; false when the API server did not answer.
  bool forward(const httplib::Request& request, httplib::Response& response) {
    auto client = upstream();
    httplib::Result result = [&] {
      if (request.method == "GET") return client->Get(target_of(request), passed_headers(request));
      if (request.method == "POST") {
        return client->Post(target_of(request), passed_headers(request), request.body, "application/json");
      }
      if (request.method == "DELETE") {
        return client->Delete(target_of(request), passed_headers(request), request.body, "application/json");
      }
      if (request.method == "PATCH") {
        return client->Patch(target_of(request), passed_headers(request), request.body,
                             request.get_header_value("Content-Type").c_str());
      }
      return client->Put(target_of(request), passed_headers(request), request.body, "application/json");
    }();
    if (!result) {
      response.status = 502;
      return false;
    }
    response.status = result->status;
    response.set_content(result->body, result->get_header_value("Content-Type").c_str());
    return true;
  }
  void serve(const httplib::Request& request, httplib::Response& response) {
    bool pods = request.path.find("/pods") != std::string::npos && request.path.find("/log") == std::string::npos;
    if (request.method == "GET" && request.has_param("watch")) return watch(request, response);
    if (request.method == "GET" && pods && request.path.ends_with("/pods")) {
      // Lists are few: every third of them is refused, by turns 503 and 429.
      int list = ++pod_lists_;
      if (list % 3 == 2) return refuse(response, list % 2 ? 503 : 429, list % 2 ? "list-503" : "list-429");
    }
    if (request.method == "POST" && pods) return create(request, response);
    if (request.method == "DELETE" && pods) return remove(request, response);
    forward(request, response);
  }
  void create(const httplib::Request& request, httplib::Response& response) {
    nlohmann::json pod = nlohmann::json::parse(request.body, nullptr, false);
    std::string name, uid, epoch;
    bool no_answer = false;
    if (!pod.is_discarded() && pod.contains("metadata")) {
      name = pod["metadata"].value("name", "");
      nlohmann::json labels = pod["metadata"].value("labels", nlohmann::json::object());
      uid = labels.value("shoal.dev/uid", "");
      epoch = labels.value("shoal.dev/epoch", "");
      no_answer = labels.value(kNoAnswerLabel, "") == "1" && epoch == "1";
    }
    if (no_answer) {
      std::lock_guard lock(mutex_);
      no_answer_pods_.insert(name);
      pods_[name].uid = uid;
      pods_[name].epoch = epoch;
    }
    if (no_answer) return refuse(response, 504, "create-no-answer");
    if (chance(0.08)) return refuse(response, 429, "create-429");
    if (chance(0.05)) return refuse(response, 503, "create-503");
    bool lose_answer = chance(0.05), time_out = !lose_answer && chance(0.03);
    forward(request, response);
    if (response.status == 201) {
      std::lock_guard lock(mutex_);
      PodHistory& history = pods_[name];
      if (history.created++ == 0) history.first_created = std::chrono::steady_clock::now();
      history.uid = uid;
      history.epoch = epoch;
    }
    if (lose_answer) return refuse(response, 504, "create-answer-lost");
    if (time_out) {
      count("create-timeout");
      wait_for(client_timeout_ + std::chrono::seconds(1));
    }
  }
  void remove(const httplib::Request& request, httplib::Response& response) {
    std::string name = request.path.substr(request.path.rfind('/') + 1);
    {
      std::lock_guard lock(mutex_);
      if (no_answer_pods_.count(name) && deletes_refused_[name] < 2) {
        ++deletes_refused_[name];
        ++injected_["delete-no-answer-503"];
        response.status = 503;
        response.set_content(R"({"kind":"Status","code":503})", "application/json");
        return;
      }
    }
    if (chance(0.08)) return refuse(response, 429, "delete-429");
    if (chance(0.04)) return refuse(response, 503, "delete-503");
    forward(request, response);
    if (response.status == 404) {
      std::lock_guard lock(mutex_);
      auto it = pods_.find(name);
      if (it != pods_.end() && it->second.found_gone == std::chrono::system_clock::time_point{}) {
        it->second.found_gone = std::chrono::system_clock::now();
      }
    }
  }
  // A watch: one in six answered 410 Gone at once (its version too old:
  // the agent lists again), the others streamed from the API server and
  // cut after 1 to 4 s.
  void watch(const httplib::Request& request, httplib::Response& response) {
    if (++watches_ % 6 == 3) {  // one in six
      count("watch-410");
      response.status = 200;
      response.set_content(
          R"({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version","reason":"Expired","code":410}})"
          "\n",
          "application/json");
      return;
    }
    std::chrono::milliseconds lasts;
    {
      std::lock_guard lock(mutex_);
      lasts = std::chrono::milliseconds(std::uniform_int_distribution<int>(1000, 4000)(random_));
    }
    std::string target = target_of(request);
    httplib::Headers headers = passed_headers(request);
    response.status = 200;
    response.set_chunked_content_provider(
        "application/json", [this, target, headers, lasts](size_t, httplib::DataSink& sink) {
          auto until = std::chrono::steady_clock::now() + lasts;
          auto client = upstream();
          client->set_read_timeout(std::chrono::duration_cast<std::chrono::seconds>(lasts).count() + 1);
          client->Get(target, headers, [&](const char* data, size_t length) {
            if (quit_ || std::chrono::steady_clock::now() >= until) return false;
            return sink.write(data, length);
          });
          count("watch-cut");
          return false;  // the connection is cut, as a load balancer does
        });
  }
  void wait_for(std::chrono::milliseconds how_long) {
    auto until = std::chrono::steady_clock::now() + how_long;
    while (!quit_ && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  std::string upstream_host_;
  int upstream_port_;
  std::chrono::milliseconds client_timeout_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<bool> quit_{false};
  mutable std::mutex mutex_;
  std::minstd_rand random_;  // guarded by mutex_
  std::map<std::string, PodHistory> pods_;
  std::map<std::string, int> injected_;
  std::set<std::string> no_answer_pods_;
  std::map<std::string, int> deletes_refused_;
  std::atomic<int> pod_lists_{0}, watches_{0};
};

}  // namespace shoal::testing
