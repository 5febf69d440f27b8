// Tuning constants of the pooling kernels (kernels/pool.cuh), kept apart from the logic.
#pragma once

namespace ip::cuda::pool_tuning {

// Fast path: one warp per group, this many warps (groups) per block.
constexpr int kFastWarpsPerBlock = 8;
// Generic path: warps per block, and the per-warp shared memory it may use (floats: 2G weights +
// 2D row scratch). A block of one warp may use up to kGenericMaxSmemBytes.
constexpr int kGenericWarpsPerBlock = 4;
constexpr int kGenericMaxSmemBytes = 48 * 1024;

}  // namespace ip::cuda::pool_tuning
