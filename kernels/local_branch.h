// The hybrid layer's local branch on the device (issue 7): the CUDA backend's local_prefill,
// local_append and local_readout (core/backend.h) through the launchers of kernels/linear_attention.h,
// with the results of the CPU defaults (core/hybrid.cc) up to float rounding.
//
// LocalBranch keeps its host-visible contract (core/hybrid.h): the state lives in lb.state on the host.
// prefill and append copy it back before they return; append and readout upload it again (Da x (Dv + 1)
// floats, 66 KB at Da = Dv = 128) instead of trusting a device copy the caller may have replaced. Keys
// and values of the tokens concerned are uploaded per call (the window at prefill, a few tokens per
// append). Every call synchronizes its stream before it returns.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "core/hybrid.h"
#include "core/workload.h"
#include "kernels/device_buffer.h"

namespace ip::cuda {

class DeviceLocalBranch {
 public:
  // chunked: the prefill runs its chunks in parallel (GlaArgs::workspace; the same bits), else in order.
  explicit DeviceLocalBranch(bool chunked = false) : chunked_(chunked) {}
  void prefill(const Workload& w, Index64 begin, Index64 end, int chunk, LocalBranch& lb, cudaStream_t s);
  void append(const Workload& w, Index64 new_end, LocalBranch& lb, cudaStream_t s);
  void readout(const LocalBranch& lb, MatrixView<const float> queries, float* out, cudaStream_t s);

 private:
  void stage_inputs(const Workload& w, Index64 b, Index64 e, cudaStream_t s);
  bool chunked_ = false;
  DeviceBuffer<float> raw_k_, raw_v_, k_, v_, g_, state_, q_, out_;
  DeviceBuffer<std::uint8_t> ws_;  // the chunk-parallel prefill's workspace
};

}  // namespace ip::cuda
