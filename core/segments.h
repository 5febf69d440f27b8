// A batch of B requests laid back to back without padding: request b owns items
// [offsets[b], offsets[b+1]) of every per-token (or per-group) array, CSR style. Shared by the CPU
// backend's batched paths and the CUDA kernels.
#pragma once

#include "core/hd.h"

namespace ip {

// The request that owns item i: the largest b in [0, count) with offsets[b] <= i (offsets ascending,
// offsets[0] = 0, count + 1 entries). Binary search: 10 steps for 1024 requests.
IP_HOST_DEVICE int segment_of(const long long* offsets, int count, long long i) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (offsets[mid] <= i)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

}  // namespace ip
