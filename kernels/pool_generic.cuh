// Generic pooling kernel: any D, any G, any alignment (layout and mapping: kernels/pool.cuh).
// One warp per entry; lane l owns dims l, l + 32, ...; per-warp shared memory (dynamic) holds
//   w[G] weights | v[G] scratch weights | row0[D] | row1[D].
// Lanes only ever read row0/row1 at their own dims; w and v are shared, with __syncwarp() between a
// phase that writes them and one that reads them. Included by pool.cuh only.
#pragma once

namespace ip::cuda::detail {

template <class K>
struct GenericGroup {
  const typename K::raw* keys;  // the group's first key
  int D;
  int n;
  __device__ __forceinline__ float key(int r, int d) const {
    return K::decode(keys[static_cast<long long>(r) * D + d]);
  }
};

// Per-warp shared memory in floats.
__host__ __device__ __forceinline__ long long generic_smem_floats(int D, int G) { return 2LL * G + 2LL * D; }

// Cosine weights into out[0..n) (written by lane 0); row0 is scratch for the group mean.
template <class K>
__device__ void cosine_generic(const PoolArgs& a, const GroupSpan& s, const GenericGroup<K>& g, int lane,
                               float* row0, float* out) {
  const int D = g.D;
  const float* m = row0;
  if (a.query_ref) {
    m = a.query_ref + static_cast<long long>(s.req) * D;
  } else {
    const float inv = 1.0f / static_cast<float>(g.n);
    for (int d = lane; d < D; d += 32) {
      float acc = g.key(0, d);
      for (int r = 1; r < g.n; ++r) acc += g.key(r, d);
      row0[d] = acc * inv;
    }
  }
  float mm = 0.0f;
  for (int d = lane; d < D; d += 32) mm = fmaf(m[d], m[d], mm);
  const float mnorm = sqrtf(warp_sum(mm));
  for (int r = 0; r < g.n; ++r) {
    float kk = 0.0f, km = 0.0f;
    for (int d = lane; d < D; d += 32) {
      const float k = g.key(r, d);
      kk = fmaf(k, k, kk);
      km = fmaf(k, m[d], km);
    }
    const float wr = cosine_weight(warp_sum(kk), warp_sum(km), mnorm, a.eps, a.power);
    if (lane == 0) out[r] = wr;
  }
  __syncwarp();
}

template <class K>
__device__ void tfidf_generic(const PoolArgs& a, const GroupSpan& s, int lane, float* out) {
  const long long N = a.stats_steps[s.req];
  if (N == 0) {
    for (int r = lane; r < s.n; r += 32) out[r] = 1.0f;
  } else {
    float amax = 0.0f;  // max is order-free: the same value as the CPU's sequential fold
    for (int r = lane; r < s.n; r += 32) {
      const float m = __ldg(a.stats_mass + s.first + r);
      amax = m > amax ? m : amax;
    }
    amax = warp_max(amax);
    for (int r = lane; r < s.n; r += 32)
      out[r] = tfidf_weight(__ldg(a.stats_mass + s.first + r), amax, __ldg(a.stats_count + s.first + r), N, a.eps);
  }
  __syncwarp();
}

__device__ __forceinline__ void positional_generic(const PoolArgs& a, int n, int lane, float* out) {
  for (int r = lane; r < n; r += 32) out[r] = positional_weight(r, a.group_size, a.lambda, a.bias);
  __syncwarp();
}

// w <- w * (v / mean v)^alpha; the mean is summed sequentially by every lane (core/weights.h order).
__device__ __forceinline__ void hybrid_multiply_generic(const float* v, int n, float alpha, int lane, float* w) {
  float mean = 0.0f;
  for (int r = 0; r < n; ++r) mean += v[r];
  mean /= static_cast<float>(n);
  for (int r = lane; r < n; r += 32) w[r] *= hybrid_factor(v[r], mean, alpha);
  __syncwarp();  // v is rewritten next
}

template <class K>
__device__ void weights_generic(const PoolArgs& a, const GroupSpan& s, const GenericGroup<K>& g, int lane, float* w,
                                float* v, float* row0) {
  switch (a.scheme) {
    case Weighting::positional: positional_generic(a, s.n, lane, w); return;
    case Weighting::cosine: cosine_generic<K>(a, s, g, lane, row0, w); return;
    case Weighting::tfidf: tfidf_generic<K>(a, s, lane, w); return;
    case Weighting::hybrid:
      for (int r = lane; r < s.n; r += 32) w[r] = 1.0f;
      positional_generic(a, s.n, lane, v);
      hybrid_multiply_generic(v, s.n, a.alpha_positional, lane, w);
      cosine_generic<K>(a, s, g, lane, row0, v);
      hybrid_multiply_generic(v, s.n, a.alpha_cosine, lane, w);
      tfidf_generic<K>(a, s, lane, v);
      hybrid_multiply_generic(v, s.n, a.alpha_tfidf, lane, w);
      return;
    default:
      for (int r = lane; r < s.n; r += 32) w[r] = 1.0f;
      __syncwarp();
      return;
  }
}

template <class T>
__device__ __forceinline__ void store_row_generic_as(const PoolArgs& a, long long row, const float* x, int lane,
                                                     float inv) {
  T* dst = static_cast<T*>(a.payload) + row * a.dim;
  for (int d = lane; d < a.dim; d += 32) dst[d] = encode_out<T>(a.precision, x[d], inv);
}

// Writes row `row` from x (the lane's own dims are read) in the output precision.
__device__ __forceinline__ void store_row_generic(const PoolArgs& a, long long row, const float* x, int lane) {
  switch (a.precision) {
    case Precision::fp32: store_row_generic_as<float>(a, row, x, lane, 1.0f); return;
    case Precision::fp16:
    case Precision::bf16: store_row_generic_as<std::uint16_t>(a, row, x, lane, 1.0f); return;
    case Precision::int8:
    case Precision::fp8: {
      float amax = 0.0f;
      for (int d = lane; d < a.dim; d += 32) amax = abs_max(amax, x[d]);
      store_row_generic_as<std::uint8_t>(a, row, x, lane, finish_scale(a, row, amax, lane));
      return;
    }
  }
}

template <class K>
__global__ void pool_generic_kernel(const __grid_constant__ PoolArgs a, int warps_per_block) {
  IP_DYNAMIC_SHARED(float, smem);
  const int D = a.dim;
  const int G = a.group_size;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  const long long e = static_cast<long long>(blockIdx.x) * warps_per_block + warp;
  if (e >= a.batch.total_entries) return;  // whole warps
  const GroupSpan s = locate_group(a, e, G);
  if (s.n <= 0) return;
  float* w = smem + generic_smem_floats(D, G) * warp;
  float* v = w + G;
  float* row0 = v + G;
  float* row1 = row0 + D;
  const GenericGroup<K> g{static_cast<const typename K::raw*>(a.keys) + s.first * D, D, s.n};

  weights_generic<K>(a, s, g, lane, w, v, row0);  // ends with __syncwarp(): w is visible to all lanes
  if (a.weights)
    for (int r = lane; r < s.n; r += 32) a.weights[s.first + r] = w[r];
  if (a.prev_weights) {
    if (!update_gate(a, s, e, w, lane)) return;  // warp-uniform
    for (int r = lane; r < s.n; r += 32) a.prev_weights[s.first + r] = w[r];
  }

  if (a.scheme == Weighting::maxmin) {
    for (int d = lane; d < D; d += 32) {
      float hi = g.key(0, d), lo = hi;
      for (int r = 1; r < s.n; ++r) {
        const float k = g.key(r, d);
        hi = k > hi ? k : hi;
        lo = k < lo ? k : lo;
      }
      row0[d] = hi;
      row1[d] = lo;
    }
    store_row_generic(a, 2 * e, row0, lane);
    store_row_generic(a, 2 * e + 1, row1, lane);
    return;
  }

  float wsum = 0.0f;
  for (int r = 0; r < s.n; ++r) wsum += w[r];
  const float inv = 1.0f / wsum;
  const float w0 = w[0] * inv;
  for (int d = lane; d < D; d += 32) {
    float c = w0 * g.key(0, d);
    for (int r = 1; r < s.n; ++r) c = fmaf(w[r] * inv, g.key(r, d), c);
    row0[d] = c;
  }
  store_row_generic(a, e, row0, lane);
}

}  // namespace ip::cuda::detail
