// The hybrid layer (issue 7): a local branch (gated linear attention over a window of recent tokens)
// plus the global sparse branch (IndexPool selection, block-sparse softmax attention), combined by a
// rule.
//
// Local branch over the window [begin, end) of the context: normalised gated linear attention,
//   keys phi(k_t / Da^{1/4}), values [v_t, 1], gates alpha_t of the workload (linear_attention.h),
//   o_h = (S^T phi(q_h / Da^{1/4}))[0..Dv) / (S^T phi(q_h / Da^{1/4}))[Dv],
// a convex combination of the window's values (phi > 0), so it lives on the scale of softmax outputs.
// The window is the last `window` tokens at the first decode step (state from the chunked form); with
// a growing context every appended token enters by the recurrence (the decode update), so the window
// grows by the appended tokens and the gates do the forgetting.
//
// Combination rules (hybrid.combine):
//   sum      o = o_sparse + o_local         (what a trained layer sums after its own output projections;
//                                            untrained here, so it shows the cost of not learning them)
//   gate:g   o = (1 - g) o_sparse + g o_local, 0 <= g <= 1   (gate:0 is the sparse branch alone)
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "core/workload.h"

namespace ip {

struct CombineRule {
  enum class Kind { sum, gate };
  Kind kind = Kind::gate;
  float g = 0.5f;
};
CombineRule parse_combine(std::string_view s);  // "sum" or "gate:G"; throws ip::Error naming the grammar
std::string to_string(const CombineRule& r);
void combine_outputs(const CombineRule& r, const float* sparse, const float* local, Index64 n, float* out);

struct HybridParams {
  bool enabled = false;
  Index64 window = 512;  // W, tokens of the local branch at the first step
  int chunk = 64;        // C of the chunked form
  CombineRule combine;
};
void validate_hybrid(const HybridParams& h);

struct LocalBranch {
  Index64 begin = 0, end = 0;  // tokens in the state
  Index64 dk = 0, dv = 0;      // state shape: Da x (Dv + 1)
  std::vector<float> state;
};

// CPU implementations (the Backend's defaults call them).
void local_prefill(const Workload& w, Index64 begin, Index64 end, int chunk, LocalBranch& lb);
void local_append(const Workload& w, Index64 new_end, LocalBranch& lb);
void local_readout(const LocalBranch& lb, MatrixView<const float> queries, float* out);  // [Ha, Da] -> [Ha, Dv]

}  // namespace ip
