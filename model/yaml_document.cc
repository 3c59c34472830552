#include "model/yaml_document.h"

#include <set>
#include <string>

#include "common/text.h"

namespace shoal::model {
namespace {

std::string at_line(std::string_view what, int line) {
  return std::string(what) + ": line " + std::to_string(line) + ": ";
}

// Depth-first over every mapping; the first duplicate key wins the error.
Status check_unique_keys(const YAML::Node& node, std::string_view what, int first_line, int depth) {
  if (depth > 64) return invalid_argument(std::string(what) + ": nested deeper than 64 levels");
  if (node.IsMap()) {
    std::set<std::string> keys;
    for (const auto& item : node) {
      if (item.first.IsScalar() && !keys.insert(item.first.Scalar()).second) {
        return invalid_argument(at_line(what, first_line + item.first.Mark().line) + "key " +
                                quoted_text(item.first.Scalar()) + " appears twice in this mapping");
      }
      SHOAL_RETURN_IF_ERROR(check_unique_keys(item.second, what, first_line, depth + 1));
    }
  } else if (node.IsSequence()) {
    for (const auto& item : node) {
      SHOAL_RETURN_IF_ERROR(check_unique_keys(item, what, first_line, depth + 1));
    }
  }
  return Status::ok();
}

}  // namespace

Result<YAML::Node> load_yaml(std::string_view text, std::string_view what, int first_line) {
  if (text.size() > kMaxYamlBytes) {
    return invalid_argument(std::string(what) + ": expected at most " +
                            std::to_string(kMaxYamlBytes >> 20) + " MiB, got " +
                            std::to_string(text.size()) + " bytes");
  }
  SHOAL_RETURN_IF_ERROR(validate_utf8_lines(text, what, first_line));
  YAML::Node node;
  try {
    node = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return invalid_argument(at_line(what, first_line + e.mark.line) + "not valid YAML: " + e.msg);
  }
  SHOAL_RETURN_IF_ERROR(check_unique_keys(node, what, first_line, 0));
  return node;
}

}  // namespace shoal::model
