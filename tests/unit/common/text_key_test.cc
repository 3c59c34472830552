// TextKey must order exactly as std::string does: maps keyed by it iterate
// peers in the same order as before, and the simulator's digests depend on it.
#include "common/text_key.h"

#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

namespace shoal {
namespace {

// Strings that share prefixes, run short of 8 bytes, and hold zero and high bytes.
rc::Gen<std::string> close_strings() {
  return rc::gen::container<std::string>(
      rc::gen::element<char>('\0', '\x01', 'a', 'b', '\x7f', '\x80', '\xff'));
}

RC_GTEST_PROP(TextKeyProperty, OrdersAsTheTextDoes, ()) {
  std::string a = *close_strings();
  std::string b = *close_strings();
  TextKeyLess less;
  RC_ASSERT(less(TextKey(a), TextKey(b)) == (a < b));
  RC_ASSERT(less(TextKey(a), b) == (a < b));
  RC_ASSERT(less(a, TextKey(b)) == (a < b));
  RC_ASSERT((TextKey(a) == TextKey(b)) == (a == b));
}

TEST(TextKey, AMapOfThemIteratesAndFindsAsAStringMapDoes) {
  std::vector<std::string> ids = {"abcdefgh1", "abcdefgh0", "abcdefg", "abc", "", "b",
                                  "abcdefgh",  std::string("ab\0c", 4), "zzzzzzzzzzzz"};
  TextMap<int> map;
  for (size_t i = 0; i < ids.size(); ++i) map.emplace(ids[i], static_cast<int>(i));
  std::vector<std::string> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::string> iterated;
  for (const auto& [key, value] : map) iterated.push_back(key);
  EXPECT_EQ(iterated, sorted);
  for (size_t i = 0; i < ids.size(); ++i) {
    auto found = map.find(ids[i]);  // by std::string, no key made
    ASSERT_NE(found, map.end()) << ids[i];
    EXPECT_EQ(found->second, static_cast<int>(i));
  }
  EXPECT_EQ(map.count(std::string("abcdefgh2")), 0u);
  EXPECT_EQ(map.count(std::string("ab")), 0u);
}

}  // namespace
}  // namespace shoal
