#include "kernels/device.h"

#include <cuda_runtime.h>

#include <fmt/format.h>

namespace ip::cuda {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

std::string describe_devices() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    cudaGetLastError();
    if (err == cudaErrorInsufficientDriver) {  // the runtime's words for "no driver" too: say which it is
      int driver = 0, runtime = 0;
      if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
      if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) runtime = 0;
      if (driver == 0) return "no CUDA device (no NVIDIA driver is installed)";
      return fmt::format("no CUDA device (the NVIDIA driver supports CUDA {}.{}, older than this build's runtime, "
                         "CUDA {}.{}: update the driver)",
                         driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
    }
    return fmt::format("no CUDA device ({})", cudaGetErrorString(err));
  }
  std::string out;
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    out += fmt::format("{}{}: {}, sm_{}{}, {:.1f} GiB", out.empty() ? "" : "\n", i, p.name, p.major, p.minor,
                       static_cast<double>(p.totalGlobalMem) / (1ull << 30));
  }
  return out.empty() ? "no CUDA device" : out;
}

}  // namespace ip::cuda
