// Decode attention for one query with Ha heads over shared keys and values (MQA, as in DSA):
// o_h = sum_t p_{h,t} v_t, p_{h,.} = softmax_t(q_h . k_t / sqrt(Da)) over the attended tokens.
#pragma once

#include <span>
#include <vector>

#include "core/tensor.h"

namespace ip {

struct AttentionOutput {
  Tensor<float> out;    // [Ha, Dv]
  Tensor<float> probs;  // [Ha, n attended tokens] when requested, else empty
};

// Attention over the listed tokens (ascending ids), or over all T tokens when `tokens` is empty.
AttentionOutput attention(MatrixView<const float> keys, MatrixView<const float> values, MatrixView<const float> queries,
                          std::span<const Index64> tokens, bool want_probs);

// The checks every backend's attention makes before any work (ip::Error naming the first that fails):
// a context of T >= 1 keys with as many values, queries of the keys' dimension, at least one head, and
// every listed token in [0, T).
void validate_attention_inputs(MatrixView<const float> keys, MatrixView<const float> values,
                               MatrixView<const float> queries, std::span<const Index64> tokens);

// The tokens of the given groups, ascending (groups may come in any order; the last may be partial).
std::vector<Index64> tokens_of_groups(std::span<const std::int32_t> groups, int group_size, Index64 tokens);

}  // namespace ip
