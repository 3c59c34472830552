// Input an operator (or an attacker handing them files) could give shoald
// and shoalctl: names that are not names, bytes that are not
// UTF-8, files that never end, wrong types on the control socket, and a
// data directory others can read. Each is refused on one line with exit
// code 2, and the agent keeps serving.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <thread>

#include <zmq.hpp>

#include "crypto/identity.h"
#include "crypto/invitation.h"
#include "harness.h"

namespace shoal::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

bool one_line(const std::string& text) {
  return !text.empty() && text.find('\n') == text.size() - 1;
}

unsigned mode_of(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return 0;
  return info.st_mode & 07777;
}

// Fourteen lines that expand to a billion nodes: ten scalars, then eight
// lists of ten aliases of the list before, used once as the labels.
std::string alias_bomb_manifest() {
  std::string text = "apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: bomb}\n";
  text += "l0: &l0 [x,x,x,x,x,x,x,x,x,x]\n";
  for (int level = 1; level <= 8; ++level) {
    std::string alias = "*l" + std::to_string(level - 1);
    text += "l" + std::to_string(level) + ": &l" + std::to_string(level) + " [";
    for (int i = 0; i < 10; ++i) text += (i ? "," : "") + alias;
    text += "]\n";
  }
  return text + "spec: {resources: {cpu: 1}, labels: *l8}\n";
}

class HostileInput : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(crypto::initialize().is_ok());
    agent_.init();
    ASSERT_TRUE(agent_.start());
  }
  TempDir dir_;
  AgentProcess agent_{"east", dir_.path()};
};

TEST_F(HostileInput, InitRefusesAnOrgThatIsNotAName) {
  for (std::string org : {std::string("acme\xff"), std::string("Acme Corp"), std::string("a\nb")}) {
    CommandResult result = run_command({bin_path("shoald"), "init", "--data", dir_.path() + "/x",
                                        "--cluster", "x", "--org", org, "--listen", "tcp://127.0.0.1:1"});
    EXPECT_EQ(result.exit_code, 2) << org;
    EXPECT_NE(result.err.find("--org: expected lowercase letters"), std::string::npos) << result.err;
    EXPECT_TRUE(one_line(result.err)) << result.err;
  }
}

// A crash once: an org that is not UTF-8, carried by a token
// correctly signed by its issuer, made every later `peers` abort the agent.
TEST_F(HostileInput, ATokenCarryingABadNameIsRefusedAndTheAgentKeepsServing) {
  crypto::Identity issuer = crypto::Identity::generate();
  auto own_card = crypto::parse_id_card(agent_.identity());
  ASSERT_TRUE(own_card.is_ok());
  for (std::string org : {std::string("evil\xff"), std::string("Evil Corp")}) {
    crypto::Invitation invitation;
    invitation.id = "0123456789abcdef";
    invitation.issuer = {"evil", org, issuer.public_key(), "tcp://127.0.0.1:1"};
    invitation.subject = own_card->public_key;
    invitation.namespaces = {"default"};
    invitation.created = invitation.not_before =
        std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now());
    CommandResult accepted = agent_.ctl({"invite", "accept", crypto::issue_token(invitation, issuer)});
    EXPECT_EQ(accepted.exit_code, 2) << accepted.err;
    EXPECT_NE(accepted.err.find("invitation token issuer"), std::string::npos) << accepted.err;
    EXPECT_TRUE(one_line(accepted.err)) << accepted.err;
  }
  EXPECT_EQ(agent_.ctl({"peers"}).exit_code, 0);
  EXPECT_TRUE(agent_.ctl_json({"invite", "list"})["items"].empty());
}

TEST_F(HostileInput, ShoalctlRefusesBadFilesWithoutCrashingOrEatingMemory) {
  CommandResult endless = agent_.ctl({"submit", "-f", "/dev/zero"});
  EXPECT_EQ(endless.exit_code, 2);
  EXPECT_NE(endless.err.find("expected at most"), std::string::npos) << endless.err;

  std::string not_utf8 = dir_.path() + "/bad.yaml";
  std::ofstream(not_utf8) << "apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: a, labels: {x: \"\xc3\"}}\n"
                             "spec: {resources: {cpu: 1}}\n";
  CommandResult bad = agent_.ctl({"submit", "-f", not_utf8});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("line 3: expected UTF-8 text"), std::string::npos) << bad.err;
  EXPECT_TRUE(one_line(bad.err)) << bad.err;

  std::string twice = dir_.path() + "/twice.yaml";
  std::ofstream(twice) << "apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: a}\n"
                          "spec: {resources: {cpu: 1, cpu: 2}}\n";
  CommandResult duplicate = agent_.ctl({"submit", "-f", twice});
  EXPECT_EQ(duplicate.exit_code, 2);
  EXPECT_NE(duplicate.err.find("key \"cpu\" appears twice"), std::string::npos) << duplicate.err;

  std::string tiny = dir_.path() + "/tiny.yaml";
  std::ofstream(tiny) << "apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: a}\n"
                         "spec: {resources: {cpu: \"0.0001\"}}\n";
  CommandResult precise = agent_.ctl({"submit", "-f", tiny});
  EXPECT_EQ(precise.exit_code, 2);
  EXPECT_NE(precise.err.find("spec.resources.cpu: expected at most three decimal places"), std::string::npos)
      << precise.err;

  CommandResult card = agent_.ctl({"invite", "create", "--to", "shoal-id:v1:x:\xff:k:tcp://h:1", "--namespace", "default"});
  EXPECT_EQ(card.exit_code, 2) << card.err;
  EXPECT_TRUE(one_line(card.err)) << card.err;
  EXPECT_EQ(agent_.ctl({"status"}).exit_code, 0) << "still serving";
}

// The bomb made shoald spin and stop answering until SIGKILL.
TEST_F(HostileInput, AnAliasBombIsRefusedAndTheAgentAnswersThroughout) {
  std::string bomb = dir_.path() + "/bomb.yaml";
  std::ofstream(bomb) << alias_bomb_manifest();
  // Status is asked again and again meanwhile; each must be answered (the
  // client's timeout only turns a stalled agent into a failure).
  std::atomic<bool> done{false};
  std::atomic<int> answered{0}, unanswered{0};
  std::thread asker([&] {
    ControlClient status(agent_.data_dir(), 10s);
    while (!done) {
      if (status.ask(R"({"command": "status"})").empty()) ++unanswered; else ++answered;
    }
  });
  CommandResult refused = agent_.ctl({"submit", "-f", bomb});
  // The agent refuses it on its own too, sent past shoalctl.
  ControlClient control(agent_.data_dir(), 10s);
  json direct = json::parse(control.ask(json{{"command", "submit"}, {"manifest", alias_bomb_manifest()}}.dump()),
                            nullptr, false);
  ASSERT_TRUE(wait_until([&] { return answered > 3; }, 10s));
  done = true;
  asker.join();
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find("manifest: line 9: aliases expand the document by more than"), std::string::npos)
      << refused.err;
  EXPECT_TRUE(one_line(refused.err)) << refused.err;
  EXPECT_EQ(direct.value("code", ""), "InvalidArgument") << direct.dump();
  EXPECT_NE(direct.value("error", "").find("aliases expand the document"), std::string::npos) << direct.dump();
  EXPECT_EQ(unanswered, 0);
  EXPECT_TRUE(agent_.ctl_json({"get", "workloads"})["items"].empty());
}

TEST_F(HostileInput, AnAliasBombInAgentYamlOrTheClusterManifestIsRefusedAtStartNamingTheFile) {
  agent_.stop();
  std::string cluster = dir_.path() + "/cluster.yaml";
  std::ofstream(cluster) << "apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: east}\n"
                         << alias_bomb_manifest().substr(alias_bomb_manifest().find("l0:"));
  agent_.set_config("clusterConfig", cluster);
  CommandResult run = run_command({bin_path("shoald"), "run", "--data", agent_.data_dir()});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_NE(run.err.find(cluster + ": cluster manifest: line "), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("aliases expand"), std::string::npos) << run.err;

  std::ofstream(agent_.data_dir() + "/agent.yaml", std::ios::app)
      << alias_bomb_manifest().substr(alias_bomb_manifest().find("l0:"));
  run = run_command({bin_path("shoald"), "run", "--data", agent_.data_dir()});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_NE(run.err.find(agent_.data_dir() + "/agent.yaml: line "), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("aliases expand"), std::string::npos) << run.err;
  EXPECT_TRUE(one_line(run.err)) << run.err;
}

// A read filter naming something that cannot exist is refused like any
// other bad name (exit 2, the rule named), by shoalctl as it reads its
// command line and by the agent for any other client, not answered with an
// empty list that reads as "nothing there".
TEST_F(HostileInput, ABadNameInAReadFilterIsRefusedWithTheNameRule) {
  const std::string rule = "expected lowercase letters, digits and '-'";
  for (const std::vector<std::string>& command :
       std::vector<std::vector<std::string>>{{"get", "workloads", "-n", "A B"},
                                             {"get", "workloads", "-w", "-n", "A B"},
                                             {"get", "clusters", "-n", "A B"},
                                             {"get", "clusters", "--queue", "Q!"},
                                             {"describe", "workload", "A B/x"},
                                             {"describe", "workload", "default/X"},
                                             {"delete", "workload", "default/a_b"}}) {
    CommandResult refused = agent_.ctl(command);
    std::string line = command[0] + " " + command[1] + " " + command.back();
    EXPECT_EQ(refused.exit_code, 2) << line << "\n" << refused.out << refused.err;
    EXPECT_NE(refused.err.find(rule), std::string::npos) << line << "\n" << refused.err;
  }
  ControlClient control(agent_.data_dir(), 10s);
  for (const char* request :
       {R"({"command": "get-workloads", "namespace": "A B"})", R"({"command": "watch-workloads", "namespace": "A B"})",
        R"({"command": "get-clusters", "queue": "Q!"})"}) {
    json reply = json::parse(control.ask(request), nullptr, false);
    EXPECT_EQ(reply.value("code", ""), "InvalidArgument") << request << " -> " << reply.dump();
    EXPECT_NE(reply.value("error", "").find(rule), std::string::npos) << reply.dump();
  }
  CommandResult listed = agent_.ctl({"get", "workloads", "-n", "default"});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
}

TEST_F(HostileInput, ControlRequestsWithWrongTypesNameTheField) {
  ControlClient control(agent_.data_dir(), 10s);
  auto ask = [&](const std::string& body) {
    std::string reply = control.ask(body);
    EXPECT_FALSE(reply.empty()) << "no answer to " << body;
    return json::parse(reply, nullptr, false);
  };
  json wrong = ask(R"({"command": "invite-revoke", "id": 42})");
  EXPECT_EQ(wrong["error"], "control request field \"id\": expected a string") << wrong.dump();
  json missing = ask(R"({"command": "submit"})");
  EXPECT_EQ(missing["error"],
            "control request: expected one of \"manifest\" (YAML) or \"workloads\" (a list of Workload "
            "documents)");
  json not_list = ask(R"({"command": "submit", "workloads": {"kind": "Workload"}})");
  EXPECT_EQ(not_list["error"], "control request field \"workloads\": expected a list");
  json list = ask(R"({"command": "nominate", "namespace": "default", "name": "a", "clusters": [1]})");
  EXPECT_EQ(list["error"], "control request field \"clusters\": expected a list of strings");
  json page = ask(R"({"command": "get-workloads", "limit": 0})");
  EXPECT_EQ(page["error"], "control request field \"limit\": expected a whole number from 1 to 5000")
      << page.dump();
  json not_object = ask("[1, 2]");
  EXPECT_EQ(not_object["code"], "InvalidArgument");
  json not_utf8 = ask("{\"command\": \"get-workloads\", \"namespace\": \"\xff\"}");
  EXPECT_EQ(not_utf8["error"], "control request: not JSON");
  EXPECT_EQ(agent_.ctl({"status"}).exit_code, 0);
}

TEST_F(HostileInput, StateFilesAreForTheAgentAloneAndALooseDataDirIsRefused) {
  std::string db = agent_.data_dir() + "/state.db";
  EXPECT_EQ(mode_of(db), 0600u);
  EXPECT_EQ(mode_of(db + "-wal"), 0600u);
  EXPECT_EQ(mode_of(agent_.data_dir() + "/agent.yaml"), 0600u);
  agent_.stop();
  // As an earlier version left them: the files are tightened, saying so.
  ASSERT_EQ(::chmod(db.c_str(), 0644), 0);
  ASSERT_TRUE(agent_.start());
  EXPECT_EQ(mode_of(db), 0600u);
  EXPECT_NE(agent_.log().find(db + " was open to group or others; changed it to mode 0600"), std::string::npos);
  agent_.stop();
  // Its own directory widened (a volume's fsGroup pass does this): made
  // 0700 again, saying so.
  ASSERT_EQ(::chmod(agent_.data_dir().c_str(), 02775), 0);
  ASSERT_TRUE(agent_.start());
  EXPECT_EQ(mode_of(agent_.data_dir()), 0700u);
  EXPECT_NE(agent_.log().find(agent_.data_dir() + " was open to group or others; changed it to mode 0700"),
            std::string::npos)
      << agent_.log();
  agent_.stop();
  // One this user does not own is refused, saying what to do instead
  // (handing it to another user takes root).
  if (::geteuid() != 0) return;
  ASSERT_EQ(::chmod(agent_.data_dir().c_str(), 0755), 0);
  ASSERT_EQ(::chown(agent_.data_dir().c_str(), ::geteuid() + 1, static_cast<gid_t>(-1)), 0);
  CommandResult refused = run_command({bin_path("shoald"), "run", "--data", agent_.data_dir()});
  ASSERT_EQ(::chown(agent_.data_dir().c_str(), ::geteuid(), static_cast<gid_t>(-1)), 0);
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("cannot make it 0700; expected a directory of its own"), std::string::npos)
      << refused.err;
}

}  // namespace
}  // namespace shoal::testing
