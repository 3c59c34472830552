#include "harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "common/file.h"
#include "common/time.h"
#include "protocol/envelope.h"
#include "protocol/messages.h"

namespace shoal::testing {

std::string bin_path(const std::string& binary) { return std::string(SHOAL_BIN_DIR) + "/" + binary; }

namespace {

std::string slurp(const std::string& path) { return read_text_file(path).value_or(""); }

pid_t spawn(const std::vector<std::string>& argv, const std::string& out_path,
            const std::string& err_path, rlim_t descriptor_limit = 0) {
  pid_t pid = fork();
  if (pid == 0) {
    if (descriptor_limit > 0) {
      rlimit limit{descriptor_limit, descriptor_limit};
      setrlimit(RLIMIT_NOFILE, &limit);
    }
    int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    dup2(out, 1);
    dup2(err, 2);
    int null = ::open("/dev/null", O_RDONLY);
    dup2(null, 0);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

}  // namespace

CommandResult run_command(const std::vector<std::string>& argv, std::chrono::seconds timeout) {
  TempDir scratch;
  std::string out_path = scratch.path() + "/out", err_path = scratch.path() + "/err";
  pid_t pid = spawn(argv, out_path, err_path);
  CommandResult result;
  int status = 0;
  bool exited = wait_until([&] { return waitpid(pid, &status, WNOHANG) == pid; },
                           std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
  if (!exited) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    result.exit_code = -1;
  } else {
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  result.out = slurp(out_path);
  result.err = slurp(err_path);
  return result;
}

namespace {

// The kernel's ephemeral range (ip_local_port_range): every outgoing
// connection on this machine takes a port from it, so a port picked there
// can be taken between the pick and the agent's bind (seen in CI: a zmq
// connection of a parallel test took a harness port).
std::pair<int, int> ephemeral_ports() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0, high = 0;
  if (in >> low >> high && low > 0 && high >= low) return {low, high};
  return {32768, 60999};
}

bool can_bind(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  bool bound = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  close(fd);
  return bound;
}

}  // namespace

int free_port() {
  // Below the ephemeral range, where only other tests' picks can collide;
  // AgentProcess::start moves an agent that still lost the race.
  static std::mutex mutex;
  static std::mt19937 random(std::random_device{}());
  static std::set<int> handed_out;
  std::lock_guard lock(mutex);
  auto [ephemeral_low, ephemeral_high] = ephemeral_ports();
  const int low = 20000;
  const int high = ephemeral_low > low + 1000 ? ephemeral_low - 1 : 65535;
  std::uniform_int_distribution<int> pick(low, high);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    int port = pick(random);
    if (high == 65535 && port >= ephemeral_low && port <= ephemeral_high) continue;
    if (handed_out.count(port) || !can_bind(port)) continue;
    handed_out.insert(port);
    return port;
  }
  throw std::runtime_error("free_port: no free port outside the ephemeral range");
}

TempDir::TempDir() {
  char pattern[] = "/tmp/shoal-test.XXXXXX";
  char* made = mkdtemp(pattern);
  if (!made) throw std::runtime_error("mkdtemp failed");
  path_ = made;
}

TempDir::~TempDir() {
  if (keep_) return;
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

AgentProcess::AgentProcess(std::string name, const std::string& parent_dir)
    : name_(std::move(name)),
      data_dir_(parent_dir + "/" + name_),
      endpoint_("tcp://127.0.0.1:" + std::to_string(free_port())),
      log_path_(parent_dir + "/" + name_ + ".log") {}

AgentProcess::~AgentProcess() {
  if (running()) stop();
}

void AgentProcess::init(const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {bin_path("shoald"), "init", "--data", data_dir_, "--cluster",
                                   name_, "--org", "org-" + name_, "--listen", endpoint_};
  argv.insert(argv.end(), extra.begin(), extra.end());
  CommandResult result = run_command(argv);
  if (result.exit_code != 0) throw std::runtime_error("shoald init failed: " + result.err);
}

bool AgentProcess::start() {
  std::vector<std::string> argv = {bin_path("shoald"), "run", "--data", data_dir_};
  if (!log_level_.empty()) argv.insert(argv.end(), {"--log-level", log_level_});
  // Before its first start nobody knows the agent's endpoint yet (no identity
  // card handed out), so a port lost to a parallel test is replaced.
  const int attempts = started_before_ ? 1 : 5;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    size_t logged_before = log().size();
    pid_ = spawn(argv, "/dev/null", log_path_, descriptor_limit_);
    bool exited = false;
    bool answered = wait_until(
        [&] {
          if (reap_if_exited() != -1) exited = true;
          return exited || ctl({"status"}).exit_code == 0;
        },
        std::chrono::seconds(20));
    if (answered && !exited) {
      started_before_ = true;
      return true;
    }
    if (!exited) return false;
    if (log().find("Address already in use", logged_before) == std::string::npos) return false;
    endpoint_ = "tcp://127.0.0.1:" + std::to_string(free_port());
    set_config("listen", endpoint_);
  }
  return false;
}

void AgentProcess::kill_hard() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

int AgentProcess::reap_if_exited() {
  if (pid_ <= 0) return -1;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) != pid_) return -1;
  pid_ = -1;
  return status;
}

void AgentProcess::limit_file_size(std::optional<uint64_t> bytes) {
  if (pid_ <= 0) return;
  rlimit limit{};
  if (prlimit(pid_, RLIMIT_FSIZE, nullptr, &limit) != 0)
    throw std::runtime_error("prlimit: cannot read");
  limit.rlim_cur = bytes ? static_cast<rlim_t>(*bytes) : limit.rlim_max;
  if (prlimit(pid_, RLIMIT_FSIZE, &limit, nullptr) != 0)
    throw std::runtime_error("prlimit: cannot set");
}

void AgentProcess::pause() {
  if (pid_ > 0) kill(pid_, SIGSTOP);
}

void AgentProcess::resume() {
  if (pid_ > 0) kill(pid_, SIGCONT);
}

void AgentProcess::set_config(const std::string& key, const std::string& value) {
  std::string path = data_dir_ + "/agent.yaml";
  std::ifstream in(path);
  std::string line, text;
  bool replaced = false;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      line = key + ": " + value;
      replaced = true;
    }
    text += line + "\n";
  }
  if (!replaced) text += key + ": " + value + "\n";
  std::ofstream(path) << text;
}

std::string AgentProcess::log() const {
  std::ifstream in(log_path_);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void AgentProcess::stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGCONT);  // a paused agent cannot act on SIGTERM
  kill(pid_, SIGTERM);
  int status = 0;
  if (!wait_until([&] { return waitpid(pid_, &status, WNOHANG) == pid_; },
                  std::chrono::seconds(10))) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  pid_ = -1;
}

CommandResult AgentProcess::ctl(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {bin_path("shoalctl"), "--data", data_dir_};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv);
}

nlohmann::json AgentProcess::ctl_json(const std::vector<std::string>& args) const {
  std::vector<std::string> with_output = args;
  with_output.insert(with_output.end(), {"-o", "json"});
  CommandResult result = ctl(with_output);
  if (result.exit_code != 0) return nullptr;
  return nlohmann::json::parse(result.out, nullptr, false);
}

std::string AgentProcess::identity() const {
  std::string card = ctl({"identity"}).out;
  while (!card.empty() && card.back() == '\n') card.pop_back();
  return card;
}

std::string invite(const AgentProcess& target, const AgentProcess& source, const std::string& namespace_name,
                   const std::vector<std::string>& limits) {
  std::vector<std::string> create = {"invite", "create", "--to", source.identity(), "--namespace", namespace_name};
  create.insert(create.end(), limits.begin(), limits.end());
  CommandResult token = target.ctl(create);
  if (token.exit_code != 0) return "invite create: " + token.err;
  std::string text = token.out;
  while (!text.empty() && text.back() == '\n') text.pop_back();
  CommandResult accepted = source.ctl({"invite", "accept", text});
  if (accepted.exit_code != 0) return "invite accept: " + accepted.err;
  return "";
}

void invite_full_mesh(const std::vector<AgentProcess*>& agents, const std::string& namespace_name,
                      const std::vector<std::string>& limits) {
  for (auto* target : agents) {
    for (auto* source : agents) {
      if (target == source) continue;
      if (std::string failed = invite(*target, *source, namespace_name, limits); !failed.empty()) {
        throw std::runtime_error(failed);
      }
    }
  }
}

std::string advertised_free_cpu(const AgentProcess& source, const std::string& cluster,
                                const std::string& namespace_name) {
  nlohmann::json peers = source.ctl_json({"peers"});
  if (peers.is_null()) return "";
  for (const auto& peer : peers["items"]) {
    if (peer["cluster"] != cluster) continue;
    nlohmann::json capacity = peer.value("capacity", nlohmann::json::object());
    if (capacity.contains(namespace_name)) return capacity[namespace_name]["free"].value("cpu", "");
  }
  return "";
}

std::string write_workloads(const std::string& dir, const std::string& prefix, int count,
                            const std::string& cpu, const std::string& duration) {
  std::string path = dir + "/" + prefix + ".yaml";
  std::ofstream out(path);
  for (int i = 0; i < count; ++i) {
    out << "---\napiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: " << prefix << "-"
        << i << ", namespace: default}\nspec: {resources: {cpu: \"" << cpu
        << "\", memory: 1Gi}, duration: " << duration << "}\n";
  }
  return path;
}

std::vector<uint8_t> sealed_hello(const crypto::Identity& sender, const crypto::PublicKey& to,
                                  uint64_t seq, const std::string& cluster) {
  protocol::Envelope envelope;
  envelope.type = protocol::MessageType::kHello;
  envelope.from = sender.public_key();
  envelope.to = to;
  envelope.boot = 1000;
  envelope.seq = seq;
  envelope.sent_at_ms =
      to_millis(std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now()));
  envelope.body = protocol::encode_body(protocol::Hello{cluster, cluster, "tcp://127.0.0.1:1"});
  return protocol::seal(envelope, sender);
}

void make_curve_client(zmq::socket_t& socket, const crypto::Identity& identity,
                       const crypto::PublicKey& server) {
  crypto::CurveKeyPair keys = identity.curve_keys();
  auto server_key = crypto::curve_public_key(server);
  if (!server_key.is_ok()) throw std::runtime_error(server_key.status().message());
  socket.set(zmq::sockopt::curve_serverkey, zmq::const_buffer(server_key->data(), server_key->size()));
  socket.set(zmq::sockopt::curve_publickey, zmq::const_buffer(keys.public_key.data(), keys.public_key.size()));
  socket.set(zmq::sockopt::curve_secretkey, zmq::const_buffer(keys.secret_key.data(), keys.secret_key.size()));
}

ControlClient::ControlClient(const std::string& data_dir, std::chrono::milliseconds timeout)
    : socket_(context_, zmq::socket_type::dealer) {
  socket_.set(zmq::sockopt::linger, 0);
  socket_.set(zmq::sockopt::rcvtimeo, static_cast<int>(timeout.count()));
  socket_.connect("ipc://" + data_dir + "/control.sock");
}

std::string ControlClient::ask(const std::string& body) {
  socket_.send(zmq::str_buffer(""), zmq::send_flags::sndmore);
  socket_.send(zmq::buffer(body), zmq::send_flags::none);
  zmq::message_t empty, reply;
  if (!socket_.recv(empty) || !socket_.recv(reply)) return "";
  return reply.to_string();
}

bool alive(int pid) {
  std::string stat = read_text_file("/proc/" + std::to_string(pid) + "/stat").value_or("");
  if (stat.empty()) return false;
  size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

std::vector<int> processes_under(const std::string& dir) {
  std::vector<int> found;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    int pid = std::stoi(name);
    std::string cmdline = read_text_file(entry.path().string() + "/cmdline").value_or("");
    std::error_code unreadable;
    std::string cwd = std::filesystem::read_symlink(entry.path() / "cwd", unreadable).string();
    if ((cmdline.find(dir) != std::string::npos || cwd.rfind(dir, 0) == 0) && alive(pid)) {
      found.push_back(pid);
    }
  }
  return found;
}

}  // namespace shoal::testing
