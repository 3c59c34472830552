#include "agent/core/remote_logs.h"

namespace shoal::core {

Result<uint64_t> RemoteLogs::start(const std::string& peer_id, protocol::LogRequest& request) {
  if (in_flight_.size() >= kMaxInFlight) {
    return Status(ErrorCode::kUnavailable,
                  std::to_string(kMaxInFlight) + " reads of peers' output are already waiting; try again");
  }
  request.request_id = next_id_++;
  in_flight_[request.request_id] = InFlight{peer_id, std::nullopt};
  return request.request_id;
}

void RemoteLogs::on_chunk(const std::string& from, const protocol::LogChunk& chunk) {
  auto it = in_flight_.find(chunk.request_id);
  if (it == in_flight_.end() || it->second.peer_id != from || it->second.answer) return;
  if (!chunk.error_code.empty()) {
    ErrorCode code = error_code_from_name(chunk.error_code);
    // A peer cannot make our reply say "Internal" or "Ok" about itself.
    if (code == ErrorCode::kOk || code == ErrorCode::kInternal) code = ErrorCode::kUnavailable;
    it->second.answer = Status(code, chunk.error);
    return;
  }
  it->second.answer =
      cluster::LogChunk{chunk.data, chunk.offset, chunk.next_offset, chunk.finished, chunk.pending};
}

std::optional<Result<cluster::LogChunk>> RemoteLogs::take(uint64_t id) {
  auto it = in_flight_.find(id);
  if (it == in_flight_.end() || !it->second.answer) return std::nullopt;
  std::optional<Result<cluster::LogChunk>> answer = std::move(it->second.answer);
  in_flight_.erase(it);
  return answer;
}

}  // namespace shoal::core
