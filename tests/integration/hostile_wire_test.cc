// Messages an attacker (or a confused peer) could send: each is dropped and
// counted by reason, and the agent keeps serving.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zmq.hpp>

#include "crypto/id_card.h"
#include "crypto/identity.h"
#include "harness.h"
#include "protocol/envelope.h"

namespace shoal::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

uint64_t dropped(AgentProcess& agent, const std::string& reason) {
  json status = agent.ctl_json({"status"});
  if (status.is_null()) return 0;
  return status["messages"]["dropped"][reason].get<uint64_t>();
}

TEST(HostileWire, BadMessagesAreDroppedCountedAndTheAgentKeepsServing) {
  ASSERT_TRUE(crypto::initialize().is_ok());
  TempDir dir;
  AgentProcess target("target", dir.path()), peer("peer", dir.path());
  target.init();
  peer.init();
  ASSERT_TRUE(target.start());
  ASSERT_TRUE(peer.start());
  invite_full_mesh({&target, &peer}, "default");

  auto target_card = crypto::parse_id_card(target.identity());
  ASSERT_TRUE(target_card.is_ok());
  // The test holds the invited peer's key, as a peer would.
  auto peer_identity = crypto::Identity::load(peer.data_dir() + "/identity.key");
  ASSERT_TRUE(peer_identity.is_ok()) << peer_identity.status().message();
  crypto::Identity stranger = crypto::Identity::generate();

  // The wire is CURVE-encrypted and only invited keys get in: these tests
  // play an invited peer gone bad, so they dial with the peer's key.
  zmq::context_t context(1);
  zmq::socket_t socket(context, zmq::socket_type::dealer);
  socket.set(zmq::sockopt::linger, 0);
  make_curve_client(socket, *peer_identity, target_card->public_key);
  socket.connect(target.endpoint());
  auto send = [&](const std::vector<uint8_t>& bytes) {
    socket.send(zmq::buffer(bytes), zmq::send_flags::none);
  };

  send({0xde, 0xad, 0xbe, 0xef});
  send(sealed_hello(stranger, target_card->public_key, 1, "evil"));
  send(sealed_hello(*peer_identity, stranger.public_key(), 2, "evil"));
  std::vector<uint8_t> forged = sealed_hello(*peer_identity, target_card->public_key, 3, "evil");
  forged[forged.size() - 5] ^= 0x01;  // inside the signature
  send(forged);
  std::vector<uint8_t> good = sealed_hello(*peer_identity, target_card->public_key, 4, "evil");
  send(good);
  send(good);  // a replay of an accepted message

  EXPECT_TRUE(wait_until([&] { return dropped(target, "Malformed") >= 1; }, 10s));
  EXPECT_TRUE(wait_until([&] { return dropped(target, "UnknownSender") >= 1; }, 10s));
  EXPECT_TRUE(wait_until([&] { return dropped(target, "WrongRecipient") >= 1; }, 10s));
  EXPECT_TRUE(wait_until([&] { return dropped(target, "BadSignature") >= 1; }, 10s));
  EXPECT_TRUE(wait_until([&] { return dropped(target, "Replayed") >= 1; }, 10s));

  // Still serving: it takes and runs a workload.
  std::string manifest = write_workloads(dir.path(), "after", 1, "1", "100ms");
  ASSERT_EQ(target.ctl({"submit", "-f", manifest}).exit_code, 0);
  EXPECT_TRUE(wait_until(
      [&] {
        json list = target.ctl_json({"get", "workloads"});
        return !list.is_null() && list["items"].size() == 1 &&
               list["items"][0]["status"]["phase"] == "Succeeded";
      },
      20s));
}

TEST(HostileWire, PlainTextAndUninvitedKeysNeverReachTheMessageLayer) {
  ASSERT_TRUE(crypto::initialize().is_ok());
  TempDir dir;
  AgentProcess target("target", dir.path());
  target.init();
  ASSERT_TRUE(target.start());
  auto target_card = crypto::parse_id_card(target.identity());
  ASSERT_TRUE(target_card.is_ok());
  // An invited client key (the target issued it an invitation) as the
  // positive control, and a stranger's key.
  crypto::Identity invited = crypto::Identity::generate();
  crypto::Identity stranger = crypto::Identity::generate();
  crypto::IdCard invited_card{"client", "org", invited.public_key(), "tcp://127.0.0.1:1"};
  ASSERT_EQ(target.ctl({"invite", "create", "--to", invited_card.to_string(), "--namespace", "default"})
                .exit_code,
            0);
  const std::vector<uint8_t> garbage = {0xde, 0xad, 0xbe, 0xef};
  zmq::context_t context(1);
  zmq::socket_t plain(context, zmq::socket_type::dealer);
  plain.set(zmq::sockopt::linger, 0);
  plain.connect(target.endpoint());
  plain.send(zmq::buffer(garbage), zmq::send_flags::dontwait);  // queued; the handshake fails
  zmq::socket_t uninvited(context, zmq::socket_type::dealer);
  uninvited.set(zmq::sockopt::linger, 0);
  make_curve_client(uninvited, stranger, target_card->public_key);
  uninvited.connect(target.endpoint());
  uninvited.send(zmq::buffer(garbage), zmq::send_flags::dontwait);
  EXPECT_TRUE(wait_until(
      [&] {
        json status = target.ctl_json({"status"});
        return !status.is_null() && status["messages"]["handshakesRefused"].get<uint64_t>() >= 1;
      },
      10s));
  zmq::socket_t welcome(context, zmq::socket_type::dealer);
  welcome.set(zmq::sockopt::linger, 0);
  make_curve_client(welcome, invited, target_card->public_key);
  welcome.connect(target.endpoint());
  welcome.send(zmq::buffer(garbage), zmq::send_flags::none);
  EXPECT_TRUE(wait_until([&] { return dropped(target, "Malformed") >= 1; }, 10s));
  // Only the invited key's garbage reached the message layer.
  EXPECT_EQ(dropped(target, "Malformed"), 1u);
}

TEST(HostileWire, IdentityKeyReadableByOthersIsRefusedAtStart) {
  TempDir dir;
  AgentProcess agent("loose", dir.path());
  agent.init();
  ASSERT_EQ(::chmod((agent.data_dir() + "/identity.key").c_str(), 0644), 0);
  CommandResult result = run_command({bin_path("shoald"), "run", "--data", agent.data_dir()});
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("chmod 600"), std::string::npos) << result.err;
}

// ~1,100 idle TCP connections (no handshake, no credentials)
// filled a 1,024-descriptor limit, and the next `shoalctl` call aborted the
// agent inside ZeroMQ. Connections are capped below the limit and shed.
TEST(HostileConnections, IdleConnectionsBeyondTheDescriptorLimitNeverTakeTheAgentDown) {
  TempDir dir;
  AgentProcess agent("east", dir.path());
  agent.init();
  agent.set_descriptor_limit(300);
  ASSERT_TRUE(agent.start());
  int port = std::stoi(agent.endpoint().substr(agent.endpoint().rfind(':') + 1));
  std::vector<int> connections;
  for (int i = 0; i < 400; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) {
      connections.push_back(fd);
    } else {
      ::close(fd);
    }
    if (i % 50 == 49) {
      CommandResult status = agent.ctl({"status"});
      ASSERT_EQ(status.exit_code, 0) << "after " << i + 1 << " connections: " << status.err << agent.log();
    }
  }
  EXPECT_TRUE(wait_until([&] { return agent.log().find("inbound connections (the most is") != std::string::npos; },
                         10s))
      << agent.log();
  EXPECT_EQ(agent.ctl({"status"}).exit_code, 0);
  EXPECT_EQ(agent.ctl({"identity"}).exit_code, 0);
  for (int fd : connections) ::close(fd);
  EXPECT_TRUE(agent.running());
  EXPECT_EQ(agent.ctl({"status"}).exit_code, 0);
}

}  // namespace
}  // namespace shoal::testing
