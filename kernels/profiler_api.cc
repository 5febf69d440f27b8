#include "kernels/profiler_api.h"

#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include "kernels/cuda_check.h"
#include "kernels/device.h"

namespace ip::cuda {

bool profiler_start() {
  if (device_count() == 0) return false;
  IP_CUDA_CHECK(cudaProfilerStart());
  return true;
}

bool profiler_stop() {
  if (device_count() == 0) return false;
  IP_CUDA_CHECK(cudaDeviceSynchronize());  // the captured work ends inside the capture
  IP_CUDA_CHECK(cudaProfilerStop());
  return true;
}

}  // namespace ip::cuda
