#include "common/status.h"

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

}  // namespace shoal
