#include "common/time.h"

#include <cctype>
#include <cstdio>
#include <ctime>
#include <limits>

namespace shoal {

Result<Duration> parse_duration(std::string_view text, std::string_view field) {
  auto fail = [&]() -> Status {
    return invalid_argument(std::string(field) +
                            ": expected a duration like \"500ms\", \"5s\", \"2m\", \"1h30m\" or \"30d\", got \"" +
                            std::string(text) + "\"");
  };
  if (text.empty()) return fail();
  if (text == "0") return Duration(0);
  int64_t total_ms = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t digits_start = i;
    int64_t whole = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      if (whole > std::numeric_limits<int64_t>::max() / 10 - 10) return fail();
      whole = whole * 10 + (text[i] - '0');
      ++i;
    }
    // An optional fraction, so "1.5s" works as in Go.
    int64_t fraction = 0, fraction_scale = 1;
    if (i < text.size() && text[i] == '.') {
      ++i;
      while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
        if (fraction_scale < 1000000) {
          fraction = fraction * 10 + (text[i] - '0');
          fraction_scale *= 10;
        }
        ++i;
      }
    }
    if (i == digits_start) return fail();
    size_t unit_start = i;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
    std::string_view unit = text.substr(unit_start, i - unit_start);
    int64_t unit_ms;
    if (unit == "ms") unit_ms = 1;
    else if (unit == "s") unit_ms = 1000;
    else if (unit == "m") unit_ms = 60 * 1000;
    else if (unit == "h") unit_ms = 3600 * 1000;
    else if (unit == "d") unit_ms = 24 * 3600 * 1000;
    else return fail();
    if (whole > std::numeric_limits<int64_t>::max() / unit_ms / 2) return fail();
    total_ms += whole * unit_ms + fraction * unit_ms / fraction_scale;
  }
  return Duration(total_ms);
}

std::string format_duration(Duration d) {
  int64_t ms = d.count();
  if (ms == 0) return "0s";
  std::string out;
  if (ms < 0) {
    out = "-";
    ms = -ms;
  }
  if (ms < 1000) return out + std::to_string(ms) + "ms";
  int64_t hours = ms / 3600000, minutes = ms / 60000 % 60, seconds = ms / 1000 % 60,
          millis = ms % 1000;
  if (hours) out += std::to_string(hours) + "h";
  if (minutes) out += std::to_string(minutes) + "m";
  if (seconds || millis) {
    out += std::to_string(seconds);
    if (millis) {
      char buf[8];
      std::snprintf(buf, sizeof buf, ".%03d", static_cast<int>(millis));
      std::string frac(buf);
      while (frac.back() == '0') frac.pop_back();
      out += frac;
    }
    out += "s";
  }
  return out;
}

std::string format_time(TimePoint t) {
  int64_t ms = to_millis(t);
  std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms % 1000));
  return buf;
}

Result<TimePoint> parse_time(std::string_view text, std::string_view field) {
  // RFC 3339 in UTC, as format_time writes it; the fraction is optional.
  std::string copy(text);
  std::tm tm{};
  const char* rest = strptime(copy.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  int millis = 0;
  if (rest && *rest == '.') {
    int digits = 0;
    for (++rest; std::isdigit(static_cast<unsigned char>(*rest)); ++rest, ++digits) {
      if (digits < 3) millis = millis * 10 + (*rest - '0');
    }
    for (; digits > 0 && digits < 3; ++digits) millis *= 10;
  }
  if (!rest || std::string_view(rest) != "Z") {
    return invalid_argument(std::string(field) +
                            ": expected a UTC time like \"2026-11-22T10:00:00Z\", got \"" + copy + "\"");
  }
  return from_millis(static_cast<int64_t>(timegm(&tm)) * 1000 + millis);
}

}  // namespace shoal
