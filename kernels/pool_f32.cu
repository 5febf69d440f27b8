// Pooling kernels for fp32 keys (one translation unit per key type; see pool_dispatch.cuh).
#include "kernels/pool_dispatch.cuh"
#include "kernels/pool_launch.h"

namespace ip::cuda::detail {

void pool_launch_f32(const PoolArgs& a, cudaStream_t s) { dispatch<KeyF32>(a, s); }

}  // namespace ip::cuda::detail
