#include "agent/cli/output.h"

#include <iostream>

#include <yaml-cpp/yaml.h>

namespace shoal::cli {
namespace {

using nlohmann::json;

void emit(YAML::Emitter& out, const json& value) {
  switch (value.type()) {
    case json::value_t::object:
      if (value.empty()) {
        out << YAML::Flow << YAML::BeginMap << YAML::EndMap;
        return;
      }
      out << YAML::BeginMap;
      for (const auto& [key, item] : value.items()) {
        out << YAML::Key << YAML::DoubleQuoted << key << YAML::Value;
        emit(out, item);
      }
      out << YAML::EndMap;
      return;
    case json::value_t::array:
      if (value.empty()) {
        out << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
        return;
      }
      out << YAML::BeginSeq;
      for (const auto& item : value) emit(out, item);
      out << YAML::EndSeq;
      return;
    case json::value_t::string:
      out << YAML::DoubleQuoted << value.get<std::string>();
      return;
    case json::value_t::boolean:
      out << value.get<bool>();
      return;
    case json::value_t::number_integer:
      out << value.get<int64_t>();
      return;
    case json::value_t::number_unsigned:
      out << value.get<uint64_t>();
      return;
    case json::value_t::number_float:
      out << value.get<double>();
      return;
    default:
      out << YAML::Null;
      return;
  }
}

}  // namespace

std::string to_yaml(const json& document) {
  YAML::Emitter out;
  out.SetDoublePrecision(17);
  emit(out, document);
  return std::string(out.c_str()) + "\n";
}

bool print_structured(const std::string& output, const json& document,
                      const std::function<std::string(const json&)>& name_of) {
  if (output == "json") {
    std::cout << document.dump(2) << "\n";
  } else if (output == "yaml") {
    std::cout << to_yaml(document);
  } else if (output == "name") {
    if (document.contains("items")) {
      for (const auto& item : document["items"]) std::cout << name_of(item) << "\n";
    }
  } else {
    return false;
  }
  return true;
}

std::string human_duration(long long seconds) {
  if (seconds < 0) seconds = 0;
  auto with = [](long long big, const char* big_unit, long long small, const char* small_unit) {
    return std::to_string(big) + big_unit + (small ? std::to_string(small) + small_unit : "");
  };
  long long minutes = seconds / 60, hours = seconds / 3600, days = seconds / 86400;
  if (seconds < 120) return std::to_string(seconds) + "s";
  if (minutes < 10) return with(minutes, "m", seconds % 60, "s");
  if (minutes < 180) return std::to_string(minutes) + "m";
  if (hours < 8) return with(hours, "h", minutes % 60, "m");
  if (hours < 48) return std::to_string(hours) + "h";
  if (hours < 192) return with(days, "d", hours % 24, "h");
  if (days < 730) return std::to_string(days) + "d";
  return std::to_string(days / 365) + "y";
}

}  // namespace shoal::cli
