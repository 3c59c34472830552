#include <gtest/gtest.h>

#include "common/time.h"
#include "model/quantity.h"

namespace shoal::model {
namespace {

TEST(QuantityTest, ParsesCpuInMillicores) {
  EXPECT_EQ(*parse_cpu_milli("500m", "cpu"), 500);
  EXPECT_EQ(*parse_cpu_milli("4", "cpu"), 4000);
  EXPECT_EQ(*parse_cpu_milli("1.5", "cpu"), 1500);
  EXPECT_EQ(*parse_cpu_milli("2k", "cpu"), 2000000);
  EXPECT_EQ(*parse_cpu_milli("1e3", "cpu"), 1000000);
}

// Kubernetes rounds cpu 0.0001 up to 1m; shoal refuses what it
// cannot hold exactly, so a limit never differs from what was written.
TEST(QuantityTest, RefusesMorePrecisionThanOneUnitInsteadOfRounding) {
  auto cpu = parse_cpu_milli("0.0001", "spec.resources.cpu");
  ASSERT_FALSE(cpu.is_ok());
  EXPECT_EQ(cpu.status().message(),
            "spec.resources.cpu: expected at most three decimal places (1m is the finest unit), got \"0.0001\"");
  EXPECT_FALSE(parse_cpu_milli("1.5m", "cpu").is_ok());
  auto memory = parse_memory_bytes("0.1Ki", "spec.resources.memory");
  ASSERT_FALSE(memory.is_ok());
  EXPECT_NE(memory.status().message().find("whole number of bytes"), std::string::npos);
}

// What an API server answers is read as Kubernetes reads it: finer than
// the unit rounds up (a pod's memory "100m" is 1 byte, as the scheduler
// counts it), never refused.
TEST(QuantityTest, RoundsUpAsKubernetesDoesWhenAsked) {
  EXPECT_EQ(*parse_memory_bytes("100m", "memory", Rounding::kUp), 1);
  EXPECT_EQ(*parse_memory_bytes("1500m", "memory", Rounding::kUp), 2);
  EXPECT_EQ(*parse_memory_bytes("0.1Ki", "memory", Rounding::kUp), 103);
  EXPECT_EQ(*parse_memory_bytes("2000m", "memory", Rounding::kUp), 2);
  EXPECT_EQ(*parse_cpu_milli("0.0001", "cpu", Rounding::kUp), 1);
  EXPECT_EQ(*parse_cpu_milli("1.5m", "cpu", Rounding::kUp), 2);
  EXPECT_EQ(*parse_cpu_milli("1e-99", "cpu", Rounding::kUp), 1);
  EXPECT_EQ(*parse_cpu_milli("0.0000", "cpu", Rounding::kUp), 0);
  EXPECT_EQ(*parse_count("0.5", "gpu", Rounding::kUp), 1);
  EXPECT_EQ(*parse_cpu_milli("250m", "cpu", Rounding::kUp), 250);
  EXPECT_FALSE(parse_memory_bytes("-1", "memory", Rounding::kUp).is_ok());
  EXPECT_FALSE(parse_memory_bytes("99999999999999999999Ei", "memory", Rounding::kUp).is_ok());
}

TEST(QuantityTest, ParsesMemoryInBytes) {
  EXPECT_EQ(*parse_memory_bytes("4Gi", "memory"), int64_t{4} << 30);
  EXPECT_EQ(*parse_memory_bytes("1536Mi", "memory"), int64_t{1536} << 20);
  EXPECT_EQ(*parse_memory_bytes("1G", "memory"), 1000000000);
  EXPECT_EQ(*parse_memory_bytes("128974848", "memory"), 128974848);
  EXPECT_EQ(*parse_memory_bytes("0.5Ki", "memory"), 512);
}

TEST(QuantityTest, RefusesGarbageNamingTheField) {
  for (const char* bad : {"four", "", "-1", "1.2.3", "5Xi", "1e", "m", "99999999999999999999Ei"}) {
    auto result = parse_cpu_milli(bad, "spec.resources.cpu");
    ASSERT_FALSE(result.is_ok()) << bad;
    EXPECT_NE(result.status().message().find("spec.resources.cpu"), std::string::npos);
    EXPECT_EQ(result.status().code(), ErrorCode::kInvalidArgument);
  }
}

TEST(QuantityTest, FormatsCanonically) {
  EXPECT_EQ(format_cpu(3000), "3");
  EXPECT_EQ(format_cpu(1500), "1500m");
  EXPECT_EQ(format_memory(int64_t{4} << 30), "4Gi");
  EXPECT_EQ(format_memory(int64_t{1536} << 20), "1536Mi");
  EXPECT_EQ(format_memory(1000), "1000");
  EXPECT_EQ(format_memory(0), "0");
}

TEST(QuantityTest, FormatThenParseIsIdentity) {
  for (int64_t bytes : {int64_t{1}, int64_t{1024}, int64_t{3} << 40, int64_t{123456789}}) {
    EXPECT_EQ(*parse_memory_bytes(format_memory(bytes), "m"), bytes);
  }
  for (int64_t milli : {int64_t{1}, int64_t{999}, int64_t{1000}, int64_t{64000}}) {
    EXPECT_EQ(*parse_cpu_milli(format_cpu(milli), "c"), milli);
  }
}

TEST(DurationTest, ParsesGoStyleDurations) {
  EXPECT_EQ(parse_duration("500ms", "d")->count(), 500);
  EXPECT_EQ(parse_duration("5s", "d")->count(), 5000);
  EXPECT_EQ(parse_duration("1h30m", "d")->count(), 5400000);
  EXPECT_EQ(parse_duration("1.5s", "d")->count(), 1500);
  EXPECT_FALSE(parse_duration("5", "d").is_ok());
  EXPECT_FALSE(parse_duration("5 days", "d").is_ok());
  EXPECT_FALSE(parse_duration("", "d").is_ok());
  EXPECT_EQ(format_duration(Duration(5400000)), "1h30m");
  EXPECT_EQ(format_duration(Duration(250)), "250ms");
}

}  // namespace
}  // namespace shoal::model
