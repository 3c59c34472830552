#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "model/manifest.h"
#include "model/placement_parse.h"
#include "model/yaml_document.h"

namespace shoal::model {
namespace {

// `levels` nested lists of `width` aliases each, over a list of `width`
// scalars: width^(levels + 1) nodes once expanded, from a few lines of text.
std::string alias_bomb(int width, int levels, std::string_view use_as) {
  auto row = [&](const std::string& item) {
    std::string out = "[";
    for (int i = 0; i < width; ++i) out += (i ? "," : "") + item;
    return out + "]";
  };
  std::string text = "l0: &l0 " + row("x") + "\n";
  for (int level = 1; level <= levels; ++level) {
    text += "l" + std::to_string(level) + ": &l" + std::to_string(level) + " " +
            row("*l" + std::to_string(level - 1)) + "\n";
  }
  return text + std::string(use_as) + ": *l" + std::to_string(levels) + "\n";
}

std::string error_of(const Result<YAML::Node>& result) {
  return result.is_ok() ? "(accepted)" : result.status().message();
}

TEST(YamlDocumentTest, AnAliasBombIsRefusedOnOneLineBeforeItIsBuilt) {
  // A billion nodes once expanded; the old reader walked them all.
  std::string bomb = alias_bomb(10, 8, "labels");
  std::string error = error_of(load_yaml(bomb, "manifest"));
  EXPECT_NE(error.find("manifest: line "), std::string::npos) << error;
  EXPECT_NE(error.find("aliases expand the document by more than 1048576 nodes"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
}

TEST(YamlDocumentTest, TheLimitCountsEveryNodeAnAliasAdds) {
  // l0 is a list of four scalars (5 nodes); l1 lists l0 four times (its
  // aliases add 4 * 5 = 20; 21 nodes); l2 lists l1 four times (4 * 21 =
  // 84; 85 nodes); `use` names l2 (85): 20 + 84 + 85 = 189 in all.
  std::string text = alias_bomb(4, 2, "use");
  EXPECT_TRUE(load_yaml(text, "doc", 1, 189).is_ok()) << error_of(load_yaml(text, "doc", 1, 189));
  EXPECT_NE(error_of(load_yaml(text, "doc", 1, 188)).find("doc: line 4: aliases expand the document by more than 188"),
            std::string::npos) << error_of(load_yaml(text, "doc", 1, 188));
}

TEST(YamlDocumentTest, OrdinaryAnchorsAndAliasesStillWork) {
  auto node = load_yaml("base: &base {cpu: 1, memory: 1Gi}\nfirst: *base\nsecond: *base\n", "doc");
  ASSERT_TRUE(node.is_ok()) << node.status().message();
  EXPECT_EQ((*node)["second"]["memory"].Scalar(), "1Gi");
  // An alias inside a text or a command is no alias at all.
  EXPECT_TRUE(load_yaml("command: [sh, -c, 'ls *.txt']\n", "doc").is_ok());
}

TEST(YamlDocumentTest, AnAliasInsideTheNodeItNamesIsACycleAndRefused) {
  std::string error = error_of(load_yaml("a: &a [x, *a]\n", "doc", 3));
  EXPECT_EQ(error, "doc: line 3: an alias refers to a node that contains it");
}

TEST(YamlDocumentTest, EveryReaderOfOutsideYamlRefusesTheBomb) {
  const std::string head = "apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: a}\n";
  auto workloads = parse_workloads(head + alias_bomb(10, 8, "spec"));
  ASSERT_FALSE(workloads.is_ok());
  EXPECT_NE(workloads.status().message().find("aliases expand"), std::string::npos);
  // The second document of a stream, with its lines counted in the stream.
  auto second = parse_workloads(head + "spec: {resources: {cpu: 1}}\n---\n" + head + alias_bomb(10, 8, "x"));
  ASSERT_FALSE(second.is_ok());
  EXPECT_NE(second.status().message().find("manifest: line 1"), std::string::npos)
      << second.status().message();
  auto cluster = parse_cluster("apiVersion: shoal.dev/v1\nkind: Cluster\n" + alias_bomb(10, 8, "spec"));
  ASSERT_FALSE(cluster.is_ok());
  EXPECT_NE(cluster.status().message().find("cluster manifest: line "), std::string::npos);
  auto inventory = parse_inventory("apiVersion: shoal.dev/v1\nkind: Inventory\n" + alias_bomb(10, 8, "clusters"));
  ASSERT_FALSE(inventory.is_ok());
  EXPECT_NE(inventory.status().message().find("inventory: line "), std::string::npos);
}

TEST(YamlDocumentTest, JsonFormKeepsEveryScalarsTextAndRefusesWhatJsonCannotHold) {
  auto doc = load_yaml("a: &x [1, \"2\", true, ~]\nb: *x\nc: {d: 0.5}\n", "test");
  ASSERT_TRUE(doc.is_ok()) << doc.status().message();
  auto json = yaml_to_json(*doc, "test");
  ASSERT_TRUE(json.is_ok()) << json.status().message();
  EXPECT_EQ(*json, nlohmann::json::parse(R"({"a": ["1", "2", "true", null], "b": ["1", "2", "true", null],
                                            "c": {"d": "0.5"}})"));
  auto back = json_to_yaml(*json, "test");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ((*back)["b"][2].Scalar(), "true");
  EXPECT_TRUE((*back)["a"][3].IsNull());
  EXPECT_EQ((*back)["c"]["d"].Scalar(), "0.5");

  auto complex_key = load_yaml("? [a, b]\n: c\n", "test");
  ASSERT_TRUE(complex_key.is_ok());
  auto refused = yaml_to_json(*complex_key, "manifest document 1");
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().message(), "manifest document 1: expected string keys, got a list as a key");
}

}  // namespace
}  // namespace shoal::model
