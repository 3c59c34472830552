#include "agent/runtime/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>

namespace shoal::runtime {
namespace {

// %* in a pattern: the message as the inside of a JSON string.
class JsonEscapedMessage final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& message, const std::tm&, spdlog::memory_buf_t& out) override {
    for (char c : std::string_view(message.payload.data(), message.payload.size())) {
      auto byte = static_cast<unsigned char>(c);
      if (c == '"' || c == '\\') {
        out.push_back('\\');
        out.push_back(c);
      } else if (byte < 0x20) {
        char escaped[8];
        std::snprintf(escaped, sizeof escaped, "\\u%04x", byte);
        out.append(escaped, escaped + 6);
      } else {
        out.push_back(c);
      }
    }
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonEscapedMessage>();
  }
};

}  // namespace

Result<spdlog::level::level_enum> parse_log_level(const std::string& name) {
  for (auto level : {spdlog::level::trace, spdlog::level::debug, spdlog::level::info, spdlog::level::warn,
                     spdlog::level::err, spdlog::level::critical, spdlog::level::off}) {
    std::string_view text(spdlog::level::to_string_view(level).data(), spdlog::level::to_string_view(level).size());
    if (name == text || (level == spdlog::level::warn && name == "warn") ||
        (level == spdlog::level::err && name == "error")) {
      return level;
    }
  }
  return invalid_argument("--log-level: expected trace, debug, info, warn, error, critical or off, got \"" +
                          name + "\"");
}

std::shared_ptr<spdlog::logger> make_logger(const AgentFile& file, spdlog::sink_ptr sink) {
  if (!sink) sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("shoald-" + file.cluster, std::move(sink));
  if (file.log_format == "json") {
    // One JSON object per line; the cluster name is a validated name.
    auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
    formatter->add_flag<JsonEscapedMessage>('*').set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l","cluster":")" + file.cluster + R"(","msg":"%*"})");
    logger->set_formatter(std::move(formatter));
  } else {
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %^%l%$ [" + file.cluster + "] %v",
                        spdlog::pattern_time_type::utc);
  }
  return logger;
}

}  // namespace shoal::runtime
