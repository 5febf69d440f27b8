// Launcher of the fused weighting + pooling + quantization kernels (kernels/pool.cuh): validate
// (pool_validate.cc), then the kernels of the key type (pool_{f32,f16,bf16}.cu) dispatch D and G and
// launch on the stream.
#include <fmt/format.h>

#include "core/error.h"
#include "kernels/pool.h"
#include "kernels/pool_launch.h"

namespace ip::cuda {

void pool(const PoolArgs& a, cudaStream_t stream) {
  validate_pool_args(a);
  if (a.batch.total_entries == 0) return;
  switch (a.key_type) {
    case KeyType::fp32: detail::pool_launch_f32(a, stream); return;
    case KeyType::fp16: detail::pool_launch_f16(a, stream); return;
    case KeyType::bf16: detail::pool_launch_bf16(a, stream); return;
  }
  throw Error(fmt::format("cuda pool: unsupported key_type {}", static_cast<int>(a.key_type)));
}

}  // namespace ip::cuda
