// Selection and fidelity metrics (DESIGN.md, "metrics").
#pragma once

#include <cstdint>
#include <span>

#include "core/tensor.h"

namespace ip {

// |tokens of the selected groups  ∩  exact top-k tokens| / k.
double token_recall(std::span<const std::int32_t> selected_groups, int group_size,
                    std::span<const std::int32_t> exact_topk_tokens);

// |selected ∩ oracle| / k_g (both lists of k_g distinct group ids).
double block_recall(std::span<const std::int32_t> selected_groups, std::span<const std::int32_t> oracle_groups);

// Dense softmax mass on the selected tokens, averaged over heads. probs: [Ha, T] dense probabilities.
double attention_mass_recall(MatrixView<const float> dense_probs, std::span<const Index64> selected_tokens);

// ||o_sparse - o_dense|| / ||o_dense|| (Frobenius over all heads).
double output_error(MatrixView<const float> sparse_out, MatrixView<const float> dense_out);

// Block-oracle scores: max_{t in g} s(t) for every group.
void group_max_scores(const float* token_scores, Index64 tokens, int group_size, float* out);

}  // namespace ip
