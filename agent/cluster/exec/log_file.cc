#include "agent/cluster/exec/log_file.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace shoal::cluster {

LogChunk read_log_file(const std::string& path, int64_t offset, size_t max_bytes, bool ended) {
  LogChunk chunk;
  std::ifstream in(path, std::ios::binary);
  std::error_code error;
  int64_t size = in ? static_cast<int64_t>(std::filesystem::file_size(path, error)) : 0;
  if (error) size = 0;
  // A file rotated since the last read is shorter than where that read
  // ended: start again at its beginning.
  if (offset < 0) offset = std::max<int64_t>(0, size + offset);
  if (offset > size) offset = 0;
  chunk.offset = offset;
  size_t length = static_cast<size_t>(std::min<int64_t>(size - offset, static_cast<int64_t>(max_bytes)));
  chunk.data.resize(length);
  if (length > 0) {
    in.seekg(offset);
    in.read(chunk.data.data(), static_cast<std::streamsize>(length));
    chunk.data.resize(static_cast<size_t>(in.gcount()));
  }
  chunk.next_offset = offset + static_cast<int64_t>(chunk.data.size());
  chunk.finished = ended && chunk.next_offset >= size;
  return chunk;
}

}  // namespace shoal::cluster
