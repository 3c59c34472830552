// The harness's own promises that the suite's stability rests on: ports
// outside the ephemeral range, and an agent whose port a parallel test took
// before its first start is moved instead of failing the test (seen in CI).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <set>

#include "harness.h"

namespace shoal::testing {
namespace {

int port_of(const std::string& endpoint) { return std::stoi(endpoint.substr(endpoint.rfind(':') + 1)); }

// A listening socket on 127.0.0.1:port, closed when the object goes.
class HeldPort {
 public:
  explicit HeldPort(int port) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port));
    held_ = bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 && listen(fd_, 1) == 0;
  }
  ~HeldPort() { close(fd_); }
  bool held() const { return held_; }

 private:
  int fd_;
  bool held_ = false;
};

TEST(Harness, FreePortsAreOutsideTheEphemeralRangeAndNeverTheSameTwice) {
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0, high = 0;
  ASSERT_TRUE(range >> low >> high);
  std::set<int> seen;
  for (int i = 0; i < 50; ++i) {
    int port = free_port();
    EXPECT_TRUE(port < low || port > high) << port << " is in " << low << "-" << high;
    EXPECT_TRUE(seen.insert(port).second) << port << " handed out twice";
  }
}

TEST(Harness, AnAgentWhosePortWasTakenBeforeItsFirstStartMovesToAnother) {
  TempDir dir;
  AgentProcess agent("east", dir.path());
  agent.init();
  const std::string first = agent.endpoint();
  HeldPort taken(port_of(first));
  ASSERT_TRUE(taken.held()) << first;
  ASSERT_TRUE(agent.start()) << agent.log();
  EXPECT_NE(agent.endpoint(), first);
  EXPECT_NE(agent.log().find("Address already in use"), std::string::npos) << agent.log();
  // The agent listens where the harness now says it does.
  HeldPort again(port_of(agent.endpoint()));
  EXPECT_FALSE(again.held()) << agent.endpoint() << " is not the agent's";
  agent.stop();
}

TEST(Harness, AnAgentThatCannotStartIsReportedAtOnceNotAfterTheWait) {
  TempDir dir;
  AgentProcess agent("east", dir.path());
  agent.init();
  agent.set_config("heartbeatInterval", "soon");  // invalid: shoald run exits with a one-line error
  auto started = std::chrono::steady_clock::now();
  EXPECT_FALSE(agent.start());
  EXPECT_FALSE(agent.running());
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(15)) << agent.log();
}

}  // namespace
}  // namespace shoal::testing
