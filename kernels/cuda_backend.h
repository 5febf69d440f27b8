// The CUDA implementation of ip::Backend (core/backend.h). Host-only header.
#pragma once

#include <memory>

#include "core/backend.h"

namespace ip::cuda {

// The CUDA backend on `device`; throws ip::Error when no usable device exists.
std::unique_ptr<Backend> make_cuda_backend(int device = 0);

}  // namespace ip::cuda
