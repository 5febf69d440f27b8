// TEMPORARY (branch h/kattn): stand-ins for the launchers that other engineers implement in parallel
// (pool.cu, stats.cu, score.cu, topk.cu), so the CUDA backend and its tests link in this worktree.
// Each one throws. THE MERGER DELETES THIS FILE and its line in kernels/CMakeLists.txt once the real
// launchers are in.
#include "core/error.h"
#include "kernels/pool.h"
#include "kernels/score.h"
#include "kernels/stats.h"
#include "kernels/topk.h"

namespace ip::cuda {

void pool(const PoolArgs&, cudaStream_t) { throw Error("pool: not yet implemented (stub of branch h/kattn)"); }
void update_stats(const StatsArgs&, cudaStream_t) {
  throw Error("update_stats: not yet implemented (stub of branch h/kattn)");
}
void score(const ScoreArgs&, cudaStream_t) { throw Error("score: not yet implemented (stub of branch h/kattn)"); }
std::size_t topk_workspace_bytes(int, long long, int) {
  throw Error("topk_workspace_bytes: not yet implemented (stub of branch h/kattn)");
}
void topk(const TopkArgs&, cudaStream_t) { throw Error("topk: not yet implemented (stub of branch h/kattn)"); }

}  // namespace ip::cuda
