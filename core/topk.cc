#include "core/topk.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/parallel.h"

namespace ip {
namespace {

constexpr Index64 kChunk = 1 << 16;

struct Better {
  const float* s;
  bool operator()(std::int32_t a, std::int32_t b) const { return s[a] > s[b] || (s[a] == s[b] && a < b); }
};

// The k best of ids (k <= ids.size()), unordered, written to the front of ids.
void select_front(std::vector<std::int32_t>& ids, Index64 k, Better better) {
  if (k < static_cast<Index64>(ids.size())) std::nth_element(ids.begin(), ids.begin() + k, ids.end(), better);
  ids.resize(k);
}

}  // namespace

std::vector<std::int32_t> topk(const float* scores, Index64 n, Index64 k) {
  IP_REQUIRE(n >= 1, "top-k: no scores (empty context)");
  IP_REQUIRE(n <= INT32_MAX, "top-k: {} scores exceed the 32-bit id range", n);
  IP_REQUIRE(k >= 1 && k <= n, "top-k: k = {} outside [1, {}] (k larger than the number of candidates)", k, n);
  const Better better{scores};
  const Index64 chunks = (n + kChunk - 1) / kChunk;
  // Each chunk keeps its own k best; the union holds the global k best because the order is total.
  std::vector<std::vector<std::int32_t>> partial(chunks);
  std::vector<int> nan_found(chunks, 0);
  parallel_for(n, kChunk, [&](Index64 b, Index64 e) {
    const Index64 c = b / kChunk;
    std::vector<std::int32_t> ids(e - b);
    std::iota(ids.begin(), ids.end(), static_cast<std::int32_t>(b));
    for (Index64 i = b; i < e; ++i) nan_found[c] |= std::isnan(scores[i]);
    if (!nan_found[c]) select_front(ids, std::min<Index64>(k, e - b), better);
    partial[c] = std::move(ids);
  });
  for (Index64 c = 0; c < chunks; ++c) IP_REQUIRE(!nan_found[c], "top-k: NaN score in ids [{}, {})", c * kChunk, std::min(n, (c + 1) * kChunk));
  std::vector<std::int32_t> ids;
  for (auto& p : partial) ids.insert(ids.end(), p.begin(), p.end());
  select_front(ids, k, better);
  std::sort(ids.begin(), ids.end(), better);
  return ids;
}

}  // namespace ip
