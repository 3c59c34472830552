// The loop by itself: a real state database, real ZeroMQ sockets and a
// real agent (the default one-node sim cluster), driven one iteration at a
// time through the control socket the way shoalctl drives it.
#include "agent/runtime/loop.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <functional>

#include <spdlog/sinks/null_sink.h>
#include <zmq_addon.hpp>

#include "agent/control/commands.h"
#include "agent/control/data_dir.h"
#include "crypto/identity.h"
#include "model/manifest.h"
#include "tests/support/immutable_file.h"

namespace shoal::runtime {
namespace {

using shoal::testing::set_immutable;

using nlohmann::json;
using namespace std::chrono_literals;

std::string workload_manifest(const std::string& name) {
  return "apiVersion: shoal.dev/v1\nkind: Workload\nmetadata:\n  name: " + name +
         "\n  namespace: default\nspec:\n  resources:\n    cpu: \"1\"\n  duration: 30s\n";
}

// How many workloads named `name` the database file holds, read over a
// connection of its own: what a restarted agent would find.
int committed_workloads(const std::string& path, const std::string& name) {
  sqlite3* db = nullptr;
  int count = -1;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* statement = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM workloads WHERE name = ?", -1, &statement,
                           nullptr) == SQLITE_OK) {
      sqlite3_bind_text(statement, 1, name.c_str(), -1, SQLITE_TRANSIENT);
      if (sqlite3_step(statement) == SQLITE_ROW) count = sqlite3_column_int(statement, 0);
    }
    sqlite3_finalize(statement);
  }
  sqlite3_close(db);
  return count;
}

// A shoalctl-like client: a REQ socket on the control socket, or a DEALER
// for a watch (which hears many replies to one request).
class Client {
 public:
  Client(zmq::context_t& context, const std::string& endpoint, zmq::socket_type type)
      : socket_(context, type), type_(type) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.connect(endpoint);
  }
  void send(const json& request) {
    zmq::multipart_t message;
    if (type_ == zmq::socket_type::dealer) message.addstr("");
    message.addstr(request.dump());
    message.send(socket_);
  }
  // The next reply, if one arrives within `wait`.
  std::optional<json> poll(std::chrono::milliseconds wait = std::chrono::milliseconds(0)) {
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, wait) == 0) return std::nullopt;
    zmq::multipart_t message;
    if (!message.recv(socket_, static_cast<int>(zmq::recv_flags::dontwait))) return std::nullopt;
    return json::parse(message[message.size() - 1].to_string());
  }

 private:
  zmq::socket_t socket_;
  zmq::socket_type type_;
};

class LoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(crypto::initialize().is_ok());
    char pattern[] = "/tmp/shoal-loop.XXXXXX";
    dir_ = mkdtemp(pattern);
    auto opened = store::sqlite::SqliteStore::open(database_path());
    ASSERT_TRUE(opened.is_ok()) << opened.status().message();
    store_ = std::move(opened).value();
    peers_.set(zmq::sockopt::linger, 0);
    peers_.bind("tcp://127.0.0.1:*");
    guard_.emplace(context_, peers_, peers_.get(zmq::sockopt::last_endpoint), 64, *logger_);
    control_.set(zmq::sockopt::linger, 0);
    control_.set(zmq::sockopt::router_mandatory, true);
    control_.bind(control::control_endpoint(dir_));
    ASSERT_EQ(::pipe(stop_pipe_), 0);
    factory_.emplace(dir_, core::AgentConfig{}, crypto::Identity::generate(),
                     model::default_cluster_spec("east"),
                     cluster::ExecOptions{}, clock_, transport_, *store_, rng_, logger_);
    loop_.emplace(*factory_, *store_, transport_,
                  LoopSockets{peers_, control_, nullptr, stop_pipe_[0]}, *guard_,
                  PeerRateLimiter(1000, 1000), *logger_);
  }
  void TearDown() override {
    loop_.reset();
    ::close(stop_pipe_[0]);
    ::close(stop_pipe_[1]);
    std::filesystem::remove_all(dir_);
  }

  std::string database_path() const { return dir_ + "/state.db"; }
  std::unique_ptr<Client> client(zmq::socket_type type = zmq::socket_type::req) {
    return std::make_unique<Client>(context_, control::control_endpoint(dir_), type);
  }

  // Iterates the loop until `done` holds; false after `limit`.
  bool iterate_until(const std::function<bool()>& done, std::chrono::seconds limit = 20s) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      auto next = loop_->run_once(20ms);
      EXPECT_TRUE(next.is_ok()) << next.status().message();
      if (!next.is_ok() || *next == Loop::Next::kStop) return false;
    }
    return true;
  }

  // Sends `request` and iterates until its reply comes.
  json call(const json& request) {
    auto ctl = client();
    ctl->send(request);
    std::optional<json> reply;
    EXPECT_TRUE(iterate_until([&] { return (reply = ctl->poll()).has_value(); }));
    return reply.value_or(json());
  }

  std::string dir_;
  std::shared_ptr<spdlog::logger> logger_ =
      std::make_shared<spdlog::logger>("loop-test", std::make_shared<spdlog::sinks::null_sink_mt>());
  std::unique_ptr<store::sqlite::SqliteStore> store_;
  zmq::context_t context_{1};
  zmq::socket_t peers_{context_, zmq::socket_type::router};
  zmq::socket_t control_{context_, zmq::socket_type::router};
  std::optional<ConnectionGuard> guard_;
  int stop_pipe_[2] = {-1, -1};
  SystemClock clock_;
  SodiumRng rng_;
  ZmqTransport transport_{context_, std::nullopt};
  std::optional<AgentFactory> factory_;
  std::optional<Loop> loop_;
};

TEST_F(LoopTest, ASubmitIsOnDiskWhenItsReplyArrives) {
  ASSERT_TRUE(loop_->boot().is_ok());
  auto ctl = client();
  ctl->send({{"command", "submit"}, {"manifest", workload_manifest("first")}});
  std::optional<json> reply;
  ASSERT_TRUE(iterate_until([&] { return (reply = ctl->poll()).has_value(); }));
  ASSERT_TRUE(reply->value("ok", false)) << reply->dump();
  // The reply came: whatever reads the file now finds the workload.
  EXPECT_EQ(committed_workloads(database_path(), "first"), 1);
  EXPECT_TRUE(loop_->agent().find_workload("default", "first").has_value());
}

TEST_F(LoopTest, ARequestThatIsNotJsonIsAnsweredAndTheLoopGoesOn) {
  ASSERT_TRUE(loop_->boot().is_ok());
  auto ctl = client();
  zmq::socket_t raw(context_, zmq::socket_type::req);
  raw.set(zmq::sockopt::linger, 0);
  raw.connect(control::control_endpoint(dir_));
  raw.send(zmq::str_buffer("{not json"), zmq::send_flags::none);
  zmq::message_t answer;
  ASSERT_TRUE(iterate_until([&] { return raw.recv(answer, zmq::recv_flags::dontwait).has_value(); }));
  json refused = json::parse(answer.to_string());
  EXPECT_FALSE(refused.value("ok", true));
  EXPECT_EQ(refused.value("code", ""), "InvalidArgument");
  EXPECT_EQ(call({{"command", "status"}}).value("ok", false), true);
}

TEST_F(LoopTest, ASubmitInJsonFormIsReadAsItsYamlWouldBe) {
  ASSERT_TRUE(loop_->boot().is_ok());
  auto documents = model::workload_documents_as_json(workload_manifest("from-json"));
  ASSERT_TRUE(documents.is_ok()) << documents.status().message();
  json reply = call({{"command", "submit"}, {"workloads", *documents}});
  ASSERT_TRUE(reply.value("ok", false)) << reply.dump();
  EXPECT_EQ(reply["items"][0]["name"], "from-json");
  EXPECT_EQ(committed_workloads(database_path(), "from-json"), 1);

  json both = call({{"command", "submit"}, {"workloads", *documents}, {"manifest", workload_manifest("x")}});
  EXPECT_EQ(both.value("code", ""), "InvalidArgument");
  EXPECT_NE(both.value("error", "").find("expected one of \"manifest\" (YAML) or \"workloads\""),
            std::string::npos)
      << both.dump();
  json neither = call({{"command", "submit"}});
  EXPECT_EQ(neither.value("code", ""), "InvalidArgument");
  json too_many = call({{"command", "submit"},
                        {"workloads", json(std::vector<json>(control::kMaxWorkloadsPerSubmit + 1,
                                                             (*documents)[0]))}});
  EXPECT_NE(too_many.value("error", "").find("expected at most 100 workloads per request, got 101"),
            std::string::npos)
      << too_many.dump();
}

// Nested half a million deep, a request would overflow the stack of any
// step that recursed over it (decoding copies the patch); it is refused
// before it is decoded.
TEST_F(LoopTest, ARequestNestedTooDeepIsRefusedAndTheLoopGoesOn) {
  ASSERT_TRUE(loop_->boot().is_ok());
  zmq::socket_t raw(context_, zmq::socket_type::req);
  raw.set(zmq::sockopt::linger, 0);
  raw.connect(control::control_endpoint(dir_));
  std::string patch;
  for (int i = 0; i < (1 << 19); ++i) patch += R"({"a":)";
  patch += "1" + std::string(1 << 19, '}');
  std::string deep =
      R"({"command": "patch-workload", "namespace": "default", "name": "w", "patch": )" + patch + "}";
  raw.send(zmq::buffer(deep), zmq::send_flags::none);
  zmq::message_t answer;
  ASSERT_TRUE(iterate_until([&] { return raw.recv(answer, zmq::recv_flags::dontwait).has_value(); }));
  json refused = json::parse(answer.to_string());
  EXPECT_EQ(refused.value("code", ""), "InvalidArgument");
  EXPECT_EQ(refused.value("error", ""), "control request: nested deeper than 64 levels");
  EXPECT_EQ(call({{"command", "status"}}).value("ok", false), true);
}

TEST_F(LoopTest, AWatcherHearsOfCommittedChangesAndOfTheStop) {
  ASSERT_TRUE(loop_->boot().is_ok());
  auto watcher = client(zmq::socket_type::dealer);
  watcher->send({{"command", "watch-workloads"}, {"namespace", "default"}});
  std::optional<json> started;
  ASSERT_TRUE(iterate_until([&] { return (started = watcher->poll()).has_value(); }));
  ASSERT_TRUE(started->value("ok", false)) << started->dump();
  EXPECT_EQ(loop_->watchers(), 1u);

  ASSERT_TRUE(call({{"command", "submit"}, {"manifest", workload_manifest("watched")}}).value("ok", false));
  bool heard = false;
  ASSERT_TRUE(iterate_until([&] {
    while (auto update = watcher->poll()) {
      for (const auto& item : (*update)["items"]) heard |= item["metadata"]["name"] == "watched";
    }
    return heard;
  }));

  // A byte on the stop descriptor: the loop stops, and tells its watcher why.
  ASSERT_EQ(::write(stop_pipe_[1], "x", 1), 1);
  auto next = loop_->run_once(1s);
  ASSERT_TRUE(next.is_ok());
  EXPECT_EQ(*next, Loop::Next::kStop);
  // Changes committed before the stop may still be on their way: the
  // last message is the end.
  std::optional<json> ended;
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < deadline) {
    std::optional<json> message = watcher->poll(100ms);
    if (message && !message->value("ok", true)) {
      ended = message;
      break;
    }
  }
  ASSERT_TRUE(ended.has_value()) << "the watch never ended";
  EXPECT_FALSE(ended->value("ok", true));
  EXPECT_NE(ended->value("error", "").find("stopping"), std::string::npos);
}

// A database that cannot be written: the batch is rolled back, the request
// refused with the reason, reads still answered; once the disk is back the
// probe finds it and the agent serves again, with a new boot.
TEST_F(LoopTest, ADatabaseThatCannotBeWrittenTurnsTheLoopReadOnlyUntilItCanAgain) {
  ASSERT_TRUE(loop_->boot().is_ok());
  uint64_t first_boot = loop_->agent().boot();
  // The submit waits in the socket before the disk fails: whichever write
  // of the next batch finds the disk failing, the submit is refused, never
  // accepted and then lost.
  auto submitter = client();
  submitter->send({{"command", "submit"}, {"manifest", workload_manifest("refused")}});
  zmq::pollitem_t waiting{control_.handle(), 0, ZMQ_POLLIN, 0};
  ASSERT_EQ(zmq::poll(&waiting, 1, 5s), 1);
  std::vector<std::string> files = {database_path(), database_path() + "-wal"};
  if (!set_immutable(files[0], true) || !set_immutable(files[1], true)) {
    for (const auto& file : files) set_immutable(file, false);
    GTEST_SKIP() << "cannot make files immutable here (needs CAP_LINUX_IMMUTABLE)";
  }
  std::optional<json> reply;
  ASSERT_TRUE(iterate_until([&] { return (reply = submitter->poll()).has_value(); }));
  json refused = *reply;
  json status = call({{"command", "status"}});
  for (const auto& file : files) set_immutable(file, false);

  EXPECT_FALSE(refused.value("ok", true));
  EXPECT_EQ(refused.value("code", ""), "Storage");
  EXPECT_NE(refused.value("error", "").find("cannot write its state database"), std::string::npos)
      << refused.dump();
  EXPECT_TRUE(status.value("ok", false));
  EXPECT_FALSE(status["storage"]["writable"].get<bool>());
  EXPECT_EQ(committed_workloads(database_path(), "refused"), 0);

  ASSERT_TRUE(iterate_until([&] { return !loop_->read_only(); }));
  EXPECT_GT(loop_->agent().boot(), first_boot);
  EXPECT_TRUE(call({{"command", "submit"}, {"manifest", workload_manifest("accepted")}}).value("ok", false));
  EXPECT_EQ(committed_workloads(database_path(), "accepted"), 1);
}

}  // namespace
}  // namespace shoal::runtime
