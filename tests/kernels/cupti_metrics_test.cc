// Metric validation with CUPTI's profiler host API from a chip name alone: runs without a GPU (label
// cpu). Needs the CUPTI library of the toolkit at run time (found through the build tree's RPATH).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "experiments/profile_types.h"
#include "kernels/cupti_counters.h"

#include <cuda_runtime.h>
#include <cupti_result.h>

namespace ip::cupti {
namespace {

TEST(CuptiMetrics, KnowsTheTargetChips) {
  const auto chips = supported_chips();
  for (const char* c : {"GA100", "GH100"})
    EXPECT_NE(std::find(chips.begin(), chips.end(), c), chips.end()) << c;
}

void check_defaults(const std::string& chip) {
  const MetricPlan plan = plan_metrics(chip, exp::default_metrics());
  EXPECT_EQ(plan.chip, chip);
  ASSERT_EQ(plan.metrics.size(), exp::default_metrics().size());
  EXPECT_GE(plan.passes, 1u);
  EXPECT_LE(plan.passes, 64u);
  std::printf("[ chip %s ] default metrics need %zu replay passes:\n", chip.c_str(), plan.passes);
  for (const auto& m : plan.metrics) std::printf("    %-52s unit %-8s %s\n", m.name.c_str(), m.unit.c_str(), m.sums ? "sum" : "mean");
  EXPECT_EQ(plan.metrics[0].unit, "byte");   // dram__bytes_read.sum
  EXPECT_EQ(plan.metrics[1].unit, "byte");   // dram__bytes_write.sum
  EXPECT_TRUE(plan.metrics[0].sums);
  EXPECT_EQ(plan.metrics[2].unit, "percent");  // lts__t_sector_hit_rate.pct
  EXPECT_FALSE(plan.metrics[2].sums);
  EXPECT_FALSE(plan.metrics[3].sums);
  EXPECT_FALSE(plan.metrics[4].sums);
  for (const auto& m : plan.metrics) EXPECT_FALSE(m.description.empty()) << m.name;
}

TEST(CuptiMetrics, DefaultsValidForGH100) { check_defaults("GH100"); }
TEST(CuptiMetrics, DefaultsValidForGA100) { check_defaults("GA100"); }

TEST(CuptiMetrics, OneCounterNeedsNoMoreThanTheDefaults) {
  const auto one = plan_metrics("GH100", {"dram__bytes_read.sum"});
  const auto all = plan_metrics("GH100", exp::default_metrics());
  EXPECT_GE(one.passes, 1u);
  EXPECT_LE(one.passes, all.passes);
}

TEST(CuptiMetrics, UnknownMetricIsNamed) {
  try {
    plan_metrics("GH100", {"dram__bytes_read.sum", "dram__bytez_read.sum"});
    FAIL() << "no error for an unknown metric";
  } catch (const UnknownMetric& e) {
    EXPECT_EQ(e.metric(), "dram__bytez_read.sum");
    EXPECT_NE(std::string(e.what()).find("dram__bytez_read.sum"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("GH100"), std::string::npos) << e.what();
  }
}

TEST(CuptiMetrics, UnknownChipAndEmptyListAreErrors) {
  EXPECT_THROW(plan_metrics("GX999", exp::default_metrics()), Error);
  EXPECT_THROW(plan_metrics("GH100", {}), Error);
}

TEST(CuptiMetrics, PermissionErrorSaysWhatToDo) {
  const std::string m = explain(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES, "cuptiRangeProfilerEnable");
  EXPECT_NE(m.find("ERR_NVGPUCTRPERM"), std::string::npos) << m;
  EXPECT_NE(m.find("NVreg_RestrictProfilingToAdminUsers=0"), std::string::npos) << m;
  const std::string busy = explain(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, "cuptiSubscribe");
  EXPECT_NE(busy.find("Nsight"), std::string::npos) << busy;
}

TEST(CuptiMetrics, NoDeviceMeansCountersUnavailable) {
  int n = 0;
  if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0) GTEST_SKIP() << "a device is present";
  cudaGetLastError();
  EXPECT_THROW(device_chip(0), CountersUnavailable);
  EXPECT_THROW(RangeProfiler(0, exp::default_metrics()), CountersUnavailable);
  try {
    RangeProfiler p(0, exp::default_metrics());
  } catch (const CountersUnavailable& e) {
    EXPECT_TRUE(e.environment()) << e.what();  // the machine's doing: a GPU test skips on it
  }
}

// Which failed CUPTI calls are the machine's doing (a GPU test skips) and which are ours (it fails).
TEST(CuptiMetrics, EnvironmentResultsAreTheMachinesDoing) {
  for (CUptiResult r : {CUPTI_ERROR_INSUFFICIENT_PRIVILEGES, CUPTI_ERROR_HARDWARE_BUSY, CUPTI_ERROR_NOT_SUPPORTED,
                        CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED, CUPTI_ERROR_INVALID_DEVICE})
    EXPECT_TRUE(environment_result(r)) << r;
  for (CUptiResult r : {CUPTI_ERROR_INVALID_PARAMETER, CUPTI_ERROR_INVALID_OPERATION, CUPTI_ERROR_UNKNOWN,
                        CUPTI_ERROR_OUT_OF_MEMORY})
    EXPECT_FALSE(environment_result(r)) << r;
}

}  // namespace
}  // namespace ip::cupti
