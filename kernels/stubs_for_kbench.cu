// TEMPORARY (branch h/kbench only): stub definitions of the issue-5 launchers and of the CUDA backend
// factory, so that bench/kernel_bench and the runner's `backend = cuda` path link in this worktree before
// the real kernels land. Every stub throws ip::Error("... not yet implemented").
//
// make_cuda_backend() is in stubs_for_kbench_backend.cc (core/backend.h needs C++20, a host compiler).
// MERGER: delete both files and their target_sources line in kernels/CMakeLists.txt when the branches that
// define pool(), update_stats(), score(), topk(), attention() and make_cuda_backend() are merged
// (a duplicate-symbol link error says so if it is forgotten).
#include "core/error.h"
#include "kernels/attention.h"
#include "kernels/pool.h"
#include "kernels/score.h"
#include "kernels/stats.h"
#include "kernels/topk.h"

namespace ip::cuda {
namespace {
[[noreturn]] void not_yet(const char* what) {
  throw Error(std::string("ip::cuda::") + what + ": not yet implemented (stub from kernels/stubs_for_kbench.cu)");
}
}  // namespace

void pool(const PoolArgs&, cudaStream_t) { not_yet("pool"); }
void update_stats(const StatsArgs&, cudaStream_t) { not_yet("update_stats"); }
void score(const ScoreArgs&, cudaStream_t) { not_yet("score"); }
std::size_t topk_workspace_bytes(int, long long, int) { not_yet("topk_workspace_bytes"); }
void topk(const TopkArgs&, cudaStream_t) { not_yet("topk"); }
std::size_t attention_workspace_bytes(const AttentionArgs&, long long) { not_yet("attention_workspace_bytes"); }
void attention(const AttentionArgs&, cudaStream_t) { not_yet("attention"); }

}  // namespace ip::cuda
