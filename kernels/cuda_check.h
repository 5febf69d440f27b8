// The one checking macro for CUDA runtime calls: names the file, line, call and error, and throws.
#pragma once

#include <cuda_runtime.h>

#include <fmt/format.h>

#include "core/error.h"

#define IP_CUDA_CHECK(call)                                                                                   \
  do {                                                                                                        \
    const cudaError_t ip_err_ = (call);                                                                       \
    if (ip_err_ != cudaSuccess)                                                                               \
      throw ::ip::Error(::fmt::format("{}:{}: {} failed: {} ({})", __FILE__, __LINE__, #call,                  \
                                      cudaGetErrorName(ip_err_), cudaGetErrorString(ip_err_)));               \
  } while (0)

// For destructors: reports and carries on.
#define IP_CUDA_CHECK_NOTHROW(call)                                                                           \
  do {                                                                                                        \
    const cudaError_t ip_err_ = (call);                                                                       \
    if (ip_err_ != cudaSuccess)                                                                               \
      ::fmt::print(stderr, "{}:{}: {} failed: {}\n", __FILE__, __LINE__, #call, cudaGetErrorString(ip_err_)); \
  } while (0)
