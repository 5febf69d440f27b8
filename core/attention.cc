#include "core/attention.h"

#include <algorithm>
#include <cmath>

#include "core/hd.h"
#include "core/parallel.h"
#include "core/weights.h"

namespace ip {
namespace {
constexpr Index64 kChunk = 4096;  // tokens per parallel chunk; fixed so sums never depend on threads
constexpr Index64 kValueTile = 32;  // tokens whose values are summed together (32 x 128 floats: 16 KiB)

// o[d] += p_j v_j[d] for the nt tokens j in order (p_j = p[j * ldp]), each sum in double, a multiply and
// an add per term (fused by the compiler where the build allows it: in the vector blocks as in the
// plain loop, so the bits do not depend on Dv's blocks). With AVX-512 the sums of 64 elements stay in 8
// registers over the nt tokens (the plain loop, as vectorized by g++, loads and stores them every term).
void weighted_value_sums(const float* const* v, int nt, const float* p, Index64 ldp, Index64 Dv, double* o) {
  Index64 d0 = 0;
#if IP_X86_AVX512
  for (; d0 + 64 <= Dv; d0 += 64) {
    __m512d acc[8];
    for (int k = 0; k < 8; ++k) acc[k] = _mm512_loadu_pd(o + d0 + 8 * k);
    for (int j = 0; j < nt; ++j) {
      const __m512d pj = _mm512_set1_pd(p[j * ldp]);
      const float* vj = v[j] + d0;
      for (int k = 0; k < 8; ++k)
        acc[k] = _mm512_add_pd(acc[k], _mm512_mul_pd(pj, _mm512_cvtps_pd(_mm256_loadu_ps(vj + 8 * k))));
    }
    for (int k = 0; k < 8; ++k) _mm512_storeu_pd(o + d0 + 8 * k, acc[k]);
  }
#endif
  for (int j = 0; j < nt; ++j) {
    const double pj = p[j * ldp];
    for (Index64 d = d0; d < Dv; ++d) o[d] += pj * v[j][d];
  }
}
}  // namespace

std::vector<Index64> tokens_of_groups(std::span<const std::int32_t> groups, int group_size, Index64 tokens) {
  std::vector<std::int32_t> sorted(groups.begin(), groups.end());
  std::sort(sorted.begin(), sorted.end());
  std::vector<Index64> out;
  out.reserve(sorted.size() * group_size);
  for (std::int32_t g : sorted) {
    const Index64 b = static_cast<Index64>(g) * group_size, e = std::min(tokens, b + group_size);
    IP_REQUIRE(g >= 0 && b < tokens, "attention: group {} outside the context of {} tokens", g, tokens);
    for (Index64 t = b; t < e; ++t) out.push_back(t);
  }
  return out;
}

void validate_attention_inputs(MatrixView<const float> keys, MatrixView<const float> values,
                               MatrixView<const float> queries, std::span<const Index64> tokens) {
  const Index64 T = keys.rows;
  IP_REQUIRE(T > 0, "attention: empty context");
  IP_REQUIRE(values.rows == T, "attention: {} values for {} keys", values.rows, T);
  IP_REQUIRE(queries.cols == keys.cols, "attention: query dimension {} does not match key dimension {}", queries.cols,
             keys.cols);
  IP_REQUIRE(queries.rows >= 1, "attention: no query heads");
  for (const Index64 t : tokens) IP_REQUIRE(t >= 0 && t < T, "attention: token {} outside [0, {})", t, T);
}

AttentionOutput attention(MatrixView<const float> keys, MatrixView<const float> values, MatrixView<const float> queries,
                          std::span<const Index64> tokens, bool want_probs) {
  validate_attention_inputs(keys, values, queries, tokens);
  const Index64 T = keys.rows, Da = keys.cols, Dv = values.cols, Ha = queries.rows;
  const bool dense = tokens.empty();
  const Index64 n = dense ? T : static_cast<Index64>(tokens.size());
  auto token = [&](Index64 i) { return dense ? i : tokens[i]; };
  const float scale = 1.0f / std::sqrt(static_cast<float>(Da));

  // Logits [n, Ha], then per-chunk maxima.
  Tensor<float> logits({n, Ha});
  const Index64 chunks = (n + kChunk - 1) / kChunk;
  std::vector<float> cmax(chunks * Ha, -INFINITY);
  // Each head's dot product in the fixed lane order of core/weights.h (head_dots), four tokens and four
  // heads at a time (four_rows_head_dots).
  with_dim(static_cast<int>(Da), [&](auto D) {
    parallel_for(n, kChunk, [&](Index64 b, Index64 e) {
      const Index64 c = b / kChunk;
      Index64 i = b;
      for (; i + 4 <= e; i += 4) {
        const float* rows[4] = {keys.row(token(i)), keys.row(token(i + 1)), keys.row(token(i + 2)),
                                keys.row(token(i + 3))};
        for (Index64 f = i + kPrefetchRows; f < i + kPrefetchRows + 4 && f < e; ++f)
          prefetch_bytes(keys.row(token(f)), Da * static_cast<Index64>(sizeof(float)));
        four_rows_head_dots(rows, queries.data, queries.ld, static_cast<int>(Ha), D, logits.data() + i * Ha);
      }
      for (; i < e; ++i)
        all_head_dots(keys.row(token(i)), queries.data, queries.ld, static_cast<int>(Ha), D, logits.data() + i * Ha);
      for (i = b; i < e; ++i) {
        float* li = logits.data() + i * Ha;
        for (Index64 h = 0; h < Ha; ++h) {
          li[h] *= scale;
          cmax[c * Ha + h] = std::max(cmax[c * Ha + h], li[h]);
        }
      }
    });
  });
  std::vector<float> mx(Ha, -INFINITY);
  for (Index64 c = 0; c < chunks; ++c)
    for (Index64 h = 0; h < Ha; ++h) mx[h] = std::max(mx[h], cmax[c * Ha + h]);

  // Exponentials, per-chunk sums and weighted value sums, combined in chunk order. Each sum runs over
  // the chunk's tokens in order; the tokens go by tiles of kValueTile (their values stay in L1 while
  // every head takes its turn, and weighted_value_sums holds 64 of a head's sums in registers).
  std::vector<double> csum(chunks * Ha, 0.0);
  std::vector<double> cout(chunks * Ha * Dv, 0.0);
  parallel_for(n, kChunk, [&](Index64 b, Index64 e) {
    const Index64 c = b / kChunk;
    double* o = cout.data() + c * Ha * Dv;
    const float* vrows[kValueTile];
    for (Index64 t0 = b; t0 < e; t0 += kValueTile) {
      const int nt = static_cast<int>(std::min(kValueTile, e - t0));
      for (int j = 0; j < nt; ++j) {
        const Index64 i = t0 + j;
        vrows[j] = values.row(token(i));
        if (i + kValueTile < e)
          prefetch_bytes(values.row(token(i + kValueTile)), Dv * static_cast<Index64>(sizeof(float)));
        for (Index64 h = 0; h < Ha; ++h) {
          const float p = std::exp(logits.data()[i * Ha + h] - mx[h]);
          logits.data()[i * Ha + h] = p;
          csum[c * Ha + h] += p;
        }
      }
      for (Index64 h = 0; h < Ha; ++h)
        weighted_value_sums(vrows, nt, logits.data() + t0 * Ha + h, Ha, Dv, o + h * Dv);
    }
  });
  std::vector<double> sum(Ha, 0.0);
  std::vector<double> acc(Ha * Dv, 0.0);
  for (Index64 c = 0; c < chunks; ++c)
    for (Index64 h = 0; h < Ha; ++h) {
      sum[h] += csum[c * Ha + h];
      for (Index64 d = 0; d < Dv; ++d) acc[h * Dv + d] += cout[(c * Ha + h) * Dv + d];
    }

  AttentionOutput res;
  res.out.reshape({Ha, Dv});
  for (Index64 h = 0; h < Ha; ++h)
    for (Index64 d = 0; d < Dv; ++d) res.out.data()[h * Dv + d] = static_cast<float>(acc[h * Dv + d] / sum[h]);
  if (want_probs) {
    res.probs.reshape({Ha, n});
    parallel_for(n, kChunk, [&](Index64 b, Index64 e) {
      for (Index64 i = b; i < e; ++i)
        for (Index64 h = 0; h < Ha; ++h)
          res.probs.data()[h * n + i] = static_cast<float>(logits.data()[i * Ha + h] / sum[h]);
    });
  }
  return res;
}

}  // namespace ip
