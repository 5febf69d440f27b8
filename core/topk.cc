// Exact top-k on the CPU as a radix select over order-preserving keys (core/topk_order.h), the scheme of
// the CUDA kernels (kernels/topk.cuh) without their launch structure:
//   1. histogram the keys' top 11 bits over the row (and look for NaNs, which are an error); the bin
//      holding the k-th best key is the threshold's first digit; the bins above it are taken whole;
//   2. while that bin holds many keys, histogram the next digit (11, then 10 bits) of the keys in it;
//   3. collect the keys above the threshold's known bits and those equal to them (the candidates), as
//      (key, id) composites, and pick the rest of the k among the candidates: all of them, the first in
//      id order when all 32 bits are known (they are then ties, which go to the lower id; a count of
//      each chunk's equal keys gives each chunk its share), or by nth_element over the composites when
//      the candidates are few enough to select in memory (at most 32Ki);
//   4. sort the k composites, best first.
// Chunk boundaries depend on n only, and the k best are unique under the total order, so the result is
// the same bits for any thread count. Small rows skip the histograms.
#include "core/topk.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "core/parallel.h"
#include "core/topk_order.h"

namespace ip {
namespace {

constexpr Index64 kChunk = 1 << 16;        // scores a task reads
constexpr Index64 kDirect = 1 << 14;       // rows this short: composites of all, no histogram
constexpr Index64 kInMemory = 1 << 15;     // candidates this few: selected in memory, no further pass
constexpr int kDigitBits[3] = {11, 11, 10};  // the key's digits, most significant first

inline std::uint32_t number_key(float f) { return topk_number_key(std::bit_cast<std::uint32_t>(f)); }

// NaN by its bits (std::isnan may be assumed false under fast-math, and does not vectorize as well).
inline bool is_nan_bits(float f) { return (std::bit_cast<std::uint32_t>(f) & 0x7FFFFFFFu) > 0x7F800000u; }

// The ids of sel's composites, best first (sel is emptied).
std::vector<std::int32_t> ids_best_first(std::vector<std::uint64_t>& sel) {
  std::sort(sel.begin(), sel.end(), std::greater<>());
  std::vector<std::int32_t> ids(sel.size());
  for (std::size_t i = 0; i < sel.size(); ++i) ids[i] = topk_composite_id(sel[i]);
  std::vector<std::uint64_t>().swap(sel);
  return ids;
}

// The `want` largest composites of c, moved to its front and the rest dropped.
void keep_largest(std::vector<std::uint64_t>& c, Index64 want) {
  if (want < static_cast<Index64>(c.size())) std::nth_element(c.begin(), c.begin() + want, c.end(), std::greater<>());
  c.resize(want);
}

[[noreturn]] void nan_error(Index64 b, Index64 e) {
  throw Error(fmt::format("top-k: NaN score in ids [{}, {})", b, e));
}

}  // namespace

std::vector<std::int32_t> topk(const float* scores, Index64 n, Index64 k) {
  IP_REQUIRE(n >= 1, "top-k: no scores (empty context)");
  IP_REQUIRE(n <= INT32_MAX, "top-k: {} scores exceed the 32-bit id range", n);
  IP_REQUIRE(k >= 1 && k <= n, "top-k: k = {} outside [1, {}] (k larger than the number of candidates)", k, n);

  if (n <= kDirect) {
    std::vector<std::uint64_t> all(n);
    for (Index64 i = 0; i < n; ++i) {
      if (is_nan_bits(scores[i])) nan_error(0, n);
      all[i] = topk_composite(number_key(scores[i]), static_cast<std::uint32_t>(i));
    }
    keep_largest(all, k);
    return ids_best_first(all);
  }

  const Index64 chunks = (n + kChunk - 1) / kChunk;
  std::uint32_t prefix = 0;  // the threshold key's known top bits
  int known = 0;             // how many
  Index64 remaining = k;     // of the k, how many are to come from keys whose top bits equal prefix
  Index64 candidates = n;    // keys whose top bits equal prefix
  std::vector<char> nan_in(chunks, 0);
  for (int level = 0; level == 0 || (level < 3 && candidates > kInMemory && candidates != remaining); ++level) {
    const int bits = kDigitBits[level], shift = 32 - known - bits;
    std::array<Index64, 2048> hist{};
    std::mutex merge;
    parallel_for(n, kChunk, [&, bits, shift, known, prefix](Index64 b, Index64 e) {
      // A tile's bins first (vector code), then their counts into four histograms in turn, so that runs
      // of keys in one bin do not wait on each other's increments. Keys outside the prefix count in a bin
      // past the digits'.
      std::array<std::array<std::uint32_t, 2049>, 4> h{};
      const std::uint32_t mask = (1u << bits) - 1u, low = 32 - known;
      constexpr Index64 kTile = 256;
      std::array<std::uint32_t, kTile> bins;
      std::uint32_t nan = 0;
      for (Index64 t = b; t < e; t += kTile) {
        const Index64 m = std::min(kTile, e - t);
        if (known == 0) {
          for (Index64 j = 0; j < m; ++j) {
            nan |= static_cast<std::uint32_t>(is_nan_bits(scores[t + j]));
            bins[j] = number_key(scores[t + j]) >> shift;
          }
        } else {
          for (Index64 j = 0; j < m; ++j) {
            const std::uint32_t key = number_key(scores[t + j]);
            bins[j] = (key >> low) == prefix ? (key >> shift) & mask : 2048u;
          }
        }
        Index64 j = 0;
        for (; j + 4 <= m; j += 4) {
          ++h[0][bins[j]];
          ++h[1][bins[j + 1]];
          ++h[2][bins[j + 2]];
          ++h[3][bins[j + 3]];
        }
        for (; j < m; ++j) ++h[0][bins[j]];
      }
      if (known == 0) nan_in[b / kChunk] = nan != 0;
      std::lock_guard<std::mutex> lock(merge);  // integer sums: the order does not matter
      for (std::uint32_t d = 0; d <= mask; ++d) hist[d] += h[0][d] + h[1][d] + h[2][d] + h[3][d];
    });
    if (level == 0)
      for (Index64 c = 0; c < chunks; ++c)
        if (nan_in[c]) nan_error(c * kChunk, std::min(n, (c + 1) * kChunk));
    std::uint32_t d = (1u << bits) - 1u;
    for (Index64 above = 0;; --d) {  // the bin of the remaining-th best key (the counts add up to candidates)
      if (above + hist[d] >= remaining) {
        remaining -= above;
        break;
      }
      above += hist[d];
    }
    prefix = (prefix << bits) | d;
    known += bits;
    candidates = hist[d];
  }

  // Keys above the prefix are taken; of those equal to it, all (candidates == remaining), the first
  // `remaining` in id order (all 32 bits known: ties), or all, to be selected from below. For ties, a
  // count of each chunk's equal keys first gives each chunk its share, so that no more than k
  // composites are ever held.
  const bool ties = known == 32 && candidates > remaining;
  std::vector<Index64> quota(chunks, n);
  if (ties) {
    std::vector<Index64> equal(chunks, 0);
    parallel_for(n, kChunk, [&, prefix](Index64 b, Index64 e) {
      Index64 c = 0;
      for (Index64 i = b; i < e; ++i) c += number_key(scores[i]) == prefix;
      equal[b / kChunk] = c;
    });
    Index64 before = 0;
    for (Index64 c = 0; c < chunks; ++c) {
      quota[c] = std::clamp<Index64>(remaining - before, 0, equal[c]);
      before += equal[c];
    }
  }
  std::vector<std::vector<std::uint64_t>> above_in(chunks), equal_in(chunks);
  parallel_for(n, kChunk, [&, prefix, low = 32 - known](Index64 b, Index64 e) {
    auto& above = above_in[b / kChunk];
    auto& equal = equal_in[b / kChunk];
    const Index64 cap = quota[b / kChunk];
    auto take = [&](Index64 i) {
      const std::uint32_t key = number_key(scores[i]);
      const std::uint32_t top = key >> low;
      if (top > prefix) {
        above.push_back(topk_composite(key, static_cast<std::uint32_t>(i)));
      } else if (top == prefix && static_cast<Index64>(equal.size()) < cap) {
        equal.push_back(topk_composite(key, static_cast<std::uint32_t>(i)));
      }
    };
    // Most scores are below the threshold: test 32 at a time (vector code), look closer at a hit.
    constexpr int kBlock = 32;
    Index64 i = b;
    for (; i + kBlock <= e; i += kBlock) {
      std::uint32_t most = 0;
      for (int j = 0; j < kBlock; ++j) most = std::max(most, number_key(scores[i + j]));
      if ((most >> low) >= prefix)
        for (int j = 0; j < kBlock; ++j) take(i + j);
    }
    for (; i < e; ++i) take(i);
  });
  // Each chunk's composites are freed as they are merged (with k = n they are the whole row).
  auto merge = [](std::vector<std::vector<std::uint64_t>>& parts, std::vector<std::uint64_t>& into) {
    for (auto& p : parts) {
      into.insert(into.end(), p.begin(), p.end());
      std::vector<std::uint64_t>().swap(p);
    }
  };
  std::vector<std::uint64_t> sel;
  sel.reserve(k);
  merge(above_in, sel);
  IP_REQUIRE(static_cast<Index64>(sel.size()) == k - remaining,
             "top-k: {} keys above the threshold, expected {} (internal error)", sel.size(), k - remaining);
  if (ties || candidates == remaining) {
    merge(equal_in, sel);  // ties: the quotas took the lowest ids among the equal keys
  } else {
    std::vector<std::uint64_t> cand;  // at most kInMemory
    merge(equal_in, cand);
    keep_largest(cand, remaining);
    sel.insert(sel.end(), cand.begin(), cand.end());
  }
  IP_REQUIRE(static_cast<Index64>(sel.size()) == k, "top-k: {} keys selected, expected {} (internal error)",
             sel.size(), k);
  return ids_best_first(sel);
}

}  // namespace ip
