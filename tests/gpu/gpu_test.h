// Helpers of the GPU test suites (label `gpu`): skip with a clear message when no device is usable,
// move data to and from the device, poison outputs so every element must be written.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/device.h"
#include "kernels/device_buffer.h"

// Skips the test (reported as SKIPPED by GoogleTest and CTest) when no CUDA device can be used.
#define IP_REQUIRE_GPU()                                                                        \
  do {                                                                                          \
    if (::ip::cuda::device_count() == 0)                                                        \
      GTEST_SKIP() << "no usable CUDA device (" << ::ip::cuda::describe_devices()               \
                   << "); run scripts/gpu-check.sh on a machine with a GPU";                    \
  } while (0)

namespace ip::test {

template <class T>
cuda::DeviceBuffer<T> to_device(const std::vector<T>& h) {
  cuda::DeviceBuffer<T> d(h.size());
  d.upload(h);
  IP_CUDA_CHECK(cudaDeviceSynchronize());
  return d;
}

// A device buffer of n elements with every byte 0xFF (NaN for floats, -1 for signed ids).
template <class T>
cuda::DeviceBuffer<T> poisoned(std::size_t n) {
  cuda::DeviceBuffer<T> d(n);
  d.fill_bytes(0xFF);
  IP_CUDA_CHECK(cudaDeviceSynchronize());
  return d;
}

// True when the value still carries the 0xFF poison pattern (was never written).
template <class T>
bool is_poison(const T& v) {
  T p;
  std::memset(&p, 0xFF, sizeof(T));
  return std::memcmp(&p, &v, sizeof(T)) == 0;
}

}  // namespace ip::test
