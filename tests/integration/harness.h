// Runs real shoald processes on 127.0.0.1 and drives them with shoalctl.
// Every wait is bounded; nothing here sleeps to synchronize where a
// condition can be polled.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "crypto/identity.h"

namespace shoal::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs argv[0] with arguments, capturing stdout and stderr; bounded by `timeout`.
CommandResult run_command(const std::vector<std::string>& argv,
                          std::chrono::seconds timeout = std::chrono::seconds(30));

// A TCP port on 127.0.0.1 that was free a moment ago, outside the kernel's
// ephemeral range (so no outgoing connection takes it before it is bound)
// and never handed out twice by this process.
int free_port();

// A fresh directory under /tmp (short, so ipc:// paths stay within limits),
// removed when the object goes.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  void keep() { keep_ = true; }  // leave it behind (for a post-mortem)

 private:
  std::string path_;
  bool keep_ = false;
};

// Polls `condition` every 50 ms until it holds or `timeout` passes.
bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout);

// Whether `pid` names a live process (a zombie is not alive).
bool alive(int pid);
// Live processes whose command line or working directory mentions `dir`:
// what the exec backend started under a test's directory.
std::vector<int> processes_under(const std::string& dir);

class AgentProcess {
 public:
  AgentProcess(std::string name, const std::string& parent_dir);
  ~AgentProcess();

  // shoald init; extra arguments are appended (e.g. --cluster-config).
  void init(const std::vector<std::string>& extra = {});
  // shoald run in the background; returns when the control socket answers,
  // false at once if the agent exits. On the first start only, an agent
  // whose port was taken meanwhile is moved to another one (endpoint()).
  bool start();
  void kill_hard();  // SIGKILL, then reap
  void stop();       // SIGTERM, then reap
  void pause();      // SIGSTOP: the agent (and its sim cluster) freezes, sockets stay open
  void resume();     // SIGCONT
  // Limits the running shoald's file sizes (RLIMIT_FSIZE soft limit, as
  // `prlimit --fsize` would): every write past `bytes` in any file then
  // fails, as on a failing disk. No value lifts the limit.
  void limit_file_size(std::optional<uint64_t> bytes);
  // Runs shoald with this hard and soft RLIMIT_NOFILE (0: inherit).
  void set_descriptor_limit(unsigned limit) { descriptor_limit_ = limit; }
  // shoald run --log-level (default: the agent's, info).
  void set_log_level(std::string level) { log_level_ = std::move(level); }
  // Sets `key: value` in agent.yaml (after init, before start).
  void set_config(const std::string& key, const std::string& value);
  std::string log() const;  // everything the agent logged so far
  bool running() const { return pid_ > 0; }
  int pid() const { return pid_; }
  // If the process ended without being told to, reaps it and returns its
  // wait status (see waitpid); otherwise -1.
  int reap_if_exited();

  CommandResult ctl(const std::vector<std::string>& args) const;
  // ctl with "-o json" appended; returns null JSON on failure.
  nlohmann::json ctl_json(const std::vector<std::string>& args) const;

  std::string identity() const;
  const std::string& name() const { return name_; }
  const std::string& data_dir() const { return data_dir_; }
  const std::string& endpoint() const { return endpoint_; }

 private:
  std::string name_;
  std::string data_dir_;
  std::string endpoint_;
  std::string log_path_;
  int pid_ = -1;
  bool started_before_ = false;
  unsigned descriptor_limit_ = 0;
  std::string log_level_;
};

// A client of an agent's control socket, speaking as shoalctl does (DEALER
// to the agent's ROUTER), without starting a process: for requests shoalctl
// would never send, and for timing the agent's answer alone.
class ControlClient {
 public:
  explicit ControlClient(const std::string& data_dir,
                         std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // The reply's text, or "" when none came within the timeout.
  std::string ask(const std::string& body);

 private:
  zmq::context_t context_;
  zmq::socket_t socket_;
};

// `target` invites `source` into `namespace_name` (with `limits`, invite
// create flags) and `source` accepts: "" when both worked, else what failed.
std::string invite(const AgentProcess& target, const AgentProcess& source,
                   const std::string& namespace_name = "default", const std::vector<std::string>& limits = {});

// Full mesh: every agent invites every other into `namespace_name`, with
// `limits` (invite create flags such as {"--cpu", "6"}) on every invitation.
void invite_full_mesh(const std::vector<AgentProcess*>& agents, const std::string& namespace_name,
                      const std::vector<std::string>& limits = {});

// The free cpu of `namespace_name` that `source` has heard `cluster`
// advertise, as `shoalctl peers` prints it ("32"); "" before it heard any.
std::string advertised_free_cpu(const AgentProcess& source, const std::string& cluster,
                                const std::string& namespace_name = "default");

// Writes `count` Workload documents named <prefix>-<i> to a file in `dir`.
std::string write_workloads(const std::string& dir, const std::string& prefix, int count,
                            const std::string& cpu, const std::string& duration);

std::string bin_path(const std::string& binary);

// A HELLO from `sender` to `to` at sequence `seq` of a boot (1000) newer
// than any real one, sent now and signed with sender's key: what an invited
// peer's wire would carry, for tests that play a peer gone bad.
std::vector<uint8_t> sealed_hello(const crypto::Identity& sender, const crypto::PublicKey& to,
                                  uint64_t seq, const std::string& cluster);

// Makes `socket` a CURVE client of the agent whose key is `server`,
// authenticating as `identity` (keys derived as shoald derives them).
void make_curve_client(zmq::socket_t& socket, const crypto::Identity& identity,
                       const crypto::PublicKey& server);

}  // namespace shoal::testing
