// Tuning constants and shared-memory layout of the gated linear attention kernels
// (kernels/linear_attention.cuh). Plain header: the CPU replay test (tests/core/gla_tile_test.cc)
// includes it to replay exactly the kernel's tiles.
#pragma once

#include "core/hd.h"

namespace ip::cuda {

constexpr int kGlaTile = 32;       // value columns per block of the chunked kernel
constexpr int kGlaThreads = 256;   // threads per block of the chunked kernel
constexpr int kAppendThreads = 256;
constexpr int kReadoutThreads = 128;
constexpr int kInputThreads = 256;

// Row stride of staged keys, queries and log-gates: odd, so the rows read by neighbouring threads of
// phase 2 (one key row each) fall in different shared-memory banks.
IP_HOST_DEVICE constexpr int gla_ldk(int dk) { return dk | 1; }

// Floats of the chunked kernel's shared memory: keys and log-gates [C, ldk] each, the state tile
// [dk, kGlaTile], the values tile [C, kGlaTile], and with outputs the queries [C, ldk] and scores [C, C].
IP_HOST_DEVICE constexpr long long gla_smem_floats(int dk, int chunk, bool outputs) {
  const long long ldk = gla_ldk(dk);
  return 2LL * chunk * ldk + 1LL * dk * kGlaTile + 1LL * chunk * kGlaTile +
         (outputs ? 1LL * chunk * ldk + 1LL * chunk * chunk : 0LL);
}

}  // namespace ip::cuda
