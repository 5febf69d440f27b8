// Launcher of decode attention (core/attention.h): per request, Ha query heads over shared keys and
// values (MQA), o_h = softmax(q_h . k / sqrt(D)) v, over the selected blocks (block-sparse, online
// softmax) or over every token of the request (dense, for the fidelity metrics).
//
// Flash-decoding: the attended tokens of each request are cut into splits of equal length (the
// last shorter), one thread block per (split, group of heads) keeps a running (max m, sum l, output o)
// per head, a combine kernel merges the splits in split order (same inputs, same bits), and, when
// probabilities are asked for, a last kernel turns the logits the split kernel stored into
// probabilities with the final max and sum. Splits of a batch are numbered back to back (CSR), so
// requests of different lengths cost their own length, never the longest one's.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/batch.h"

namespace ip::cuda {

// Which split kernel computes the attention (the combine and probability kernels are the same).
enum class AttnKernel {
  automatic,  // tiles (until a device run says which is faster; DEVICE_RUNS.md item 24)
  // Shared-memory tiles: a block of 128 threads stages 32 tokens' K and V rows in shared memory for up
  // to 8 heads; logits and outputs on CUDA cores with every operand read from shared memory. Any dims.
  tiles,
  // A lane per token: a block of 128 threads serves 16 heads; each warp holds a quarter of its 32 tokens'
  // keys in registers (a lane's row slice), each thread a value dim of every token; shared memory only
  // carries the queries and the tile's probabilities, read as broadcasts. Every K/V row is read once for
  // 16 heads (tiles: once per 8). D and Dv in {64, 128, 256}, keys and values 16-byte aligned; anything
  // else is refused when asked for.
  lanes,
};
// What `automatic` is today (the launcher dispatches on this; the cuda backend records it per point).
constexpr AttnKernel resolve_attn_kernel(AttnKernel k) { return k == AttnKernel::automatic ? AttnKernel::tiles : k; }

struct AttentionArgs {
  Batch batch;                     // tokens of each request; entries unused
  const float* keys = nullptr;     // [total_tokens, dim]
  const float* values = nullptr;   // [total_tokens, vdim]
  int dim = 0, vdim = 0;
  const float* queries = nullptr;  // [requests, heads, dim]
  int heads = 1;
  // Selection: request b reads blocks[block_offset[b] .. block_offset[b+1]) (ids relative to the
  // request; block j = tokens [j*block_size, min(T_b, (j+1)*block_size))). Null blocks: dense.
  // Blocks may come in any order and repeat, except the partial last block, which may appear once.
  const std::int32_t* blocks = nullptr;
  const long long* block_offset = nullptr;  // device [requests + 1]
  int block_size = 1;
  // Host-known upper bound of the tokens any one request attends (dense: the longest request). It
  // sizes the workspace; a request attending more is flagged (attention_check).
  long long max_attended = 0;
  float* out = nullptr;    // [requests, heads, vdim]; a request attending no token gets zeros
  // Optional probabilities, request b at probs + heads * prob_offset[b]: [heads, L_b] with
  // L_b = prob_offset[b+1] - prob_offset[b] >= its attended count n_b; row h holds the n_b attended
  // tokens in the order the blocks are listed, tokens ascending within a block, then L_b - n_b zeros.
  float* probs = nullptr;
  const long long* prob_offset = nullptr;  // device [requests + 1]
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  AttnKernel kernel = AttnKernel::automatic;
};

// Workspace of attention(a) with a.max_attended = max_attended (the argument wins over the field).
std::size_t attention_workspace_bytes(const AttentionArgs& a, long long max_attended);
// Validates the arguments (throws ip::Error naming the bad one) and launches on `stream`.
void attention(const AttentionArgs& a, cudaStream_t stream);
// Waits for `stream`, then throws ip::Error if the last attention() with this workspace met invalid
// device-side input: a block id outside its request, the partial last block listed twice, a request
// attending more than max_attended tokens, a probability row shorter than the attended count.
void attention_check(const AttentionArgs& a, cudaStream_t stream);

}  // namespace ip::cuda
