// TEMPORARY (branch h/kbench only): stub of the CUDA backend factory; see stubs_for_kbench.cu.
// MERGER: delete with stubs_for_kbench.cu when the branch defining make_cuda_backend() is merged.
#include "core/error.h"
#include "kernels/cuda_backend.h"

namespace ip::cuda {

std::unique_ptr<Backend> make_cuda_backend(int) {
  throw Error("ip::cuda::make_cuda_backend: not yet implemented (stub from kernels/stubs_for_kbench_backend.cc)");
}

}  // namespace ip::cuda
