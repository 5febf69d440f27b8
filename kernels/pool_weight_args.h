// The weighting fields of the pooling launcher's arguments (kernels/pool.h) from the CPU's
// WeightParams, shared by every host caller of pool(): the cuda backend's build_index, the batched
// decoder and the incremental updater. Host-only (C++20, like core/).
#pragma once

#include <cuda_runtime.h>

#include "core/weights.h"
#include "kernels/device_buffer.h"
#include "kernels/pool.h"

namespace ip::cuda {

// Sets scheme, lambda, eps, power and the hybrid alphas, and uploads a positional bias (if any) into
// `bias` on `stream`. The query reference, the statistics and the storage fields stay the caller's.
inline void set_weight_args(const WeightParams& wp, DeviceBuffer<float>& bias, cudaStream_t stream, PoolArgs& a) {
  a.scheme = wp.scheme;
  a.lambda = wp.positional_lambda;
  if (!wp.positional_bias.empty()) {
    bias.upload(wp.positional_bias, stream);
    a.bias = bias.data();
  }
  a.eps = wp.eps;
  a.power = wp.cosine_power;
  a.alpha_positional = wp.alpha_positional;
  a.alpha_cosine = wp.alpha_cosine;
  a.alpha_tfidf = wp.alpha_tfidf;
}

}  // namespace ip::cuda
