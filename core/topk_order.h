// The order of exact top-k (DESIGN.md: higher score first, equal scores to the lower id) as integer
// keys, shared by the CPU tests and the CUDA radix select (kernels/topk.cuh).
//   topk_key: an order-preserving uint32 of a float: a > b  <=>  key(a) > key(b), and a == b  <=>
//             key(a) == key(b), so -0.0 and +0.0 (equal under the CPU's comparison) get the same key.
//             NaN (which the CPU rejects) gets key 0, below -inf: on the GPU a NaN is never chosen
//             unless k forces it.
//   topk_number_key: topk_key of a number's bits, without branches (the CPU's top-k; NaNs found apart).
//   topk_composite: (key, id) packed so that a larger composite comes first in the top-k order;
//             unique for distinct ids, so sorting composites descending is the full stable sort.
#pragma once

#include <cstdint>

#include "core/hd.h"
#include "core/numeric.h"

namespace ip {

IP_HOST_DEVICE std::uint32_t topk_key(float f) {
  std::uint32_t u = f32_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0u;  // NaN: below everything
  if (u == 0x80000000u) u = 0u;                     // -0.0 ranks with +0.0
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// topk_key of a number's bits without branches (the CPU's top-k histograms a row's keys, whose signs are
// not predictable); a NaN's key is not 0 here, so callers find NaNs apart.
IP_HOST_DEVICE std::uint32_t topk_number_key(std::uint32_t u) {
  u = u == 0x80000000u ? 0u : u;  // -0.0 ranks with +0.0
  return u ^ (static_cast<std::uint32_t>(static_cast<std::int32_t>(u) >> 31) | 0x80000000u);
}

// The CPU's comparison (core/topk.cc): does (sa, ia) come before (sb, ib)?
IP_HOST_DEVICE bool topk_before(float sa, std::int64_t ia, float sb, std::int64_t ib) {
  return sa > sb || (sa == sb && ia < ib);
}

// Ids are below 2^31, so the low word (0xFFFFFFFF - id) is never 0 and a composite is never 0:
// 0 is free to pad sort buffers (it sorts after every real candidate).
IP_HOST_DEVICE std::uint64_t topk_composite(std::uint32_t key, std::uint32_t id) {
  return (static_cast<std::uint64_t>(key) << 32) | static_cast<std::uint64_t>(0xFFFFFFFFu - id);
}

IP_HOST_DEVICE std::int32_t topk_composite_id(std::uint64_t c) {
  return static_cast<std::int32_t>(0xFFFFFFFFu - static_cast<std::uint32_t>(c & 0xFFFFFFFFull));
}

}  // namespace ip
