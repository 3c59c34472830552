#include "model/yaml_document.h"

#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>
#include <yaml-cpp/anchor.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

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

// Counts the nodes of one document as if every alias were replaced by a copy
// of the node it names, from the parser's events, without building the
// document: an anchored node's expanded size is known when it ends, and an
// alias adds that size. Stops the parse (by throwing TooManyNodes) as soon
// as aliases have added more than the limit, so the cost is bounded by the
// text.
class ExpandedNodeCounter final : public YAML::EventHandler {
 public:
  struct TooManyNodes {
    YAML::Mark mark;
    std::string reason;
  };

  explicit ExpandedNodeCounter(uint64_t limit) : limit_(limit) {}

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t anchor) override { leaf(anchor); }
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t anchor,
                const std::string&) override {
    leaf(anchor);
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    auto it = expanded_size_.find(anchor);
    // The parser numbers an anchor when its node starts; one that has not
    // ended yet is an alias inside the node it names: a cycle.
    if (it == expanded_size_.end()) throw TooManyNodes{mark, "an alias refers to a node that contains it"};
    expand(mark, it->second);
  }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(anchor);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(anchor);
  }
  void OnMapEnd() override { close(); }

 private:
  struct OpenCollection {
    YAML::anchor_t anchor;
    uint64_t expanded_size;  // itself and everything in it so far
  };

  void leaf(YAML::anchor_t anchor) {
    if (anchor != YAML::NullAnchor) expanded_size_[anchor] = 1;
    if (!open_.empty()) open_.back().expanded_size += 1;
  }
  void open(YAML::anchor_t anchor) { open_.push_back({anchor, 1}); }
  void close() {
    OpenCollection closed = open_.back();
    open_.pop_back();
    if (closed.anchor != YAML::NullAnchor) expanded_size_[closed.anchor] = closed.expanded_size;
    if (!open_.empty()) open_.back().expanded_size += closed.expanded_size;
  }
  // The nodes the text holds are bounded by its size; only those an alias
  // adds are counted against the limit. Every size is at most the text's
  // nodes plus the limit, so no sum here can overflow.
  void expand(const YAML::Mark& mark, uint64_t nodes) {
    added_by_aliases_ += nodes;
    if (added_by_aliases_ > limit_) {
      throw TooManyNodes{mark, "aliases expand the document by more than " + std::to_string(limit_) +
                                   " nodes; write the repeated parts out instead"};
    }
    if (!open_.empty()) open_.back().expanded_size += nodes;
  }

  uint64_t limit_;
  uint64_t added_by_aliases_ = 0;
  std::vector<OpenCollection> open_;
  std::unordered_map<YAML::anchor_t, uint64_t> expanded_size_;
};

}  // namespace

Result<YAML::Node> load_yaml(std::string_view text, std::string_view what, int first_line,
                             uint64_t max_nodes) {
  if (text.size() > kMaxYamlBytes) {
    return invalid_argument(std::string(what) + ": expected at most " +
                            std::to_string(kMaxYamlBytes >> 20) + " MiB, got " +
                            std::to_string(text.size()) + " bytes");
  }
  SHOAL_RETURN_IF_ERROR(validate_utf8_lines(text, what, first_line));
  YAML::Node node;
  try {
    // Only documents with aliases can expand: the rest skip the count.
    if (text.find('*') != std::string_view::npos) {
      std::istringstream in{std::string(text)};
      YAML::Parser parser(in);
      ExpandedNodeCounter counter(max_nodes);
      try {
        parser.HandleNextDocument(counter);
      } catch (const ExpandedNodeCounter::TooManyNodes& refused) {
        return invalid_argument(at_line(what, first_line + refused.mark.line) + refused.reason);
      }
    }
    node = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return invalid_argument(at_line(what, first_line + e.mark.line) + "not valid YAML: " + e.msg);
  }
  SHOAL_RETURN_IF_ERROR(check_unique_keys(node, what, first_line, 0));
  return node;
}

namespace {

Status too_deep(std::string_view what) {
  return invalid_argument(std::string(what) + ": nested deeper than " + std::to_string(kMaxJsonDepth) +
                          " levels");
}

Result<nlohmann::json> to_json_at(const YAML::Node& node, std::string_view what, int depth) {
  if (depth > kMaxJsonDepth) return too_deep(what);
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return nlohmann::json(node.Scalar());
    case YAML::NodeType::Sequence: {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& item : node) {
        SHOAL_ASSIGN_OR_RETURN(nlohmann::json value, to_json_at(item, what, depth + 1));
        out.push_back(std::move(value));
      }
      return out;
    }
    case YAML::NodeType::Map: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& item : node) {
        if (!item.first.IsScalar()) {
          return invalid_argument(std::string(what) + ": expected string keys, got a " +
                                  (item.first.IsMap() ? "mapping" : "list") + " as a key");
        }
        SHOAL_ASSIGN_OR_RETURN(nlohmann::json value, to_json_at(item.second, what, depth + 1));
        out[item.first.Scalar()] = std::move(value);
      }
      return out;
    }
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      break;
  }
  return nlohmann::json(nullptr);
}

Result<YAML::Node> to_yaml_at(const nlohmann::json& json, std::string_view what, int depth) {
  if (depth > kMaxJsonDepth) return too_deep(what);
  switch (json.type()) {
    case nlohmann::json::value_t::object: {
      YAML::Node out(YAML::NodeType::Map);
      for (const auto& [key, value] : json.items()) {
        SHOAL_ASSIGN_OR_RETURN(YAML::Node item, to_yaml_at(value, what, depth + 1));
        out.force_insert(key, item);  // JSON keys are unique: no lookup
      }
      return out;
    }
    case nlohmann::json::value_t::array: {
      YAML::Node out(YAML::NodeType::Sequence);
      for (const auto& value : json) {
        SHOAL_ASSIGN_OR_RETURN(YAML::Node item, to_yaml_at(value, what, depth + 1));
        out.push_back(item);
      }
      return out;
    }
    case nlohmann::json::value_t::string:
      return YAML::Node(json.get_ref<const std::string&>());
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::discarded:
      return YAML::Node(YAML::NodeType::Null);
    case nlohmann::json::value_t::binary:
      return invalid_argument(std::string(what) + ": expected JSON text, got binary data");
    case nlohmann::json::value_t::boolean:
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
    case nlohmann::json::value_t::number_float:
      break;
  }
  return YAML::Node(json.dump());
}

}  // namespace

Result<nlohmann::json> yaml_to_json(const YAML::Node& node, std::string_view what) {
  return to_json_at(node, what, 0);
}

Result<YAML::Node> json_to_yaml(const nlohmann::json& json, std::string_view what) {
  return to_yaml_at(json, what, 0);
}

}  // namespace shoal::model
