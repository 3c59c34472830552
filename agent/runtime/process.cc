#include "agent/runtime/process.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>

#include "agent/runtime/config.h"

namespace shoal::runtime {

DataDirLock::~DataDirLock() {
  if (fd_ >= 0) ::close(fd_);
}

uint64_t SodiumRng::next() {
  uint64_t value;
  randombytes_buf(&value, sizeof value);
  return value;
}

Result<DataDirLock> DataDirLock::acquire(const std::string& data_dir) {
  std::string path = data_dir + "/shoald.lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Status(ErrorCode::kStorage, "cannot open " + path + ": " + std::strerror(errno));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return Status(ErrorCode::kUnavailable,
                  "another shoald is already running on " + data_dir);
  }
  return DataDirLock(fd);
}

Result<int> open_signal_fd() {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  if (sigprocmask(SIG_BLOCK, &mask, nullptr) != 0) return internal_error("sigprocmask failed");
  int fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd < 0) return internal_error("signalfd failed");
  return fd;
}

Result<std::vector<std::string>> make_data_dir_private(const std::string& data_dir) {
  struct stat info {};
  // A missing directory is left to load_agent_file, which says how to init.
  if (::stat(data_dir.c_str(), &info) != 0) return std::vector<std::string>{};
  std::vector<std::string> tightened;
  if ((info.st_mode & 0077) != 0) {
    if (info.st_uid == ::geteuid() && ::chmod(data_dir.c_str(), 0700) == 0) {
      tightened.push_back(data_dir);
    } else {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(info.st_mode & 07777));
      return invalid_argument("--data " + data_dir + ": mode " + mode +
                              " lets group or others in, and this user (uid " + std::to_string(::geteuid()) +
                              ") cannot make it 0700; expected a directory of its own (a volume's root "
                              "belongs to root: use a directory inside it)");
    }
  }
  for (const std::string& path : {database_path(data_dir), database_path(data_dir) + "-wal",
                                  database_path(data_dir) + "-shm", config_path(data_dir)}) {
    if (::stat(path.c_str(), &info) == 0 && (info.st_mode & 0077) != 0) {
      if (::chmod(path.c_str(), 0600) != 0) return internal_error("cannot chmod 600 " + path);
      tightened.push_back(path);
    }
  }
  return tightened;
}

}  // namespace shoal::runtime
