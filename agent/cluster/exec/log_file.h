// Reading a workload's output file in chunks, as `shoalctl logs` pages
// through it (the exec and slurm backends alike).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "agent/cluster/cluster.h"

namespace shoal::cluster {

// Up to `max_bytes` of `path` from `offset` (< 0: the last -offset bytes; past
// the end: from the start, since the file was rotated). A missing file reads
// as empty. `ended`: the writer is done, so the chunk that reaches the end
// is the last (LogChunk::finished).
LogChunk read_log_file(const std::string& path, int64_t offset, size_t max_bytes, bool ended);

}  // namespace shoal::cluster
