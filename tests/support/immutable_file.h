// A storage fault a test can make without root's mount rights: a file
// made immutable (chattr +i) refuses every write, even on descriptors
// opened before, even root's.
#pragma once

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <string>

namespace shoal::testing {

// Sets or clears the immutable attribute. False where the file system or
// the test's privileges (CAP_LINUX_IMMUTABLE) do not allow it.
inline bool set_immutable(const std::string& path, bool immutable) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  int flags = 0;
  bool ok = ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
  if (ok) {
    flags = immutable ? (flags | FS_IMMUTABLE_FL) : (flags & ~FS_IMMUTABLE_FL);
    ok = ::ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0;
  }
  ::close(fd);
  return ok;
}

}  // namespace shoal::testing
