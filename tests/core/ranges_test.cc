// NVTX ranges without a profiler attached: the range objects push and pop (NVTX calls are no-ops with
// no tool), nest, and the string registry hands out stable objects.
#include "core/ranges.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <thread>

namespace ip::prof {
namespace {

TEST(Ranges, ConstructDestructAndNest) {
  const int base = ScopedRange::depth();
  {
    ScopedRange point(std::string_view("point 0: pool.group_size=4"));
    EXPECT_EQ(ScopedRange::depth(), base + 1);
    {
      ScopedRange pool(Stage::pool);
      EXPECT_EQ(ScopedRange::depth(), base + 2);
      ScopedRange inner(intern("custom"));
      EXPECT_EQ(ScopedRange::depth(), base + 3);
    }
    EXPECT_EQ(ScopedRange::depth(), base + 1);
    for (int i = 0; i < 1000; ++i) {
      ScopedRange s(Stage::score);
      ScopedRange t(Stage::topk);
    }
    EXPECT_EQ(ScopedRange::depth(), base + 1);
  }
  EXPECT_EQ(ScopedRange::depth(), base);
}

TEST(Ranges, MacrosOpenRangesOnlyWithNvtx) {
  const int base = ScopedRange::depth();
  {
    IP_RANGE(attention);
    IP_RANGE_MESSAGE(std::string("point 3: x=1"));
    EXPECT_EQ(ScopedRange::depth(), base + (IP_HAVE_NVTX ? 2 : 0));
  }
  EXPECT_EQ(ScopedRange::depth(), base);
}

TEST(Ranges, CurrentStageFollowsNesting) {
  EXPECT_EQ(ScopedRange::current_stage(), Stage::count);
  {
    ScopedRange f(Stage::fidelity);
    EXPECT_EQ(ScopedRange::current_stage(), Stage::fidelity);
    {
      ScopedRange t(Stage::topk);
      ScopedRange m(std::string_view("not a stage"));
      EXPECT_EQ(ScopedRange::current_stage(), Stage::topk);
    }
    EXPECT_EQ(ScopedRange::current_stage(), Stage::fidelity);
  }
  EXPECT_EQ(ScopedRange::current_stage(), Stage::count);
}

TEST(Ranges, DepthIsPerThread) {
  ScopedRange outer(Stage::sweep);
  int other = -1;
  std::thread t([&] { other = ScopedRange::depth(); });
  t.join();
  EXPECT_EQ(other, 0);
}

TEST(Ranges, RegistryReturnsStableHandles) {
  const RegisteredString& a = intern("pool");
  const RegisteredString& b = intern(std::string("po") + "ol");
  EXPECT_EQ(&a, &b);
  EXPECT_EQ(a.text(), "pool");
  EXPECT_EQ(&stage_string(Stage::pool), &a);  // stage names are interned in the same registry
  const RegisteredString& c = intern("score");
  EXPECT_NE(&a, &c);
  // Many more names do not move the earlier ones.
  for (int i = 0; i < 2000; ++i) intern("name " + std::to_string(i));
  EXPECT_EQ(&intern("pool"), &a);
  EXPECT_EQ(&intern("score"), &c);
#if IP_HAVE_NVTX
  EXPECT_EQ(intern("pool").handle(), a.handle());
#endif
}

TEST(Ranges, StageNamesAreDistinctAndFilterable) {
  std::set<std::string> names;
  for (int i = 0; i < static_cast<int>(Stage::count); ++i) {
    const std::string n = stage_name(static_cast<Stage>(i));
    EXPECT_EQ(n.find_first_of(" /@"), std::string::npos) << n;  // usable in ncu's DOMAIN@RANGE/ filters
    names.insert(n);
  }
  EXPECT_EQ(names.size(), static_cast<std::size_t>(Stage::count));
  EXPECT_STREQ(stage_name(Stage::cache_model), "cache_model");
  EXPECT_STREQ(kDomainName, "IndexPool");
}

TEST(Ranges, RegistryIsThreadSafe) {
  const RegisteredString* seen[4] = {};
  std::thread ts[4];
  for (int i = 0; i < 4; ++i) ts[i] = std::thread([&, i] {
    for (int j = 0; j < 200; ++j) intern("t" + std::to_string(j));
    seen[i] = &intern("shared name");
  });
  for (auto& t : ts) t.join();
  for (int i = 1; i < 4; ++i) EXPECT_EQ(seen[i], seen[0]);
}

}  // namespace
}  // namespace ip::prof
