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

}  // namespace shoal
