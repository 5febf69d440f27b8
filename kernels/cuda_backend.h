// The CUDA implementation of ip::Backend (core/backend.h). Host-only header.
#pragma once

#include <memory>

#include "core/backend.h"
#include "core/kernel_forms.h"

namespace ip::cuda {

// The CUDA backend on `device`, its kernels in `forms` (core/kernel_forms.h; a form a call cannot use is
// an ip::Error from that call); throws ip::Error when no usable device exists.
std::unique_ptr<Backend> make_cuda_backend(int device = 0, const KernelForms& forms = {});

}  // namespace ip::cuda
