// The per-key-type entry points of the pooling kernels (kernels/pool_{f32,f16,bf16}.cu), called by
// pool() in kernels/pool.cu after validation. Internal to kernels/.
#pragma once

#include <cuda_runtime.h>

#include "kernels/pool.h"

namespace ip::cuda::detail {

void pool_launch_f32(const PoolArgs& a, cudaStream_t s);
void pool_launch_f16(const PoolArgs& a, cudaStream_t s);
void pool_launch_bf16(const PoolArgs& a, cudaStream_t s);

}  // namespace ip::cuda::detail
