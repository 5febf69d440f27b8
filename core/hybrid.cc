#include "core/hybrid.h"

#include <charconv>
#include <cmath>

#include "core/error.h"
#include "core/linear_attention.h"

namespace ip {
namespace {

// Feature-mapped keys, values with a ones column, and gates of tokens [b, e).
struct LocalInputs {
  Tensor<float> k, v, a;
};

LocalInputs local_inputs(const Workload& w, Index64 b, Index64 e) {
  const Index64 n = e - b, Da = w.attn_keys.dim(1), Dv = w.values.dim(1);
  const float s = 1.0f / std::sqrt(std::sqrt(static_cast<float>(Da)));
  LocalInputs in{Tensor<float>({n, Da}), Tensor<float>({n, Dv + 1}), Tensor<float>({n, Da})};
  for (Index64 i = 0; i < n; ++i) {
    const float *k = w.attn_keys.mat().row(b + i), *v = w.values.mat().row(b + i);
    for (Index64 d = 0; d < Da; ++d) in.k.data()[i * Da + d] = feature_map(s * k[d]);
    for (Index64 d = 0; d < Dv; ++d) in.v.data()[i * (Dv + 1) + d] = v[d];
    in.v.data()[i * (Dv + 1) + Dv] = 1.0f;
  }
  fill_gates(w.gates, b, n, static_cast<int>(Da), in.a.data());
  return in;
}

}  // namespace

CombineRule parse_combine(std::string_view s) {
  CombineRule r;
  if (s == "sum") {
    r.kind = CombineRule::Kind::sum;
    return r;
  }
  if (s.rfind("gate:", 0) == 0) {
    const std::string num(s.substr(5));
    std::size_t used = 0;
    double g = -1;
    try {
      g = std::stod(num, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    IP_REQUIRE(used == num.size() && used > 0 && g >= 0.0 && g <= 1.0,
               "hybrid.combine '{}': the gate must be a number in [0, 1] (e.g. gate:0.5)", s);
    r.kind = CombineRule::Kind::gate;
    r.g = static_cast<float>(g);
    return r;
  }
  throw Error(fmt::format("unknown combine rule '{}' (expected sum or gate:G with 0 <= G <= 1)", s));
}

std::string to_string(const CombineRule& r) {
  return r.kind == CombineRule::Kind::sum ? "sum" : fmt::format("gate:{}", r.g);
}

void combine_outputs(const CombineRule& r, const float* sparse, const float* local, Index64 n, float* out) {
  if (r.kind == CombineRule::Kind::sum) {
    for (Index64 i = 0; i < n; ++i) out[i] = sparse[i] + local[i];
    return;
  }
  if (r.g == 0.0f) {  // exactly the sparse branch (no 1 * x + 0 * y rounding question)
    for (Index64 i = 0; i < n; ++i) out[i] = sparse[i];
    return;
  }
  for (Index64 i = 0; i < n; ++i) out[i] = (1.0f - r.g) * sparse[i] + r.g * local[i];
}

void validate_hybrid(const HybridParams& h) {
  if (!h.enabled) return;
  IP_REQUIRE(h.window >= 1, "hybrid.window = {} (must be >= 1)", h.window);
  IP_REQUIRE(h.chunk >= 1, "hybrid.chunk = {} (must be >= 1)", h.chunk);
}

void local_prefill(const Workload& w, Index64 begin, Index64 end, int chunk, LocalBranch& lb) {
  IP_REQUIRE(w.has_attention(), "hybrid layer: the workload has no attention keys and values");
  IP_REQUIRE(0 <= begin && begin < end && end <= w.tokens(), "hybrid layer: window [{}, {}) outside [0, {})", begin,
             end, w.tokens());
  const auto in = local_inputs(w, begin, end);
  lb.begin = begin;
  lb.end = end;
  lb.dk = in.k.dim(1);
  lb.dv = in.v.dim(1);
  lb.state.assign(static_cast<std::size_t>(lb.dk * lb.dv), 0.0f);
  gla_chunked(in.k.mat(), in.v.mat(), in.a.mat(), {}, chunk, lb.state.data(), nullptr);
}

void local_append(const Workload& w, Index64 new_end, LocalBranch& lb) {
  IP_REQUIRE(lb.end <= new_end && new_end <= w.tokens(), "hybrid layer: cannot append up to token {} (state ends at {})",
             new_end, lb.end);
  if (new_end == lb.end) return;
  const auto in = local_inputs(w, lb.end, new_end);
  gla_naive(in.k.mat(), in.v.mat(), in.a.mat(), {}, lb.state.data(), nullptr);
  lb.end = new_end;
}

void local_readout(const LocalBranch& lb, MatrixView<const float> queries, float* out) {
  const Index64 Ha = queries.rows, Da = lb.dk, Dv = lb.dv - 1;
  IP_REQUIRE(queries.cols == Da, "hybrid layer: query dimension {} for keys of dimension {}", queries.cols, Da);
  const float s = 1.0f / std::sqrt(std::sqrt(static_cast<float>(Da)));
  Tensor<float> q({Ha, Da}), o({Ha, Dv + 1});
  for (Index64 h = 0; h < Ha; ++h)
    for (Index64 d = 0; d < Da; ++d) q.data()[h * Da + d] = feature_map(s * queries(h, d));
  gla_readout(lb.state.data(), Da, Dv + 1, q.mat(), o.data());
  for (Index64 h = 0; h < Ha; ++h) {
    const float z = o.data()[h * (Dv + 1) + Dv];
    for (Index64 d = 0; d < Dv; ++d) out[h * Dv + d] = o.data()[h * (Dv + 1) + d] / z;
  }
}

}  // namespace ip
