// Which form of a stage's GPU kernel the cuda backend uses (config section [kernels]). Every form gives
// the same selections up to the rounding its math documents; they differ in speed, so a sweep over them
// times each form end to end under the runner's clocks (kernel_bench times them one kernel at a time).
// The cpu backend has one form of each stage and ignores these. `automatic` is the launcher's own choice
// (kernels/*.h say what it is today).
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace ip {

// Scoring (kernels/score.h ScoreMath). fp32: CUDA cores, fp32 math. split: tensor cores with the query split
// into hi + lo parts, f16 for rows exact in f16 (fp16, int8, fp8: f16x2, each head's query scaled by a power
// of two first; per head |error| <= 2^-22 sum |q x| + 2^-39 max |q| sum |x|), bf16 for bf16 rows (bf16x2) and
// for fp32 rows, split too (bf16x3): 2^-16 sum |q x|. bf16: tensor cores, one bf16 product (2^-7 sum |q x|).
// The tensor-core forms need dim 64, 128 or 256 and a scheme other than maxmin.
enum class ScoreForm { automatic, fp32, split, bf16 };
// Top-k (kernels/topk.h TopkLaunch): chain of kernels, single launch, a thread block cluster a row (sm_90
// and later), one block a row.
enum class TopkForm { automatic, chain, single, cluster, block };
// Decode and dense attention (kernels/attention.h AttnKernel): shared-memory tiles, or a lane per token
// (attention and value dims 64, 128 or 256).
enum class AttentionForm { automatic, tiles, lanes };
// The hybrid layer's chunked gated linear attention (kernels/linear_attention.h): chunks one after
// another, or chunks in parallel (a workspace of chunks x (Da (Dv + 1) + Da) floats; the same bits).
enum class LinearForm { automatic, sequential, chunked };

struct KernelForms {
  ScoreForm score = ScoreForm::automatic;
  TopkForm topk = TopkForm::automatic;
  AttentionForm attention = AttentionForm::automatic;
  LinearForm linear = LinearForm::automatic;
  bool all_automatic() const {
    return score == ScoreForm::automatic && topk == TopkForm::automatic && attention == AttentionForm::automatic &&
           linear == LinearForm::automatic;
  }
};

// The config values, in enum order ("auto" for automatic).
inline constexpr std::array<std::string_view, 4> kScoreFormNames = {"auto", "fp32", "split", "bf16"};
inline constexpr std::array<std::string_view, 5> kTopkFormNames = {"auto", "chain", "single", "cluster", "block"};
inline constexpr std::array<std::string_view, 3> kAttentionFormNames = {"auto", "tiles", "lanes"};
inline constexpr std::array<std::string_view, 3> kLinearFormNames = {"auto", "sequential", "chunked"};

inline std::string_view to_string(ScoreForm f) { return kScoreFormNames[static_cast<std::size_t>(f)]; }
inline std::string_view to_string(TopkForm f) { return kTopkFormNames[static_cast<std::size_t>(f)]; }
inline std::string_view to_string(AttentionForm f) { return kAttentionFormNames[static_cast<std::size_t>(f)]; }
inline std::string_view to_string(LinearForm f) { return kLinearFormNames[static_cast<std::size_t>(f)]; }

// The position of `v` among `names`; -1 when it is none of them.
template <std::size_t N>
int form_index(std::string_view v, const std::array<std::string_view, N>& names) {
  for (std::size_t i = 0; i < N; ++i)
    if (v == names[i]) return static_cast<int>(i);
  return -1;
}

// Why `f` cannot run a point of these shapes on a device of compute capability `cc_major` (0: not
// known, not checked), or "" when it can. The launchers refuse the same (kernels/score.cu, attention.cu,
// topk.cu); asking first lets the runner skip such a point with this reason before any work.
inline std::string unsupported_forms(const KernelForms& f, int dim, bool maxmin, int attn_dim, int value_dim,
                                     int cc_major) {
  auto mma_dim = [](int d) { return d == 64 || d == 128 || d == 256; };
  const bool tensor = f.score == ScoreForm::split || f.score == ScoreForm::bf16;
  const std::string score = "kernels.score_math = " + std::string(to_string(f.score));
  if (tensor && !mma_dim(dim))
    return score + " (tensor cores) needs workload.dim 64, 128 or 256, not " + std::to_string(dim);
  if (tensor && maxmin) return score + " (tensor cores) does not score maxmin pairs (use fp32 or auto)";
  if (f.attention == AttentionForm::lanes && attn_dim > 0 && !(mma_dim(attn_dim) && mma_dim(value_dim)))
    return "kernels.attention = lanes needs workload.attn_dim and workload.value_dim 64, 128 or 256, not " +
           std::to_string(attn_dim) + " and " + std::to_string(value_dim);
  if (f.topk == TopkForm::cluster && cc_major > 0 && cc_major < 9)
    return "kernels.topk = cluster needs thread block clusters (sm_90 or later; this device is sm_" +
           std::to_string(cc_major) + "x)";
  return "";
}

}  // namespace ip
