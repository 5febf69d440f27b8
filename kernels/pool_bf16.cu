// Pooling kernels for bf16 keys (one translation unit per key type; see pool_dispatch.cuh).
#include "kernels/pool_dispatch.cuh"
#include "kernels/pool_launch.h"

namespace ip::cuda::detail {

void pool_launch_bf16(const PoolArgs& a, cudaStream_t s) { dispatch<KeyBF16>(a, s); }

}  // namespace ip::cuda::detail
