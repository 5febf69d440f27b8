// The hybrid layer's local branch on the device (kernels/local_branch.h).
#include "kernels/local_branch.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "kernels/linear_attention.h"

namespace ip::cuda {
namespace {

// The feature scale of core/hybrid.cc, 1 / Da^{1/4}, computed the same way.
float feature_scale(Index64 Da) { return 1.0f / std::sqrt(std::sqrt(static_cast<float>(Da))); }

void check_state(const LocalBranch& lb, Index64 dk, Index64 dv) {
  IP_REQUIRE(lb.dk == dk && lb.dv == dv && static_cast<Index64>(lb.state.size()) == dk * dv,
             "hybrid layer: local state [{}, {}] with {} floats, expected [{}, {}]", lb.dk, lb.dv, lb.state.size(), dk,
             dv);
}

// Copies a (possibly strided) host matrix into a contiguous device buffer.
void upload_rows(DeviceBuffer<float>& d, MatrixView<const float> m, cudaStream_t s) {
  d.resize(static_cast<std::size_t>(m.rows * m.cols));
  if (m.rows * m.cols == 0) return;
  IP_CUDA_CHECK(cudaMemcpy2DAsync(d.data(), m.cols * sizeof(float), m.data, m.ld * sizeof(float),
                                  m.cols * sizeof(float), m.rows, cudaMemcpyHostToDevice, s));
}

}  // namespace

void DeviceLocalBranch::stage_inputs(const Workload& w, Index64 b, Index64 e, cudaStream_t s) {
  const Index64 n = e - b, Da = w.attn_keys.dim(1), Dv = w.values.dim(1);
  upload_rows(raw_k_, w.attn_keys.mat().rows_range(b, e), s);
  upload_rows(raw_v_, w.values.mat().rows_range(b, e), s);
  k_.resize(static_cast<std::size_t>(n * Da));
  v_.resize(static_cast<std::size_t>(n * (Dv + 1)));
  g_.resize(static_cast<std::size_t>(n * Da));
  LocalInputArgs li;
  li.keys = raw_k_.data();
  li.values = raw_v_.data();
  li.first = b;
  li.n = n;
  li.dk = static_cast<int>(Da);
  li.dv = static_cast<int>(Dv);
  li.scale = feature_scale(Da);
  li.gates = w.gates;
  li.out_keys = k_.data();
  li.out_values = v_.data();
  li.out_gates = g_.data();
  local_inputs(li, s);
}

void DeviceLocalBranch::prefill(const Workload& w, Index64 begin, Index64 end, int chunk, LocalBranch& lb,
                                cudaStream_t s) {
  IP_REQUIRE(w.has_attention(), "hybrid layer: the workload has no attention keys and values");
  IP_REQUIRE(0 <= begin && begin < end && end <= w.tokens(), "hybrid layer: window [{}, {}) outside [0, {})", begin,
             end, w.tokens());
  IP_REQUIRE(chunk >= 1, "hybrid layer: chunk = {} (must be >= 1)", chunk);
  const Index64 Da = w.attn_keys.dim(1), Dv = w.values.dim(1);
  IP_REQUIRE(Da <= (1 << 16) && Dv < (1 << 16), "hybrid layer: dimensions Da = {}, Dv = {} exceed 2^16", Da, Dv);
  GlaArgs a;
  a.n = end - begin;
  a.dk = static_cast<int>(Da);
  a.dv = static_cast<int>(Dv + 1);
  // The chunk only changes rounding: a chunk too large for shared memory runs as the largest that fits.
  a.chunk = gla_max_chunk(a.dk, /*outputs=*/false, chunk);
  IP_REQUIRE(a.chunk >= 1, "hybrid layer: unsupported attention key dimension {} (no chunk fits shared memory)", Da);
  stage_inputs(w, begin, end, s);
  state_.resize(static_cast<std::size_t>(Da * (Dv + 1)));
  state_.fill_bytes(0, s);
  a.keys = k_.data();
  a.values = v_.data();
  a.gates = g_.data();
  a.state = state_.data();
  if (chunked_) {
    a.workspace_bytes = gla_chunked_workspace_bytes(a.n, a.dk, a.dv, a.chunk);
    ws_.resize(a.workspace_bytes);
    a.workspace = ws_.data();
  }
  gla_chunked(a, s);
  lb.state.resize(static_cast<std::size_t>(Da * (Dv + 1)));
  state_.download(lb.state.data(), lb.state.size(), s);
  IP_CUDA_CHECK(cudaStreamSynchronize(s));
  lb.begin = begin;
  lb.end = end;
  lb.dk = Da;
  lb.dv = Dv + 1;
}

void DeviceLocalBranch::append(const Workload& w, Index64 new_end, LocalBranch& lb, cudaStream_t s) {
  IP_REQUIRE(lb.end <= new_end && new_end <= w.tokens(), "hybrid layer: cannot append up to token {} (state ends at {})",
             new_end, lb.end);
  if (new_end == lb.end) return;
  IP_REQUIRE(w.has_attention(), "hybrid layer: the workload has no attention keys and values");
  const Index64 Da = w.attn_keys.dim(1), Dv = w.values.dim(1);
  check_state(lb, Da, Dv + 1);
  stage_inputs(w, lb.end, new_end, s);
  state_.upload(lb.state, s);
  GlaArgs a;
  a.keys = k_.data();
  a.values = v_.data();
  a.gates = g_.data();
  a.state = state_.data();
  a.n = new_end - lb.end;
  a.dk = static_cast<int>(Da);
  a.dv = static_cast<int>(Dv + 1);
  gla_append(a, s);
  state_.download(lb.state.data(), lb.state.size(), s);
  IP_CUDA_CHECK(cudaStreamSynchronize(s));
  lb.end = new_end;
}

void DeviceLocalBranch::readout(const LocalBranch& lb, MatrixView<const float> queries, float* out, cudaStream_t s) {
  const Index64 Ha = queries.rows, Da = lb.dk, Dv = lb.dv - 1;
  IP_REQUIRE(queries.cols == Da, "hybrid layer: query dimension {} for keys of dimension {}", queries.cols, Da);
  check_state(lb, Da, lb.dv);
  IP_REQUIRE(Dv >= 1, "hybrid layer: local state has {} value columns (needs values and the ones column)", lb.dv);
  IP_REQUIRE(Ha <= std::numeric_limits<int>::max(), "hybrid layer: {} query heads exceed one launch", Ha);
  if (Ha == 0) return;
  state_.upload(lb.state, s);
  upload_rows(q_, queries, s);
  out_.resize(static_cast<std::size_t>(Ha * Dv));
  GlaReadoutArgs r;
  r.state = state_.data();
  r.queries = q_.data();
  r.out = out_.data();
  r.dk = static_cast<int>(Da);
  r.dv = static_cast<int>(Dv + 1);
  r.heads = static_cast<int>(Ha);
  r.feature_scale = feature_scale(Da);
  r.normalise = true;
  gla_readout(r, s);
  out_.download(out, static_cast<std::size_t>(Ha * Dv), s);
  IP_CUDA_CHECK(cudaStreamSynchronize(s));
}

}  // namespace ip::cuda
