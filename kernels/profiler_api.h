// The CUDA profiler API (cudaProfilerStart/Stop): marks the region that `nsys profile
// --capture-range=cudaProfilerApi` and `ncu --profile-from-start off` capture. Host-only header.
#pragma once

namespace ip::cuda {

// Both return false (doing nothing) when no CUDA device is usable.
bool profiler_start();
bool profiler_stop();

}  // namespace ip::cuda
