// Result's contract holds in every build: reading the value of a failed
// Result, or making one from an ok Status, stops the process with where and
// what (common/check.h), instead of reading an empty optional.
#include "common/status.h"

#include <gtest/gtest.h>

namespace shoal {
namespace {

Result<int> failed() { return not_found("nothing here"); }

TEST(StatusDeathTest, ReadingAFailedResultsValueStopsTheProcessSayingWhat) {
  Result<int> result = failed();
  ASSERT_FALSE(result.is_ok());
  EXPECT_DEATH((void)result.value(), "invariant broken at .*status.h:[0-9]+: the value of a failed Result was read");
  EXPECT_DEATH((void)*failed(), "the value of a failed Result was read");
}

TEST(StatusDeathTest, AResultMadeFromAnOkStatusStopsTheProcess) {
  EXPECT_DEATH((void)Result<int>{Status::ok()}, "would hold neither value nor error");
}

TEST(StatusTest, AGoodResultGivesItsValue) {
  Result<int> result = 7;
  ASSERT_TRUE(result.is_ok());
  EXPECT_EQ(*result, 7);
  EXPECT_EQ(failed().status().message(), "nothing here");
}

}  // namespace
}  // namespace shoal
