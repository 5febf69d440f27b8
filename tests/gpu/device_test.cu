// The device query works on every machine; the buffer round trip needs a GPU.
#include "tests/gpu/gpu_test.h"

namespace ip {
namespace {

TEST(Device, DescribeNeverThrows) {
  const int n = cuda::device_count();
  EXPECT_GE(n, 0);
  EXPECT_FALSE(cuda::describe_devices().empty());
}

TEST(Device, BufferRoundTripAndPoison) {
  IP_REQUIRE_GPU();
  const std::vector<float> h = {1.0f, -2.5f, 3.0f, 0.0f, 19.0f};
  auto d = test::to_device(h);
  EXPECT_EQ(d.to_host(), h);
  auto p = test::poisoned<float>(7);
  for (float v : p.to_host()) EXPECT_TRUE(test::is_poison(v));
}

}  // namespace
}  // namespace ip
