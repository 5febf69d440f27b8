#include <thread>

#include "core/backend.h"
#include "core/parallel.h"
#include "core/topk.h"

namespace ip {
namespace {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads) {
    set_num_threads(threads);
  }
  std::string name() const override { return "cpu"; }
  std::string device() const override {
    return fmt::format("CPU, {} threads of {} hardware threads", num_threads(), std::thread::hardware_concurrency());
  }
  void build_index(MatrixView<const float> keys, const PoolParams& p, const AccessStats* stats, const float* query_ref,
                   PooledIndex& out) override {
    ip::build_index(keys, p, stats, query_ref, out);
  }
  void score_index(const PooledIndex& index, const IndexQuery& q, float* out) override { ip::score_index(index, q, out); }
  void score_tokens(MatrixView<const float> keys, const IndexQuery& q, float* out) override {
    ip::score_tokens(keys, q, out);
  }
  std::vector<std::int32_t> topk(const float* scores, Index64 n, Index64 k) override { return ip::topk(scores, n, k); }
  AttentionOutput attention(MatrixView<const float> keys, MatrixView<const float> values, MatrixView<const float> queries,
                            std::span<const Index64> tokens, bool want_probs) override {
    return ip::attention(keys, values, queries, tokens, want_probs);
  }
  void update_stats(AccessStats& stats, std::span<const float> step_mass,
                    std::span<const std::pair<Index64, Index64>> selected_ranges) override {
    stats.update(step_mass, selected_ranges);
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int threads) { return std::make_unique<CpuBackend>(threads); }

}  // namespace ip
