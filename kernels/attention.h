// Launcher of decode attention (core/attention.h): per request, Ha query heads over shared keys and
// values (MQA), o_h = softmax(q_h . k / sqrt(D)) v, over the selected blocks (block-sparse, online
// softmax) or over every token of the request (dense, for the fidelity metrics).
#pragma once

#include <cstdint>

#include "kernels/batch.h"

namespace ip::cuda {

struct AttentionArgs {
  Batch batch;                     // tokens of each request; entries unused
  const float* keys = nullptr;     // [total_tokens, dim]
  const float* values = nullptr;   // [total_tokens, vdim]
  int dim = 0, vdim = 0;
  const float* queries = nullptr;  // [requests, heads, dim]
  int heads = 1;
  // Selection: request b reads blocks[block_offset[b] .. block_offset[b+1]) (ids relative to the
  // request; block j = tokens [j*block_size, min(T_b, (j+1)*block_size))). Null blocks: dense.
  const std::int32_t* blocks = nullptr;
  const long long* block_offset = nullptr;  // device [requests + 1]
  int block_size = 1;
  float* out = nullptr;    // [requests, heads, vdim]
  // Optional probabilities, request b at probs + heads * prob_offset[b]: [heads, attended tokens] in
  // the order the blocks are listed, tokens ascending within a block.
  float* probs = nullptr;
  const long long* prob_offset = nullptr;  // device [requests + 1]
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
};

std::size_t attention_workspace_bytes(const AttentionArgs& a, long long max_attended);
void attention(const AttentionArgs& a, cudaStream_t stream);

}  // namespace ip::cuda
