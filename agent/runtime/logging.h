// The agent's log: a line per event worth an operator's attention, as text
// or (logFormat: json) one JSON object per line with time, level, cluster
// and msg.
#pragma once

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

#include "agent/runtime/config.h"

namespace shoal::runtime {

// To `sink` (default: stderr), at spdlog's default level (info).
std::shared_ptr<spdlog::logger> make_logger(const AgentFile& file, spdlog::sink_ptr sink = nullptr);

// "trace", "debug", "info", "warn", "error", "critical" or "off"; the error
// names --log-level.
Result<spdlog::level::level_enum> parse_log_level(const std::string& name);

}  // namespace shoal::runtime
