// Time as the whole project sees it: wall-clock milliseconds since the Unix
// epoch. Only agent/runtime reads the real clock; everything else is handed a
// TimePoint or a Clock.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace shoal {

using Duration = std::chrono::milliseconds;
using TimePoint = std::chrono::sys_time<std::chrono::milliseconds>;

inline int64_t to_millis(TimePoint t) { return t.time_since_epoch().count(); }
inline TimePoint from_millis(int64_t ms) { return TimePoint(Duration(ms)); }

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint now() const = 0;
};

// Parses a Go-style duration: "500ms", "5s", "2m", "1h30m", "720h". Only
// non-negative durations; the error names `field`.
Result<Duration> parse_duration(std::string_view text, std::string_view field);

// The shortest Go-style spelling of `d` ("1m30s", "250ms", "0s").
std::string format_duration(Duration d);

// RFC 3339 UTC with milliseconds: "2026-11-22T10:00:00.000Z".
std::string format_time(TimePoint t);
// Parses format_time's form (the milliseconds optional); errors name `field`.
Result<TimePoint> parse_time(std::string_view text, std::string_view field);

}  // namespace shoal
