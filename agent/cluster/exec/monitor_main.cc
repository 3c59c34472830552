// shoal-exec-monitor: the parent of one replica of an exec workload.
//
// The agent starts one monitor per replica (exec_runner.cc) and may die and
// restart while it runs; the monitor is what outlives the agent. It
//  - runs the command in its own process group, stdout and stderr into
//    output.log under the replica's directory, rotated to output.log.1 at
//    the size cap;
//  - on SIGTERM (sigqueue'd with the grace in milliseconds, or plain kill:
//    --grace), sends SIGTERM to the group and SIGKILL when the grace ends;
//  - when the command's main process ends, kills what is left of its group
//    and writes `exit` ("exited N", "signaled S" or "execfailed ERROR")
//    atomically, then exits.
// It holds the replica's lock file (inherited, fd --lock-fd) for its whole
// life: the agent knows a replica is still running by that lock, whoever
// started it, so no (uid, epoch) is ever started twice.
//
// Usage (by the agent only):
//   shoal-exec-monitor --dir D --lock-fd N --log-cap BYTES --grace-ms MS
//                      [--workdir W] [--cgroup DIR] -- COMMAND [ARGS...]
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string dir;
  int lock_fd = -1;
  long long log_cap = 10 << 20;
  long long grace_ms = 30000;
  std::string workdir;
  std::string cgroup;
  std::vector<std::string> command;
};

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "shoal-exec-monitor: %s\n", why.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options options;
  int i = 1;
  auto value = [&](const char* flag) -> std::string {
    if (i + 1 >= argc) die(std::string(flag) + ": expected a value");
    return argv[++i];
  };
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      for (++i; i < argc; ++i) options.command.push_back(argv[i]);
      break;
    }
    if (arg == "--dir") options.dir = value("--dir");
    else if (arg == "--lock-fd") options.lock_fd = std::atoi(value("--lock-fd").c_str());
    else if (arg == "--log-cap") options.log_cap = std::atoll(value("--log-cap").c_str());
    else if (arg == "--grace-ms") options.grace_ms = std::atoll(value("--grace-ms").c_str());
    else if (arg == "--workdir") options.workdir = value("--workdir");
    else if (arg == "--cgroup") options.cgroup = value("--cgroup");
    else die("unknown option " + arg);
  }
  if (options.dir.empty() || options.command.empty()) die("expected --dir and a command after --");
  if (options.log_cap < 4096) options.log_cap = 4096;
  return options;
}

// Writes `text` to dir/name through a temporary file and a rename, so a
// reader sees the whole text or nothing.
void write_atomically(const std::string& dir, const std::string& name, const std::string& text) {
  std::string temporary = dir + "/." + name + ".tmp";
  int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return;
  ssize_t written = ::write(fd, text.data(), text.size());
  (void)written;
  ::fsync(fd);
  ::close(fd);
  ::rename(temporary.c_str(), (dir + "/" + name).c_str());
}

// Field 22 of /proc/PID/stat: when the process started, in clock ticks
// since boot. With the pid it names one process for good.
std::string start_time_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t paren = text.rfind(')');
  if (paren == std::string::npos) return "0";
  std::string rest = text.substr(paren + 2);
  size_t pos = 0;
  for (int field = 3; field < 22 && pos != std::string::npos; ++field) {
    pos = rest.find(' ', pos);
    if (pos != std::string::npos) ++pos;
  }
  if (pos == std::string::npos) return "0";
  return rest.substr(pos, rest.find(' ', pos) - pos);
}

class Log {
 public:
  Log(std::string dir, long long cap) : dir_(std::move(dir)), cap_(cap) { open_file(); }
  void write(const char* data, size_t size) {
    if (fd_ < 0) return;
    if (size_ + static_cast<long long>(size) > cap_) {
      // Keep the newest: the full file becomes output.log.1 (replacing the
      // one before), and writing goes on in a fresh output.log.
      ::close(fd_);
      ::rename((dir_ + "/output.log").c_str(), (dir_ + "/output.log.1").c_str());
      open_file();
      if (fd_ < 0) return;
    }
    ssize_t written = ::write(fd_, data, size);
    if (written > 0) size_ += written;
  }

 private:
  void open_file() {
    fd_ = ::open((dir_ + "/output.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    struct stat st {};
    size_ = (fd_ >= 0 && ::fstat(fd_, &st) == 0) ? st.st_size : 0;
  }
  std::string dir_;
  long long cap_;
  int fd_ = -1;
  long long size_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  Options options = parse(argc, argv);
  if (options.lock_fd >= 0) ::fcntl(options.lock_fd, F_SETFD, FD_CLOEXEC);  // not the command's

  sigset_t handled;
  sigemptyset(&handled);
  sigaddset(&handled, SIGTERM);
  sigaddset(&handled, SIGCHLD);
  sigaddset(&handled, SIGINT);
  sigaddset(&handled, SIGHUP);
  sigset_t previous;
  sigprocmask(SIG_BLOCK, &handled, &previous);
  int signals = ::signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signals < 0) die("signalfd: " + std::string(std::strerror(errno)));

  int output[2];
  int exec_error[2];
  if (::pipe2(output, O_CLOEXEC) != 0 || ::pipe2(exec_error, O_CLOEXEC) != 0) {
    die("pipe: " + std::string(std::strerror(errno)));
  }
  std::vector<char*> child_argv;
  for (auto& word : options.command) child_argv.push_back(word.data());
  child_argv.push_back(nullptr);
  std::string cgroup_procs = options.cgroup.empty() ? "" : options.cgroup + "/cgroup.procs";
  std::string workdir = options.workdir.empty() ? options.dir : options.workdir;

  pid_t child = ::fork();
  if (child < 0) die("fork: " + std::string(std::strerror(errno)));
  if (child == 0) {
    // Only async-signal-safe calls from here to exec.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a monitor killed takes its work with it
    if (!cgroup_procs.empty()) {
      int fd = ::open(cgroup_procs.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd >= 0) {
        (void)!::write(fd, "0", 1);
        ::close(fd);
      }
    }
    int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    ::dup2(output[1], 1);
    ::dup2(output[1], 2);
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    for (int s : {SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGCHLD}) ::sigaction(s, &default_action, nullptr);
    sigprocmask(SIG_SETMASK, &previous, nullptr);
    if (::chdir(workdir.c_str()) != 0) {
      int error = errno;
      (void)!::write(exec_error[1], &error, sizeof error);
      ::_exit(127);
    }
    ::execvp(child_argv[0], child_argv.data());
    int error = errno;
    (void)!::write(exec_error[1], &error, sizeof error);
    ::_exit(127);
  }
  ::setpgid(child, child);  // either side may run first: both set it
  ::close(output[1]);
  ::close(exec_error[1]);
  write_atomically(options.dir, "monitor",
                   std::to_string(::getpid()) + " " + start_time_of(::getpid()) + " " +
                       std::to_string(child) + "\n");

  int error = 0;
  bool exec_failed = ::read(exec_error[0], &error, sizeof error) == sizeof error;
  ::close(exec_error[0]);

  Log log(options.dir, options.log_cap);
  bool exited = false;
  int status = 0;
  bool output_open = true;
  bool stopping = false;
  Clock::time_point kill_at = Clock::time_point::max();
  Clock::time_point drain_until = Clock::time_point::max();
  while (!exited || output_open) {
    int timeout_ms = -1;
    Clock::time_point deadline = std::min(kill_at, drain_until);
    if (deadline != Clock::time_point::max()) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      timeout_ms = static_cast<int>(std::max<long long>(0, left.count()));
    }
    pollfd fds[2] = {{signals, POLLIN, 0}, {output_open ? output[0] : -1, POLLIN, 0}};
    ::poll(fds, 2, timeout_ms);
    if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) {
      char buffer[65536];
      ssize_t n = ::read(output[0], buffer, sizeof buffer);
      if (n > 0) log.write(buffer, static_cast<size_t>(n));
      else if (n == 0 || errno != EINTR) output_open = false;
    }
    signalfd_siginfo info{};
    while (::read(signals, &info, sizeof info) == sizeof info) {
      if (info.ssi_signo == SIGCHLD) continue;  // waitpid below
      if (stopping || exited) continue;
      stopping = true;
      long long grace = options.grace_ms;
      if (info.ssi_code == SI_QUEUE && info.ssi_int >= 0) grace = info.ssi_int;
      ::kill(-child, SIGTERM);
      kill_at = Clock::now() + std::chrono::milliseconds(grace);
    }
    if (!exited && ::waitpid(child, &status, WNOHANG) == child) {
      exited = true;
      // What is left of the group goes with its main process; output still
      // buffered in the pipe is read for a moment more.
      ::kill(-child, SIGKILL);
      kill_at = Clock::time_point::max();
      drain_until = Clock::now() + std::chrono::seconds(1);
    }
    if (Clock::now() >= kill_at) {
      ::kill(-child, SIGKILL);
      kill_at = Clock::time_point::max();
    }
    if (exited && Clock::now() >= drain_until) break;
  }
  std::string outcome;
  if (exec_failed) {
    outcome = "execfailed " + std::string(std::strerror(error)) + ": " + options.command.front();
  } else if (WIFEXITED(status)) {
    outcome = "exited " + std::to_string(WEXITSTATUS(status));
  } else if (WIFSIGNALED(status)) {
    outcome = "signaled " + std::to_string(WTERMSIG(status));
  } else {
    outcome = "exited 255";
  }
  write_atomically(options.dir, "exit", outcome + "\n");
  return 0;
}
