#include "experiments/batched_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>

#include "core/error.h"
#include "core/ranges.h"
#include "core/score.h"
#include "core/topk.h"
#include "experiments/device_plan.h"
#include "indexpool/build_config.h"

#if IP_HAVE_CUDA
#include "kernels/batched_decode.h"
#endif

namespace ip::exp {

#if IP_HAVE_CUDA

namespace {

// The decoder's configuration for B requests of these dims under p (token counts left to the caller).
cuda::BatchedDecodeConfig decoder_config(Index64 B, Index64 D, Index64 H, Index64 Da, Index64 Ha, Index64 Dv,
                                         const PipelineParams& p) {
  cuda::BatchedDecodeConfig c;
  c.requests = static_cast<int>(B);
  c.dim = static_cast<int>(D);
  c.index_heads = static_cast<int>(H);
  c.attn_dim = static_cast<int>(Da);
  c.attn_heads = static_cast<int>(Ha);
  c.value_dim = static_cast<int>(Dv);
  c.pool = p.pool;
  c.topk_tokens = p.topk_tokens;
  c.want_probs = true;  // the mass each selected group got (the cache model's relevance)
  c.forms = p.kernels;
  return c;
}

// The decoder's configuration for the point, and the requests' offsets; or why the batch cannot run.
std::string batched_config(const std::vector<Workload>& reqs, const PipelineParams& p, cuda::BatchedDecodeConfig& c,
                           std::vector<long long>& offset) {
  IP_REQUIRE(!reqs.empty(), "select.batched: a point with no requests");
  const Workload& w0 = reqs.front();
  if (!w0.has_attention())  // config validation refuses generated ones; an import may have no attention stage
    return "select.batched: the workload has no attention stage, which the batched decoder needs";
  const auto B = static_cast<Index64>(reqs.size());
  const Index64 D = w0.dim(), H = w0.index_heads(), Q = w0.steps();
  const Index64 Ha = w0.attn_queries.dim(1), Da = w0.attn_keys.dim(1), Dv = w0.values.dim(1);
  c = decoder_config(B, D, H, Da, Ha, Dv, p);
  offset.assign(static_cast<std::size_t>(B) + 1, 0);
  for (Index64 b = 0; b < B; ++b) {
    const Workload& w = reqs[static_cast<std::size_t>(b)];
    if (!(w.dim() == D && w.index_heads() == H && w.steps() == Q && w.has_attention() && w.attn_queries.dim(1) == Ha &&
          w.attn_keys.dim(1) == Da && w.values.dim(1) == Dv))  // imported requests may differ; generated ones do not
      return fmt::format(
          "select.batched: request {} differs from request 0 in dims, heads or steps (the batched decoder needs one "
          "shape for all)",
          b);
    IP_REQUIRE(p.topk_tokens <= w.tokens(), "select.topk_tokens = {} exceeds request {}'s context of {} tokens",
               p.topk_tokens, b, w.tokens());
    offset[static_cast<std::size_t>(b) + 1] = offset[static_cast<std::size_t>(b)] + w.tokens();
    c.max_tokens = std::max<long long>(c.max_tokens, w.tokens());
  }
  c.total_tokens = offset.back();
  // The fidelity pass holds one request at a time on the device beside the decoder.
  std::size_t reserve = std::size_t{256} << 20;
  if (p.fidelity) {
    const Workload* longest = &w0;
    for (const Workload& w : reqs)
      if (w.tokens() > longest->tokens()) longest = &w;
    // Request after request, each under its own hold: the backend's upload slots rotate (rotating_upload_bytes).
    const DeviceShape s = device_shape(*longest);
    reserve += static_cast<std::size_t>(estimate_device_bytes(s, p).total() + (B > 1 ? rotating_upload_bytes(s) : 0.0));
  }
  const std::string fit = cuda::check_fits(c, 0, reserve);
  if (fit.empty()) return fit;
  return fmt::format("select.batched: the batch does not fit the device: {}{}", fit,
                     p.fidelity ? "; the reserve is one request's fidelity work and 0.25 GiB" : "");
}

}  // namespace

std::string batched_skip_reason(const std::vector<Workload>& reqs, const PipelineParams& p) {
  cuda::BatchedDecodeConfig c;
  std::vector<long long> offset;
  return batched_config(reqs, p, c, offset);
}

double batched_device_bytes(const WorkloadSpec& s, const PipelineParams& p) {
  cuda::BatchedDecodeConfig c =
      decoder_config(s.requests, s.dim, s.index_heads, s.attn_dim, s.attn_heads, s.value_dim, p);
  for (int b = 0; b < s.requests; ++b) {
    const Index64 T = request_tokens(s, b);
    c.total_tokens += T;
    c.max_tokens = std::max<long long>(c.max_tokens, T);
  }
  const DeviceShape shape = device_shape(s);
  const double fidelity =
      p.fidelity ? estimate_device_bytes(shape, p).total() + (s.requests > 1 ? rotating_upload_bytes(shape) : 0.0) : 0.0;
  return static_cast<double>(cuda::estimate_device_bytes(c)) + fidelity;
}

std::vector<RequestResult> run_batched(const std::vector<Workload>& reqs, const PipelineParams& p, Backend& fidelity,
                                       std::string& skip_reason,
                                       const std::function<void(std::size_t, std::size_t)>& on_step,
                                       std::string* kernel_forms) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  cuda::BatchedDecodeConfig c;
  std::vector<long long> offset;
  skip_reason = batched_config(reqs, p, c, offset);
  if (!skip_reason.empty()) return {};
  const Workload& w0 = reqs.front();
  const auto B = static_cast<Index64>(reqs.size());
  const Index64 D = w0.dim(), H = w0.index_heads(), Q = w0.steps();
  const Index64 Ha = w0.attn_queries.dim(1), Da = w0.attn_keys.dim(1), Dv = w0.values.dim(1);
  cuda::BatchedDecoder dec(c, 0);

  // The decoder copies each request's arrays into its rows on the device: no packed host copy.
  std::vector<const float*> ik, ak, vv;
  for (const Workload& w : reqs) {
    ik.push_back(w.index_keys.data());
    ak.push_back(w.attn_keys.data());
    vv.push_back(w.values.data());
  }
  float pool_ms = 0;
  {
    IP_RANGE(pool);
    cuda::BatchedContext ctx;
    ctx.token_offset = offset;
    ctx.request_index_keys = ik;
    ctx.request_attn_keys = ak;
    ctx.request_values = vv;
    pool_ms = dec.load(ctx);
  }

  const int G = effective_group_size(p.pool);
  const int rpg = rows_per_group(p.pool.weights.scheme);
  const Index64 kg = groups_for_budget(p.topk_tokens, G);
  const double row_bytes = static_cast<double>(D) * element_bytes(p.pool.precision) + scale_bytes(p.pool.precision);
  std::vector<RequestResult> res(static_cast<std::size_t>(B));
  for (Index64 b = 0; b < B; ++b) {
    RequestResult& r = res[static_cast<std::size_t>(b)];
    const Index64 T = reqs[static_cast<std::size_t>(b)].tokens();
    r.tokens = T;
    r.group_size = G;
    r.groups = num_groups(T, G);
    r.k_groups = kg;
    r.rebuilds = 1;
    r.tokens_per_group = G;
    r.index.method = p.pool.weights.scheme;
    r.index.group_size = G;
    r.index.tokens = T;
    r.index_bytes = static_cast<double>(r.groups * rpg) * row_bytes;
    r.exact_index_bytes = static_cast<double>(T) * row_bytes;
    r.macs_per_query = scoring_macs(r.groups * rpg, H, D);
    r.exact_macs_per_query = scoring_macs(T, H, D);
    r.selected.reserve(static_cast<std::size_t>(Q * kg));
    r.selected_mass.reserve(static_cast<std::size_t>(Q * kg));
  }

  std::vector<float> iq(static_cast<std::size_t>(B * H * D)), hw(static_cast<std::size_t>(B * H)),
      aq(static_cast<std::size_t>(B * Ha * Da));
  std::vector<std::vector<float>> outs(static_cast<std::size_t>(Q));  // [Q][B, Ha, Dv]: for output_error
  for (Index64 q = 0; q < Q; ++q) {
    for (Index64 b = 0; b < B; ++b) {
      const Workload& w = reqs[static_cast<std::size_t>(b)];
      std::copy_n(w.index_queries.slice(q).data, H * D, iq.begin() + b * H * D);
      std::copy_n(w.head_weights.data() + q * H, H, hw.begin() + b * H);
      std::copy_n(w.attn_queries.slice(q).data, Ha * Da, aq.begin() + b * Ha * Da);
    }
    cuda::BatchedStep st;
    {
      IP_RANGE(batch_step);
      st = dec.step(cuda::BatchedQueries{iq.data(), hw.data(), aq.data()});
    }
    const Index64 L = st.k_groups * G;  // the probability row of a request: its attended tokens, then zeros
    for (Index64 b = 0; b < B; ++b) {
      RequestResult& r = res[static_cast<std::size_t>(b)];
      const Index64 T = r.tokens;
      r.selected.insert(r.selected.end(), st.selected.begin() + b * kg, st.selected.begin() + (b + 1) * kg);
      // Mass per selected group, in selection order: the mean over heads of its tokens' probabilities.
      Index64 at = 0;
      for (Index64 j = 0; j < kg; ++j) {
        const std::int32_t g = st.selected[static_cast<std::size_t>(b * kg + j)];
        const Index64 n = std::min<Index64>(G, T - Index64{g} * G);
        float m = 0.0f;
        for (Index64 h = 0; h < Ha; ++h)
          for (Index64 i = 0; i < n; ++i) m += st.probs[static_cast<std::size_t>((b * Ha + h) * L + at + i)];
        r.selected_mass.push_back(m / static_cast<float>(Ha));
        at += n;
      }
      StepRecord rec;
      rec.pool_ms = q == 0 ? pool_ms : 0.0;
      rec.score_ms = st.score_ms;
      rec.topk_ms = st.topk_ms;
      rec.attention_ms = st.attention_ms;
      rec.token_recall = rec.block_recall = rec.mass_recall = rec.output_error = kNaN;  // set below with fidelity
      rec.layer_output_error = rec.layer_mass_recall = kNaN;
      rec.local_ms = 0;
      rec.layer_ms = rec.score_ms + rec.topk_ms + rec.attention_ms;
      rec.layer_tokens = static_cast<double>(at);
      rec.repooled_fraction = q == 0 ? 1.0 : 0.0;
      rec.context_tokens = static_cast<double>(T);
      rec.pool_hidden_ms = 0;
      r.steps.push_back(rec);
    }
    if (p.fidelity) outs[static_cast<std::size_t>(q)] = std::move(st.out);
    if (on_step) on_step(static_cast<std::size_t>(q + 1), static_cast<std::size_t>(Q));
  }

  // Fidelity per request after the batch (request by request, so `fidelity` uploads each context once):
  // the exact indexer, the block oracle and dense attention, as the pipeline measures them.
  if (p.fidelity) {
    for (Index64 b = 0; b < B; ++b) {
      const Workload& w = reqs[static_cast<std::size_t>(b)];
      RequestResult& r = res[static_cast<std::size_t>(b)];
      const Index64 T = r.tokens;
      const HeldInputs held(fidelity);  // this request's keys and values stay on the device for its steps
      StepReference ref;                // each step's exact scores, top-k and dense attention, in turn
      for (Index64 q = 0; q < Q; ++q) {
        IP_RANGE(fidelity);
        StepRecord& rec = r.steps[static_cast<std::size_t>(q)];
        const std::span<const std::int32_t> sel(r.selected.data() + q * kg, static_cast<std::size_t>(kg));
        const auto sel_tokens = tokens_of_groups(sel, G, T);
        const std::vector<float>& o = outs[static_cast<std::size_t>(q)];
        measure_step_fidelity(fidelity, w, q, sel, sel_tokens, G, p.topk_tokens, kg,
                              MatrixView<const float>(o.data() + b * Ha * Dv, Ha, Dv), ref, rec);
        rec.layer_output_error = rec.output_error;
        rec.layer_mass_recall = rec.mass_recall;
      }
    }
  }
  if (kernel_forms) *kernel_forms = dec.kernel_forms();
  return res;
}

#else

std::string batched_skip_reason(const std::vector<Workload>&, const PipelineParams&) {
  return "select.batched: this build has no CUDA";
}

double batched_device_bytes(const WorkloadSpec&, const PipelineParams&) {
  return std::numeric_limits<double>::quiet_NaN();
}

std::vector<RequestResult> run_batched(const std::vector<Workload>&, const PipelineParams&, Backend&, std::string&,
                                       const std::function<void(std::size_t, std::size_t)>&, std::string*) {
  throw Error("select.batched: this build has no CUDA");
}

#endif

}  // namespace ip::exp
