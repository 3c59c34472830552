#include "agent/cluster/exec/exec_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "agent/cluster/exec/log_file.h"
#include "common/file.h"

namespace shoal::cluster {
namespace {

namespace fs = std::filesystem;

constexpr Duration kPollInterval = std::chrono::milliseconds(100);

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Whether a monitor holds the replica's lock (it runs). A missing lock file
// means none ever started there.
bool lock_held(const std::string& dir) {
  int fd = ::open((dir + "/lock").c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  bool held = ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);  // releases the lock if this probe took it
  return held;
}

struct MonitorFile {
  pid_t monitor = 0;
  std::string start_time;
  pid_t workload = 0;
};

MonitorFile read_monitor(const std::string& dir) {
  MonitorFile file;
  std::istringstream in(read_text(dir + "/monitor"));
  in >> file.monitor >> file.start_time >> file.workload;
  return file;
}

std::string start_time_of(pid_t pid) {
  std::string text = read_text("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = text.rfind(')');
  if (paren == std::string::npos || paren + 2 > text.size()) return "";
  std::istringstream fields(text.substr(paren + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 22) return field;
  }
  return "";
}

// The monitor's pid if it is still the process the monitor file names (pid
// and start time), else 0: a pid reused by another process is never signalled.
pid_t verified_monitor(const std::string& dir) {
  MonitorFile file = read_monitor(dir);
  if (file.monitor <= 0 || file.start_time.empty()) return 0;
  return start_time_of(file.monitor) == file.start_time ? file.monitor : 0;
}

Status unavailable(std::string message) { return {ErrorCode::kUnavailable, std::move(message)}; }

Status write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) return internal_error("cannot write " + path + ": " + std::strerror(errno));
  return Status::ok();
}

// Through a temporary file and a rename: a reader after a crash sees the
// whole text or none of it.
Status write_file_atomically(const std::string& path, const std::string& text) {
  std::string temporary = path + ".tmp";
  SHOAL_RETURN_IF_ERROR(write_file(temporary, text));
  std::error_code error;
  fs::rename(temporary, path, error);
  if (error) return internal_error("cannot write " + path + ": " + error.message());
  return Status::ok();
}

// The uid in a reservation key, "<source>/<uid>".
std::string uid_of(const std::string& key) { return key.substr(key.rfind('/') + 1); }

}  // namespace

std::string find_writable_cgroup() {
  if (!fs::exists("/sys/fs/cgroup/cgroup.controllers")) return "";  // not cgroup v2
  std::istringstream lines(read_text("/proc/self/cgroup"));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("0::", 0) != 0) continue;
    std::string dir = "/sys/fs/cgroup" + line.substr(3);
    std::string controllers = read_text(dir + "/cgroup.subtree_control");
    if (::access(dir.c_str(), W_OK) == 0 && controllers.find("cpu") != std::string::npos &&
        controllers.find("memory") != std::string::npos) {
      return dir;
    }
  }
  return "";
}

std::string default_monitor_path() {
  std::error_code error;
  fs::path self = fs::read_symlink("/proc/self/exe", error);
  if (error) return "shoal-exec-monitor";
  // Beside the binary in a build tree; in ../lib/shoal once installed.
  fs::path beside = self.parent_path() / "shoal-exec-monitor";
  fs::path installed = self.parent_path().parent_path() / "lib" / "shoal" / "shoal-exec-monitor";
  return (fs::exists(beside, error) || !fs::exists(installed, error) ? beside : installed).string();
}

ExecRunner::ExecRunner(ExecOptions options) : options_(std::move(options)) {}

// Monitors outlive the agent on purpose (a restart re-adopts them); only
// the children this process started and that have already ended are reaped.
ExecRunner::~ExecRunner() {
  for (auto& [key, run] : runs_) {
    for (Replica& replica : run.replicas) refresh(replica);
  }
}

std::string ExecRunner::replica_dir(const std::string& uid, int replica) const {
  return options_.work_root + "/" + uid + "/" + std::to_string(replica);
}

Status ExecRunner::launch(const LaunchRequest& request) {
  if (auto it = runs_.find(request.key); it != runs_.end() && it->second.epoch == request.epoch) {
    return Status::ok();
  }
  if (request.spec.command.empty()) {
    return invalid_argument("spec.command: the exec backend needs a command to run");
  }
  if (request.uid.empty() || request.uid.find('/') != std::string::npos || request.uid[0] == '.') {
    return invalid_argument("uid \"" + request.uid + "\" cannot name a directory");
  }
  // One uid, one owner: the directory is the source's (its key), and
  // another source naming the same uid (by accident or on purpose) must
  // neither replace that work nor read its output.
  std::string owner_file = options_.work_root + "/" + request.uid + "/owner";
  if (std::string owner = read_text(owner_file); !owner.empty() && owner != request.key + "\n") {
    return Status(ErrorCode::kAlreadyExists,
                  "uid " + request.uid + " is already used here by another source's workload");
  }
  {
    std::error_code error;
    fs::create_directories(options_.work_root + "/" + request.uid, error);
    if (error) return internal_error("cannot create the work directory of " + request.uid + ": " + error.message());
  }
  SHOAL_RETURN_IF_ERROR(write_file_atomically(owner_file, request.key + "\n"));
  Run run;
  run.uid = request.uid;
  run.epoch = request.epoch;
  run.grace = request.spec.termination_grace;
  run.replicas.resize(static_cast<size_t>(request.spec.replicas));
  std::string epoch_text = std::to_string(request.epoch) + "\n";
  for (int index = 0; index < request.spec.replicas; ++index) {
    Replica& replica = run.replicas[static_cast<size_t>(index)];
    replica.dir = replica_dir(request.uid, index);
    std::error_code error;
    fs::create_directories(replica.dir, error);
    if (error) return internal_error("cannot create " + replica.dir + ": " + error.message());
    if (read_text(replica.dir + "/epoch") == epoch_text) {
      // This epoch was launched here before (the agent restarted): whatever
      // became of it is what it is. A held lock is a live monitor; an exit
      // file an end; neither, a replica lost while the agent was away.
      replica.monitor = verified_monitor(replica.dir);
      replica.ended = !lock_held(replica.dir);
      continue;
    }
    if (lock_held(replica.dir)) {
      // An older epoch still runs here (released, still stopping): it is
      // over, and must be gone before this epoch starts.
      MonitorFile old = read_monitor(replica.dir);
      if (pid_t monitor = verified_monitor(replica.dir)) ::kill(monitor, SIGKILL);
      if (old.workload > 0) ::kill(-old.workload, SIGKILL);
      for (int i = 0; i < 50 && lock_held(replica.dir); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      if (lock_held(replica.dir)) {
        return unavailable("an earlier copy of " + request.uid + " still runs in " + replica.dir);
      }
    }
    for (const char* name : {"exit", "monitor", "output.log", "output.log.1", "epoch"}) {
      fs::remove(replica.dir + "/" + name, error);
    }
    SHOAL_RETURN_IF_ERROR(write_file_atomically(replica.dir + "/epoch", epoch_text));
    SHOAL_RETURN_IF_ERROR(start_replica(request, index, replica));
  }
  runs_[request.key] = std::move(run);
  return Status::ok();
}

Status ExecRunner::start_replica(const LaunchRequest& request, int index, Replica& replica) {
  const model::WorkloadSpec& spec = request.spec;
  std::string workdir = replica.dir;
  if (!spec.working_dir.empty()) {
    workdir = spec.working_dir[0] == '/' ? spec.working_dir : replica.dir + "/" + spec.working_dir;
    std::error_code error;
    fs::create_directories(workdir, error);
  }
  std::string cgroup;
  if (!options_.cgroup_root.empty()) {
    cgroup = options_.cgroup_root + "/shoal-" + request.uid + "-" + std::to_string(index);
    std::error_code error;
    fs::create_directories(cgroup, error);
    if (!error && spec.resources.cpu_milli > 0) {
      (void)write_file(cgroup + "/cpu.max", std::to_string(spec.resources.cpu_milli * 100) + " 100000");
    }
    if (!error && spec.resources.memory_bytes > 0) {
      (void)write_file(cgroup + "/memory.max", std::to_string(spec.resources.memory_bytes));
    }
    if (error) cgroup.clear();
  }

  std::map<std::string, std::string> env;
  const char* path = std::getenv("PATH");
  env["PATH"] = path ? path : "/usr/local/bin:/usr/bin:/bin";
  env["HOME"] = replica.dir;
  env["SHOAL_CLUSTER"] = options_.cluster_name;
  env["SHOAL_SOURCE_CLUSTER"] = request.source_cluster;
  env["SHOAL_NAMESPACE"] = spec.namespace_name;
  env["SHOAL_WORKLOAD"] = spec.name;
  env["SHOAL_UID"] = request.uid;
  env["SHOAL_EPOCH"] = std::to_string(request.epoch);
  env["SHOAL_REPLICA"] = std::to_string(index);
  env["SHOAL_NODE"] = static_cast<size_t>(index) < request.nodes.size() ? request.nodes[static_cast<size_t>(index)] : "";
  for (const auto& [name, value] : spec.env) env[name] = value;

  int lock = ::open((replica.dir + "/lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock < 0) return internal_error("cannot open " + replica.dir + "/lock: " + std::strerror(errno));
  if (::flock(lock, LOCK_EX | LOCK_NB) != 0) {
    ::close(lock);
    return unavailable("another monitor holds " + replica.dir + "/lock");
  }
  std::vector<std::string> words = {options_.monitor_path,
                                    "--dir", replica.dir,
                                    "--lock-fd", std::to_string(lock),
                                    "--log-cap", std::to_string(options_.log_cap_bytes),
                                    "--grace-ms", std::to_string(spec.termination_grace.count()),
                                    "--workdir", workdir};
  if (!cgroup.empty()) {
    words.push_back("--cgroup");
    words.push_back(cgroup);
  }
  words.push_back("--");
  for (const auto& word : spec.command) words.push_back(word);
  for (const auto& word : spec.args) words.push_back(word);
  std::vector<std::string> env_words;
  for (const auto& [name, value] : env) env_words.push_back(name + "=" + value);
  std::vector<char*> argv;
  for (auto& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (auto& word : env_words) envp.push_back(word.data());
  envp.push_back(nullptr);

  pid_t pid = ::fork();
  if (pid < 0) {
    int error = errno;
    ::close(lock);
    return unavailable(std::string("fork: ") + std::strerror(error));
  }
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec: the agent has threads.
    ::setsid();  // its own session: no terminal's signals, outlives the agent
    ::fcntl(lock, F_SETFD, 0);  // the monitor keeps the lock for its life
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(lock);  // the monitor's copy holds it now
  replica.monitor = pid;
  replica.our_child = true;
  return Status::ok();
}

bool ExecRunner::refresh(Replica& replica) {
  if (replica.ended) return true;
  if (replica.our_child) {
    int status = 0;
    if (::waitpid(replica.monitor, &status, WNOHANG) == replica.monitor) replica.ended = true;
    return replica.ended;
  }
  if (replica.monitor == 0) replica.monitor = verified_monitor(replica.dir);
  replica.ended = !lock_held(replica.dir);
  return replica.ended;
}

void ExecRunner::signal_stop(Replica& replica, Duration grace) {
  if (refresh(replica)) return;
  pid_t monitor = replica.our_child ? replica.monitor : verified_monitor(replica.dir);
  if (monitor <= 0) return;
  sigval value{};
  value.sival_int = static_cast<int>(std::min<int64_t>(grace.count(), INT32_MAX));
  ::sigqueue(monitor, SIGTERM, value);
}

bool ExecRunner::owns(const std::string& key) const {
  std::string uid = uid_of(key);
  if (uid.empty() || uid[0] == '.') return false;
  return read_text(options_.work_root + "/" + uid + "/owner") == key + "\n";
}

// Replicas of `key` whose monitors still run though this runner never
// launched or adopted them (a copy released after a restart, before the
// agent re-launched it): found by their directories.
std::optional<ExecRunner::Run> ExecRunner::find_unadopted(const std::string& key) const {
  if (!owns(key)) return std::nullopt;
  Run run;
  run.uid = uid_of(key);
  std::error_code error;
  for (int index = 0;; ++index) {
    std::string dir = replica_dir(run.uid, index);
    if (!fs::exists(dir, error)) break;
    if (!lock_held(dir)) continue;
    Replica replica;
    replica.dir = dir;
    replica.monitor = verified_monitor(dir);
    run.replicas.push_back(std::move(replica));
  }
  if (run.replicas.empty()) return std::nullopt;
  return run;
}

bool ExecRunner::stop(const std::string& key, Duration grace) {
  auto it = runs_.find(key);
  if (it == runs_.end()) {
    // Already stopping: its kStopped is owed to the holding stopped first.
    if (stopping_.count(key)) return true;
    std::optional<Run> unadopted = find_unadopted(key);
    if (!unadopted) return true;
    runs_[key] = std::move(*unadopted);
    it = runs_.find(key);
  }
  Run run = std::move(it->second);
  runs_.erase(it);
  bool all_ended = true;
  for (Replica& replica : run.replicas) {
    signal_stop(replica, grace);
    all_ended = refresh(replica) && all_ended;
  }
  if (all_ended) return true;
  stopping_[key].push_back(std::move(run));
  return false;
}

WorkloadEvent ExecRunner::outcome(const std::string& key, const Run& run, TimePoint now) const {
  for (size_t index = 0; index < run.replicas.size(); ++index) {
    const Replica& replica = run.replicas[index];
    std::string which = run.replicas.size() > 1 ? " (replica " + std::to_string(index) + ")" : "";
    std::istringstream exit(read_text(replica.dir + "/exit"));
    std::string how;
    exit >> how;
    if (how == "exited") {
      int code = 0;
      exit >> code;
      if (code != 0) {
        return {key, WorkloadEventKind::kFailed, now, code,
                "exited with code " + std::to_string(code) + which};
      }
    } else if (how == "signaled") {
      int signal = 0;
      exit >> signal;
      return {key, WorkloadEventKind::kFailed, now, 128 + signal,
              std::string("killed by signal ") + std::to_string(signal) + " (" +
                  sigabbrev_np(signal) + ")" + which};
    } else if (how == "execfailed") {
      std::string rest;
      std::getline(exit, rest);
      return {key, WorkloadEventKind::kFailed, now, 127, "StartFailed:" + rest + which};
    } else if (replica.our_child) {
      return {key, WorkloadEventKind::kFailed, now, -1,
              "its monitor was killed, and the work with it" + which};
    } else {
      return {key, WorkloadEventKind::kLost, now, -1,
              "AgentRestart: it ended while the agent was down, leaving no exit status" + which};
    }
  }
  return {key, WorkloadEventKind::kSucceeded, now, 0, ""};
}

std::vector<WorkloadEvent> ExecRunner::observe(TimePoint now) {
  last_observe_ = now;
  if (now >= next_sweep_) {
    next_sweep_ = now + std::chrono::minutes(1);
    sweep_forgotten();
  }
  std::vector<WorkloadEvent> events;
  for (auto it = runs_.begin(); it != runs_.end();) {
    Run& run = it->second;
    bool all_ended = true;
    bool one_failed = false;
    for (Replica& replica : run.replicas) {
      if (!refresh(replica)) {
        all_ended = false;
      } else if (read_text(replica.dir + "/exit") != "exited 0\n") {
        one_failed = true;
      }
    }
    if (!all_ended) {
      // A gang ends with its first failed replica: the others are stopped.
      if (one_failed && !run.stopping_rest) {
        run.stopping_rest = true;
        for (Replica& replica : run.replicas) signal_stop(replica, run.grace);
      }
      ++it;
      continue;
    }
    events.push_back(outcome(it->first, run, now));
    it = runs_.erase(it);
  }
  for (auto it = stopping_.begin(); it != stopping_.end();) {
    std::vector<Run>& runs = it->second;
    while (!runs.empty() && std::all_of(runs.front().replicas.begin(), runs.front().replicas.end(),
                                        [&](Replica& replica) { return refresh(replica); })) {
      events.push_back({it->first, WorkloadEventKind::kStopped, now, 0, ""});
      runs.erase(runs.begin());
    }
    it = runs.empty() ? stopping_.erase(it) : std::next(it);
  }
  return events;
}

TimePoint ExecRunner::next_event_at() const {
  if (runs_.empty() && stopping_.empty()) return next_sweep_;
  return std::min(next_sweep_, last_observe_ + kPollInterval);
}

void ExecRunner::forget(const std::string& key) {
  if (runs_.count(key) || stopping_.count(key)) return;
  std::string uid = uid_of(key);
  if (uid.empty() || uid[0] == '.') return;
  // Its output stays readable for a while (shoalctl logs of finished work):
  // the marker dates the forgetting, and a later sweep removes the directory.
  std::string dir = options_.work_root + "/" + uid;
  if (fs::exists(dir)) (void)write_file(dir + "/forgotten", "");
  if (options_.cgroup_root.empty()) return;
  std::error_code error;
  for (int index = 0;; ++index) {
    std::string cgroup = options_.cgroup_root + "/shoal-" + uid + "-" + std::to_string(index);
    if (!fs::exists(cgroup, error)) break;
    fs::remove(cgroup, error);
  }
}

void ExecRunner::sweep_forgotten() {
  std::error_code error;
  auto now = fs::file_time_type::clock::now();
  for (fs::directory_iterator it(options_.work_root, error), end; !error && it != end;
       it.increment(error)) {
    fs::path marker = it->path() / "forgotten";
    auto when = fs::last_write_time(marker, error);
    if (error) {
      error.clear();
      continue;
    }
    if (now - when >= options_.keep_finished) fs::remove_all(it->path(), error);
    error.clear();
  }
}

Result<LogChunk> ExecRunner::read_log(const std::string& key, int replica, int64_t offset,
                                     size_t max_bytes) const {
  std::string uid = uid_of(key);
  if (uid.empty() || uid[0] == '.' || replica < 0) return not_found("no output for " + key);
  std::string dir = replica_dir(uid, replica);
  if (!owns(key) || !fs::exists(dir + "/epoch")) {
    return not_found("no output for replica " + std::to_string(replica) + " of " + uid + " here");
  }
  return read_log_file(dir + "/output.log", offset, max_bytes, fs::exists(dir + "/exit"));
}

std::string ExecRunner::describe(const std::string&) const {
  return options_.cgroup_root.empty()
             ? "exec: cpu and memory limits accounted, not enforced (no writable cgroup v2 here)"
             : "exec: cpu and memory limits enforced by cgroup v2";
}

}  // namespace shoal::cluster
