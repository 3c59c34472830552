// A throw-away dev Slurm (scripts/slurm-dev.sh) for one test suite: up once
// in SetUpTestSuite, down in TearDownTestSuite. Needs root; tests skip
// without it, except where the Slurm tests are required (CI=true, or
// SHOAL_REQUIRE_SLURM=1): there they fail. Header-only: the suites that use
// it are separate binaries.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace shoal::testing {

// Runs `command` through the shell; its stdout.
inline std::string run_shell(const std::string& command) {
  std::string out;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    char buffer[4096];
    while (size_t read = fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, read);
    pclose(pipe);
  }
  return out;
}

// Runs `command` (run_shell) when it goes out of scope: a test's cleanup,
// done whether its assertions held or not.
class ShellAtExit {
 public:
  explicit ShellAtExit(std::string command) : command_(std::move(command)) {}
  ~ShellAtExit() { run_shell(command_); }
  ShellAtExit(const ShellAtExit&) = delete;
  ShellAtExit& operator=(const ShellAtExit&) = delete;

 private:
  std::string command_;
};

// The pids of processes whose command line names `text` (a dev cluster's
// directory): what a clean `down` leaves none of.
inline std::vector<std::string> pids_naming(const std::string& text) {
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "cmdline");
    std::stringstream cmdline;
    cmdline << in.rdbuf();
    if (cmdline.str().find(text) != std::string::npos) found.push_back(name);
  }
  return found;
}

// Why the dev Slurm cannot run here, or "" when it can.
inline std::string dev_slurm_unavailable() {
  return geteuid() == 0 ? "" : "the dev Slurm cluster needs root";
}

// Whether a skipped Slurm test is a failure: on CI every test must run.
inline bool slurm_tests_required() {
  const char* ci = std::getenv("CI");
  const char* required = std::getenv("SHOAL_REQUIRE_SLURM");
  return (ci && std::string(ci) == "true") || (required && std::string(required) == "1");
}

// In a test's SetUp: skips (or, where required, fails) when the dev Slurm
// cannot run here.
#define SHOAL_NEED_DEV_SLURM()                                                          \
  do {                                                                                  \
    if (std::string why = ::shoal::testing::dev_slurm_unavailable(); !why.empty()) {    \
      if (::shoal::testing::slurm_tests_required())                                     \
        FAIL() << why << ", and CI=true (or SHOAL_REQUIRE_SLURM=1) requires these tests"; \
      GTEST_SKIP() << why;                                                              \
    }                                                                                   \
  } while (false)

class DevSlurm {
 public:
  // Starts `nodes` nodes of `cpus` cpus in a fresh directory, with the
  // script's `options` ("--min-job-age 2"). socket() is empty when it did
  // not come up (the script's output went to stderr).
  void up(int nodes, int cpus, const std::string& options = "") {
    char pattern[] = "/tmp/shoal-slurm-XXXXXX";
    dir_ = mkdtemp(pattern);
    std::string out = run_shell("bash " SHOAL_SOURCE_DIR "/scripts/slurm-dev.sh up " + dir_ +
                                " --nodes " + std::to_string(nodes) + " --cpus " +
                                std::to_string(cpus) + " " + options + " 2>&1");
    std::string last = out.substr(out.find_last_of('\n', out.size() - 2) + 1);
    while (!last.empty() && last.back() == '\n') last.pop_back();
    socket_ = std::filesystem::exists(last) ? last : "";
    if (socket_.empty()) std::fprintf(stderr, "slurm-dev.sh up failed:\n%s\n", out.c_str());
    // Jobs run as slurmrestd's user: their output goes where it may write.
    output_ = dir_ + "/output";
    std::filesystem::create_directories(output_);
    run_shell("chmod 1777 " + output_);
  }

  // Stops it and removes its directory. Returns the pids of processes of
  // this Slurm (daemons, job steps, tasks) still alive after `down`, with
  // the script's output: both empty-handed is a clean stop.
  std::vector<std::string> down(std::string* script_output = nullptr) {
    if (dir_.empty()) return {};
    std::string out = run_shell("bash " SHOAL_SOURCE_DIR "/scripts/slurm-dev.sh down " + dir_ + " 2>&1");
    if (script_output) *script_output = out;
    std::vector<std::string> left = pids_naming(dir_);
    std::filesystem::remove_all(dir_);
    dir_.clear();
    return left;
  }

  const std::string& dir() const { return dir_; }
  const std::string& socket() const { return socket_; }
  const std::string& output() const { return output_; }  // writable by the jobs

 private:
  std::string dir_, socket_, output_;
};

}  // namespace shoal::testing
