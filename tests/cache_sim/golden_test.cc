// Golden miss counts: libCacheSim's published figures for LRU, Clock and FIFO on
// cloudPhysicsIO.oracleGeneral.bin, byte capacities 128 MiB .. 1 GiB (../shared/data/README.md).
// The trace lives beside the repository (../shared/data); a missing file fails these tests.
#include <gtest/gtest.h>

#include <filesystem>
#include <fmt/format.h>

#include "cache_sim/hierarchy.h"
#include "cache_sim/prepared.h"

#ifndef IP_SHARED_DATA_DIR
#error "IP_SHARED_DATA_DIR must name ../shared/data (set by tests/CMakeLists.txt)"
#endif

namespace ip::cache {
namespace {

const std::string kTracePath = std::string(IP_SHARED_DATA_DIR) + "/cloudPhysicsIO.oracleGeneral.bin";

// From ../shared/data/README.md (libCacheSim's test suite), capacities 128, 256, ..., 1024 MiB.
constexpr std::uint64_t kLru[8] = {93374, 89783, 83572, 81722, 72494, 72104, 71972, 71704};
constexpr std::uint64_t kClock[8] = {93313, 89775, 83411, 81328, 74815, 72283, 71927, 64456};
constexpr std::uint64_t kFifo[8] = {93403, 89386, 84387, 84025, 72498, 72228, 72182, 72140};

class Golden : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (std::filesystem::exists(kTracePath)) {
      trace_ = new Trace(read_trace(kTracePath, TraceFormat::oracle));
      prepared_ = new PreparedTrace(prepare(*trace_));
    }
  }
  static void TearDownTestSuite() {
    delete prepared_;
    delete trace_;
    prepared_ = nullptr;
    trace_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(trace_, nullptr) << "the golden trace is missing: " << kTracePath
                               << "\n(it belongs in ../shared/data beside the repository; see ../shared/data/README.md)";
  }
  static void check(const char* policy, const std::uint64_t (&expected)[8]) {
    for (int i = 0; i < 8; ++i) {
      const std::string spec = fmt::format("{}:{}MiB", policy, 128 * (i + 1));
      Hierarchy h({parse_level_spec(spec)});
      h.run(*trace_);
      EXPECT_EQ(h.stats(0).misses, expected[i]) << spec;
      EXPECT_EQ(h.stats(0).accesses, 113872u) << spec;
      Hierarchy d({parse_level_spec(spec)});  // the same on the prepared trace (dense ids)
      d.run(*prepared_);
      EXPECT_EQ(d.stats(0), h.stats(0)) << spec << " prepared";
    }
  }
  static Trace* trace_;
  static PreparedTrace* prepared_;
};
Trace* Golden::trace_ = nullptr;
PreparedTrace* Golden::prepared_ = nullptr;

TEST_F(Golden, TraceHasThePublishedLength) { EXPECT_EQ(trace_->accesses.size(), 113872u); }
TEST_F(Golden, LruMissCounts) { check("lru", kLru); }
TEST_F(Golden, ClockMissCounts) { check("clock", kClock); }
TEST_F(Golden, FifoMissCounts) { check("fifo", kFifo); }

// The same counts through a two-level nine hierarchy: the first level is unaffected by the second.
TEST_F(Golden, FirstLevelOfAHierarchyIsUnchanged) {
  Hierarchy h({parse_level_spec("clock:1024MiB"), parse_level_spec("lru:2GiB")});
  h.run(*trace_);
  EXPECT_EQ(h.stats(0).misses, kClock[7]);
  EXPECT_EQ(h.stats(1).accesses, kClock[7]);
}

}  // namespace
}  // namespace ip::cache
