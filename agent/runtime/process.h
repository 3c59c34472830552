// What shoald holds as a process, beside the agent it runs: the clock and
// randomness it injects into the core, the lock that keeps one agent per
// data directory, the descriptor its signals arrive on, and the data
// directory's permissions.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "agent/core/interfaces.h"
#include "common/status.h"
#include "common/time.h"

namespace shoal::runtime {

// The wall clock, as the core reads time (milliseconds).
class SystemClock final : public Clock {
 public:
  TimePoint now() const override {
    return std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now());
  }
};

// The core's randomness: libsodium's system source.
class SodiumRng final : public core::Rng {
 public:
  uint64_t next() override;
};

// Holds an exclusive lock on <data>/shoald.lock for the process's life, so two
// agents never share one data dir (and one control socket).
class DataDirLock {
 public:
  static Result<DataDirLock> acquire(const std::string& data_dir);
  DataDirLock(DataDirLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  ~DataDirLock();

 private:
  explicit DataDirLock(int fd) : fd_(fd) {}
  int fd_;
};

// SIGTERM and SIGINT arrive on a file descriptor the loop polls, so no
// signal handler touches agent state.
Result<int> open_signal_fd();

// The data directory holds the identity key and every peer's state: it is
// for this agent's user alone. A directory others can enter is tightened to
// 0700 when this user owns it (a volume's fsGroup pass widens what it
// finds), refused when not (the fix: a directory of the agent's own inside
// it); files in it that others could read are tightened too. What was
// tightened is returned, so the agent can say so.
Result<std::vector<std::string>> make_data_dir_private(const std::string& data_dir);

}  // namespace shoal::runtime
