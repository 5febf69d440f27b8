#include <gtest/gtest.h>

#include "core/segments.h"

namespace ip {
namespace {

TEST(Segments, OwnerOfEveryItem) {
  // Three requests of 3, 0 and 2 items, then one of 1: offsets {0, 3, 3, 5, 6}.
  const long long off[] = {0, 3, 3, 5, 6};
  const int expect[] = {0, 0, 0, 2, 2, 3};  // the empty request 1 owns nothing
  for (int i = 0; i < 6; ++i) EXPECT_EQ(segment_of(off, 4, i), expect[i]) << "item " << i;
}

TEST(Segments, SingleRequestAndManyRequests) {
  const long long one[] = {0, 10};
  EXPECT_EQ(segment_of(one, 1, 0), 0);
  EXPECT_EQ(segment_of(one, 1, 9), 0);
  std::vector<long long> off(1025);
  for (int b = 0; b <= 1024; ++b) off[b] = 7LL * b;
  for (long long i = 0; i < 7 * 1024; i += 5) EXPECT_EQ(segment_of(off.data(), 1024, i), i / 7) << "item " << i;
}

}  // namespace
}  // namespace ip
