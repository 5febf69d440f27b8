// The config's kernel forms (core/kernel_forms.h) as the launchers' arguments, and a record of the forms
// the calls of one backend resolved to (what a point's results say it ran). Host-only header.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/kernel_forms.h"
#include "kernels/attention.h"
#include "kernels/score.h"
#include "kernels/topk.h"

namespace ip::cuda {

// split resolves by the rows: f16x2 (fp16, int8, fp8), bf16x2 (bf16), bf16x3 (fp32) (kernels/score.h).
inline ScoreMath score_math(ScoreForm f) {
  switch (f) {
    case ScoreForm::fp32: return ScoreMath::fp32;
    case ScoreForm::split: return ScoreMath::split;
    case ScoreForm::bf16: return ScoreMath::bf16;
    default: return ScoreMath::automatic;
  }
}
inline TopkLaunch topk_launch(TopkForm f) {
  switch (f) {
    case TopkForm::chain: return TopkLaunch::chain;
    case TopkForm::single: return TopkLaunch::single;
    case TopkForm::cluster: return TopkLaunch::cluster;
    case TopkForm::block: return TopkLaunch::block;
    default: return TopkLaunch::automatic;
  }
}
inline AttnKernel attn_kernel(AttentionForm f) {
  switch (f) {
    case AttentionForm::tiles: return AttnKernel::tiles;
    case AttentionForm::lanes: return AttnKernel::lanes;
    default: return AttnKernel::automatic;
  }
}
// Whether the hybrid layer's prefill runs its chunks in parallel (automatic: one after another).
inline bool linear_chunked(LinearForm f) { return f == LinearForm::chunked; }

inline std::string_view to_string(ScoreMath m) {
  switch (m) {
    case ScoreMath::fp32: return "fp32";
    case ScoreMath::bf16x2: return "bf16x2";
    case ScoreMath::bf16x3: return "bf16x3";
    case ScoreMath::bf16: return "bf16";
    case ScoreMath::f16x2: return "f16x2";
    case ScoreMath::f16: return "f16";
    case ScoreMath::split: return "split";
    default: return "automatic";
  }
}
inline std::string_view to_string(TopkLaunch l) {
  switch (resolve_topk_launch(l)) {
    case TopkLaunch::single: return "single";
    case TopkLaunch::cluster: return "cluster";
    case TopkLaunch::block: return "block";
    default: return "chain";
  }
}
inline std::string_view to_string(AttnKernel k) { return resolve_attn_kernel(k) == AttnKernel::lanes ? "lanes" : "tiles"; }

// The distinct (stage, form) pairs a backend's calls used ("score bf16x2", "top-k chain", ...). note() runs
// inside the stages' timed calls, so it only compares and stores views of string literals (no allocation
// once a pair is known); describe() builds the text.
class FormsUsed {
 public:
  void note(std::string_view stage, std::string_view form) {  // both must outlive this object (literals)
    for (const auto& u : used_)
      if (u.first == stage && u.second == form) return;
    used_.emplace_back(stage, form);
  }
  // "attention tiles, score bf16x2, top-k chain", sorted ("" when nothing ran).
  std::string describe() const {
    std::vector<std::string> v;
    for (const auto& [stage, form] : used_) v.push_back(std::string(stage) + " " + std::string(form));
    std::sort(v.begin(), v.end());
    std::string s;
    for (const auto& u : v) s += (s.empty() ? "" : ", ") + u;
    return s;
  }

 private:
  std::vector<std::pair<std::string_view, std::string_view>> used_;
};

}  // namespace ip::cuda
