// Launcher of multi-head index scoring: s(e) = sum_j h_j max(0, q_j . row_e) (core/score.h), over the
// stored composites (compressed indexer) or over the keys themselves (exact indexer: the rows are the
// tokens, in fp32/fp16/bf16).
#pragma once

#include "core/quant.h"
#include "kernels/batch.h"

namespace ip::cuda {

// How the dot products are computed (kernels/score.cuh).
//   fp32:   CUDA cores, fp32 multiply-add of the dequantized row and the fp32 query: the CPU's math up
//           to summation order (~1e-6 relative of sum_d |q_d x_d|).
//   bf16x2: tensor cores (mma bf16, fp32 accumulate). Rows must be exact in bf16 (bf16, int8, fp8);
//           the query is split into two bf16 parts (hi + lo), which carry ~16 of its 24 bits: per head
//           |error| <= 2^-16 * sum_d |q_d x_d| + fp32 summation error.
//   bf16x3: tensor cores for rows not exact in bf16 (fp32, fp16): rows and query both split into hi + lo
//           bf16 parts, three mma per step (hi*hi + hi*lo + lo*hi; lo*lo and the parts' own rounding,
//           each below 2^-17 of the product, are dropped): per head |error| <= 2^-16 * sum_d |q_d x_d| +
//           fp32 summation error, as bf16x2. fp16 rows split exactly. On rows exact in bf16 it is bf16x2
//           (the rows' lo parts are zero), and resolves to it.
//   bf16:   tensor cores with the query (and fp16/fp32 rows) rounded to bf16, one mma per step:
//           |error| <= 2^-7 * sum_d |q_d x_d| per head (2^-8 when the rows are exact in bf16). Fastest.
//   f16x2:  tensor cores (mma f16, fp32 accumulate) for rows exact in f16 (fp16, int8, fp8), taken as
//           they are stored (fp8: one conversion a pair); each head's query is multiplied by a power of
//           two that puts its largest magnitude in [2^14, 2^15) (core/score_math.h f16_query_factor),
//           split into two f16 parts (hi + lo), and the dot product multiplied back exactly: per head
//           |error| <= 2^-22 * sum_d |q_d x_d| + 2^-39 * max_d |q_d| * sum_d |x_d| + fp32 summation error.
//           Two mma per step, like bf16x2, but 2^6 times more precise (for heads whose query elements span
//           less than some 2^28; the second term is the f16 subnormals'), and fp16 rows take two mma where
//           bf16x3 takes three.
//   f16:    f16x2 with the hi part only, one mma per step: per head |error| <= 2^-11 * sum_d |q_d x_d| +
//           2^-39 * max_d |q_d| * sum_d |x_d| (query elements below some 2^-28 of the head's largest fall into
//           f16's subnormals) + fp32 summation error.
//   split:  the query split into hi + lo parts with the parts the rows allow: f16x2 for fp16/int8/fp8,
//           bf16x2 for bf16 and bf16x3 for fp32 rows (what automatic runs on tensor cores).
//   automatic: where tensor cores are supported and pay (heads >= 8, dim 64/128/256, not maxmin, 16-byte
//           aligned rows) split; otherwise fp32.
enum class ScoreMath { automatic, fp32, bf16x2, bf16, bf16x3, f16x2, f16, split };

struct ScoreArgs {
  Batch batch;  // entries of each request are scored against that request's query
  const void* rows = nullptr;    // [rows, dim] in `precision` (core/quant.h layout)
  const float* scales = nullptr; // [rows], int8 and fp8 only
  Precision precision = Precision::fp32;
  int dim = 0;
  bool maxmin = false;           // two rows per entry (max, min): Quest upper bound per head
  const float* queries = nullptr;       // [requests, heads, dim]
  const float* head_weights = nullptr;  // [requests, heads]
  int heads = 1;
  float* scores = nullptr;  // [total_entries]
  ScoreMath math = ScoreMath::automatic;
  // Experiment (kernel_bench compares both forms in one run; kernels/DEVICE_RUNS.md item 22): the
  // pipelined CUDA-core kernel, whose warps load their next step's rows before scoring the current ones.
  // Only for CUDA-core math (fp32 resolved) at dim 128 with 16-byte aligned rows and not maxmin; other
  // calls ignore it. The same steps' arithmetic, so the same scores bit for bit (Score.PipelinedForm...
  // checks it on the emulator).
  bool pipelined = false;
};

// The math `score` will use for these arguments (resolves automatic; throws like `score`).
ScoreMath resolve_score_math(const ScoreArgs& a);

void score(const ScoreArgs& a, cudaStream_t stream);

}  // namespace ip::cuda
