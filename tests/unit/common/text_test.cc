#include "common/text.h"

#include <gtest/gtest.h>

namespace shoal {
namespace {

TEST(TextTest, Utf8AcceptsEveryWellFormedSequenceAndNothingElse) {
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_TRUE(is_valid_utf8("plain ascii"));
  EXPECT_TRUE(is_valid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\x9f"));  // é € 🐟
  size_t bad = 0;
  EXPECT_FALSE(is_valid_utf8("ok\xff", &bad));
  EXPECT_EQ(bad, 2u);
  EXPECT_FALSE(is_valid_utf8("\xc3"));              // cut short
  EXPECT_FALSE(is_valid_utf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(is_valid_utf8("\xe0\x80\xaf"));      // overlong, three bytes
  EXPECT_FALSE(is_valid_utf8("\xed\xa0\x80"));      // a UTF-16 surrogate
  EXPECT_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xe2\x28\xa1"));      // continuation missing
}

TEST(TextTest, QuotedStaysOnOneLineAndShowsBadBytes) {
  EXPECT_EQ(quoted_text("east"), "\"east\"");
  EXPECT_EQ(quoted_text("a\nb"), "\"a\\x0Ab\"");
  EXPECT_EQ(quoted_text("x\xff" "y"), "\"x\\xFFy\"");
  EXPECT_EQ(quoted_text("say \"hi\""), "\"say \\\"hi\\\"\"");
  EXPECT_EQ(quoted_text("caf\xc3\xa9"), "\"caf\xc3\xa9\"");
  EXPECT_EQ(quoted_text(std::string(200, 'a'), 10), "\"aaaaaaaaaa...\"");
}

TEST(TextTest, NamesAreDnsLabelsAndTheErrorNamesTheField) {
  EXPECT_TRUE(validate_name("east-1", "--cluster").is_ok());
  EXPECT_TRUE(validate_name(std::string(63, 'a'), "--cluster").is_ok());
  for (std::string bad : {std::string(""), std::string(64, 'a'), std::string("-east"), std::string("east-"),
                          std::string("East"), std::string("a b"), std::string("a\nb"), std::string("\xff")}) {
    Status status = validate_name(bad, "--org");
    EXPECT_FALSE(status.is_ok()) << bad;
    EXPECT_EQ(status.message().rfind("--org: expected", 0), 0u) << status.message();
    EXPECT_EQ(status.message().find('\n'), std::string::npos) << status.message();
  }
}

TEST(TextTest, KubernetesLabelsAreCheckedAsTheApiServerChecksThem) {
  for (auto [key, value] : std::initializer_list<std::pair<std::string, std::string>>{
           {"app", "web"},
           {"app.kubernetes.io/name", "My_App.v2"},
           {"team", ""},
           {"example.com/" + std::string(63, 'k'), std::string(63, 'v')},
           {"A-b_c.D", "x"}}) {
    EXPECT_TRUE(validate_kubernetes_label(key, value, "metadata.labels").is_ok()) << key << "=" << value;
  }
  for (auto [key, value] : std::initializer_list<std::pair<std::string, std::string>>{
           {"", "x"},
           {"-app", "x"},
           {"app-", "x"},
           {std::string(64, 'k'), "x"},
           {"Example.com/app", "x"},
           {"example..com/app", "x"},
           {"/app", "x"},
           {"example.com/", "x"},
           {"a b", "x"},
           {"app", "has space"},
           {"app", "-x"},
           {"app", std::string(64, 'v')},
           {"app", "a/b"}}) {
    Status status = validate_kubernetes_label(key, value, "metadata.labels");
    EXPECT_FALSE(status.is_ok()) << key << "=" << value;
    EXPECT_EQ(status.message().rfind("metadata.labels", 0), 0u) << status.message();
    EXPECT_NE(status.message().find("expected"), std::string::npos) << status.message();
    EXPECT_EQ(status.message().find('\n'), std::string::npos) << status.message();
  }
}

}  // namespace
}  // namespace shoal
