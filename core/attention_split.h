// Split-K decode attention (flash-decoding) math shared by the CUDA kernels (kernels/attention.cuh)
// and the CPU tests: where attended position i of a block-sparse request lives, how many tokens a
// request attends, how the attended tokens are cut into splits, and the online-softmax rescaling.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/hd.h"

namespace ip {

// A request of T tokens cut into blocks of bs: block j = tokens [j*bs, min(T, (j+1)*bs)). The last
// block holds last_block_len(T, bs) tokens (bs when T is a multiple of bs; 0 when T = 0).
IP_HOST_DEVICE long long num_blocks(long long T, int bs) { return (T + bs - 1) / bs; }
IP_HOST_DEVICE long long last_block_len(long long T, int bs) { return T - (num_blocks(T, bs) - 1) * bs; }

// Tokens attended when `entries` blocks are listed and the partial last block (last_len < bs) is one
// of them (partial_listed); full blocks count bs each.
IP_HOST_DEVICE long long sparse_attended(long long entries, int bs, bool partial_listed, long long last_len) {
  return entries * bs - (partial_listed ? bs - last_len : 0);
}

// Token (relative to the request) at attended position i, 0 <= i < sparse_attended(...). Positions
// follow the list order, tokens ascending within a block. partial_pos is the list index of the partial
// last block, or -1 when it is not listed (or the request has none); every other listed block is full.
IP_HOST_DEVICE long long sparse_token(const std::int32_t* blocks, int bs, long long i, long long partial_pos,
                                      long long last_len) {
  if (partial_pos < 0 || i < partial_pos * bs) return static_cast<long long>(blocks[i / bs]) * bs + i % bs;
  const long long start = partial_pos * bs;
  if (i < start + last_len) return static_cast<long long>(blocks[partial_pos]) * bs + (i - start);
  const long long j = i + (bs - last_len);  // as if the partial block were full
  return static_cast<long long>(blocks[j / bs]) * bs + j % bs;
}

// exp(m_old - m_new), the factor that rescales a running sum when the running max moves from m_old to
// m_new >= m_old; 0 when nothing was accumulated yet (m_old = -inf), 1 when nothing is (m_new = -inf).
IP_HOST_DEVICE float softmax_rescale(float m_old, float m_new) {
  if (m_new == -INFINITY) return 1.0f;
  if (m_old == -INFINITY) return 0.0f;
  return expf(m_old - m_new);
}

// How the attended tokens of a batch are cut into splits: every split holds split_tokens consecutive
// attended positions of one request (its last split fewer), and the batch has at most max_splits.
struct SplitPlan {
  long long split_tokens = 0;
  long long max_splits = 0;
};

// Splits of about work / target_splits tokens (at least min_split, a multiple of tile), where work
// bounds the tokens attended by the batch: dense_total (the batch's tokens) for dense attention
// (dense_total >= 0), requests * max_attended for block-sparse attention (dense_total < 0).
// Depends on sizes only, never on the device, so results are the same bits on every GPU.
inline SplitPlan plan_splits(long long requests, long long max_attended, long long dense_total,
                             long long target_splits, long long min_split, long long tile) {
  SplitPlan p;
  const long long work = dense_total >= 0 ? dense_total : requests * max_attended;
  long long c = (work + target_splits - 1) / target_splits;
  if (c < min_split) c = min_split;
  c = (c + tile - 1) / tile * tile;
  p.split_tokens = c;
  // Each request attends at most max_attended tokens: at most ceil(max_attended / c) splits each, and
  // the dense case also has sum_b ceil(T_b / c) <= total / c + requests.
  p.max_splits = requests * ((max_attended + c - 1) / c);
  if (dense_total >= 0 && dense_total / c + requests < p.max_splits) p.max_splits = dense_total / c + requests;
  return p;
}

}  // namespace ip
