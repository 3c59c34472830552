#include "common/status.h"

#include <cstdio>
#include <cstdlib>

namespace shoal {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return "Ok";
    case ErrorCode::kInvalidArgument: return "InvalidArgument";
    case ErrorCode::kNotFound: return "NotFound";
    case ErrorCode::kAlreadyExists: return "AlreadyExists";
    case ErrorCode::kPermissionDenied: return "PermissionDenied";
    case ErrorCode::kUnavailable: return "Unavailable";
    case ErrorCode::kCorrupt: return "Corrupt";
    case ErrorCode::kStorage:
      return "Storage";
    case ErrorCode::kInternal: return "Internal";
  }
  return "Unknown";
}

ErrorCode error_code_from_name(std::string_view name) {
  for (int i = 0; i <= static_cast<int>(ErrorCode::kInternal); ++i) {
    auto code = static_cast<ErrorCode>(i);
    if (name == error_code_name(code)) return code;
  }
  return ErrorCode::kInternal;
}

[[noreturn]] void check_failed(const char* file, int line, const char* condition, const char* what) {
  std::fprintf(stderr, "shoal: invariant broken at %s:%d: %s (%s)\n", file, line, what, condition);
  std::fflush(stderr);
  std::abort();
}

}  // namespace shoal
