// Host-side checks of the pooling launcher's arguments: everything pool() can know without touching
// the device. Mirrors core/pool.cc validate_pool_inputs for the scalar parameters.
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/error.h"
#include "kernels/pool.h"
#include "kernels/pool_tuning.h"

namespace ip::cuda {
namespace {

bool aligned(const void* p, std::size_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

bool known(Weighting w) {
  switch (w) {
    case Weighting::uniform:
    case Weighting::positional:
    case Weighting::cosine:
    case Weighting::tfidf:
    case Weighting::hybrid:
    case Weighting::maxmin:
    case Weighting::exact: return true;
  }
  return false;
}

bool known(Precision p) {
  switch (p) {
    case Precision::fp32:
    case Precision::fp16:
    case Precision::bf16:
    case Precision::int8:
    case Precision::fp8: return true;
  }
  return false;
}

bool known(KeyType t) { return t == KeyType::fp32 || t == KeyType::fp16 || t == KeyType::bf16; }

}  // namespace

void validate_pool_args(const PoolArgs& a) {
  const Batch& b = a.batch;
  IP_REQUIRE(b.requests >= 1, "cuda pool: batch.requests = {} (must be >= 1)", b.requests);
  IP_REQUIRE(b.token_offset != nullptr && b.entry_offset != nullptr, "cuda pool: batch.token_offset / entry_offset is null");
  IP_REQUIRE(b.total_tokens >= 0, "cuda pool: batch.total_tokens = {} (must be >= 0)", b.total_tokens);
  IP_REQUIRE(a.dim >= 1, "cuda pool: dim = {} (must be >= 1)", a.dim);
  IP_REQUIRE(a.group_size >= 1, "cuda pool: group_size G = {} (must be >= 1)", a.group_size);
  IP_REQUIRE(known(a.scheme), "cuda pool: unsupported scheme (Weighting value {})", static_cast<int>(a.scheme));
  IP_REQUIRE(known(a.precision), "cuda pool: unsupported precision (Precision value {})", static_cast<int>(a.precision));
  IP_REQUIRE(known(a.key_type), "cuda pool: unsupported key_type (KeyType value {})", static_cast<int>(a.key_type));
  IP_REQUIRE(a.scheme != Weighting::exact || a.group_size == 1,
             "cuda pool: group_size G = {} with scheme 'exact' (must be 1)", a.group_size);
  const long long G = a.group_size, T = b.total_tokens;
  // Each request contributes ceil(t_b / G) entries: at least ceil(T / G) in all, at most T and T / G + B.
  IP_REQUIRE(b.total_entries >= (T + G - 1) / G && b.total_entries <= T && b.total_entries <= T / G + b.requests,
             "cuda pool: batch.total_entries = {} cannot be the groups of {} tokens in {} requests at G = {}",
             b.total_entries, T, b.requests, G);
  // The generic kernel keeps 2(G + D) floats per warp in shared memory.
  IP_REQUIRE(8LL * (G + a.dim) <= pool_tuning::kGenericMaxSmemBytes,
             "cuda pool: unsupported dim {} with group_size {} (needs G + D <= {})", a.dim, G,
             pool_tuning::kGenericMaxSmemBytes / 8);

  // Pointers: present where needed, aligned to their element.
  if (T > 0) {
    IP_REQUIRE(a.keys != nullptr, "cuda pool: keys is null");
    IP_REQUIRE(aligned(a.keys, key_bytes(a.key_type)), "cuda pool: keys not aligned to {} bytes", key_bytes(a.key_type));
  }
  if (b.total_entries > 0) {
    IP_REQUIRE(a.payload != nullptr, "cuda pool: payload is null");
    IP_REQUIRE(aligned(a.payload, element_bytes(a.precision)), "cuda pool: payload not aligned to {} bytes",
               element_bytes(a.precision));
    if (scale_bytes(a.precision))
      IP_REQUIRE(a.scales != nullptr && aligned(a.scales, 4), "cuda pool: precision '{}' needs scales (4-byte aligned)",
                 to_string(a.precision));
  }
  IP_REQUIRE(aligned(a.weights, 4), "cuda pool: weights not aligned to 4 bytes");
  if (a.prev_weights)
    IP_REQUIRE(aligned(a.prev_weights, 4) && a.fresh_from != nullptr && aligned(a.fresh_from, 8) &&
                   a.repooled != nullptr && aligned(a.repooled, 8),
               "cuda pool: update mode (prev_weights set) needs fresh_from and repooled (aligned)");
  IP_REQUIRE(aligned(a.bias, 4), "cuda pool: bias not aligned to 4 bytes");
  IP_REQUIRE(aligned(a.query_ref, 4), "cuda pool: query_ref not aligned to 4 bytes");
  if (uses_stats(a.scheme)) {
    IP_REQUIRE(a.stats_mass != nullptr && a.stats_count != nullptr && a.stats_steps != nullptr,
               "cuda pool: scheme '{}' needs stats_mass, stats_count and stats_steps", to_string(a.scheme));
    IP_REQUIRE(aligned(a.stats_mass, 4) && aligned(a.stats_count, 4) && aligned(a.stats_steps, 8),
               "cuda pool: stats_mass / stats_count / stats_steps misaligned");
  }

  // Scalar parameters, as core/pool.cc checks them (the bias values live on the device: not checked).
  IP_REQUIRE(a.bias != nullptr || (std::isfinite(a.lambda) && std::fabs(a.lambda) <= 80.0f),
             "cuda pool: lambda = {} (must be finite, |lambda| <= 80)", a.lambda);
  IP_REQUIRE(a.eps > 0.0f && std::isfinite(a.eps), "cuda pool: eps = {} (must be > 0)", a.eps);
  IP_REQUIRE(a.power > 0.0f && std::isfinite(a.power), "cuda pool: power = {} (must be > 0)", a.power);
  IP_REQUIRE(std::pow(a.eps, a.power) >= std::numeric_limits<float>::min(),
             "cuda pool: eps^power = {}^{} underflows float (lower the power or raise eps)", a.eps, a.power);
}

}  // namespace ip::cuda
