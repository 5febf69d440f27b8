// Kernel benchmark: one batched decode step (B = 1024 requests of 32Ki tokens: compressed scoring of
// every request in one launch, top-k per request, block-sparse attention over the selected groups),
// through the launchers directly with the batch.h layout; and block-sparse vs dense attention.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/kernel_bench.cuh"
#include "core/error.h"
#include "kernels/attention.h"
#include "kernels/score.h"
#include "kernels/topk.h"

namespace ip::kbench {
namespace {

using cuda::DeviceBuffer;

template <class T>
DeviceBuffer<T> dev(const std::vector<T>& h, const Env& env) {
  DeviceBuffer<T> d;
  d.upload(h, env.stream);
  IP_CUDA_CHECK(cudaStreamSynchronize(env.stream));
  return d;
}


// `count` distinct ascending block ids out of `blocks` (spread evenly, jittered inside each stride).
std::vector<std::int32_t> spread_blocks(long long blocks, int count, std::uint64_t seed) {
  std::vector<std::int32_t> out(count);
  const long long stride = std::max<long long>(1, blocks / count);
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int j = 0; j < count; ++j) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    out[j] = static_cast<std::int32_t>(std::min<long long>(blocks - 1, j * stride + static_cast<long long>(x % stride)));
  }
  return out;
}

}  // namespace

void decode_cases(const Env& env, std::vector<Row>& rows) {
  // --smoke: 64 requests of 256 tokens, k = 128.
  const int B = env.smoke ? 64 : 1024, G = 4, D = 128, H = 64, Ha = 16, Da = 128, Dv = 128;
  const long long T = env.scaled(32 * 1024, 256), k_tokens = std::min<long long>(2048, T / 2), kg = k_tokens / G;
  const Precision prec = Precision::fp8;
  const long long total = B * T, groups_b = (T + G - 1) / G, entries = B * groups_b;
  const std::string params = fmt::format("B={} x {} tok, G={} H={} fp8, Ha={} D={}, k={}", B, T, G, H, Ha, Da, k_tokens);
  // Declared bytes of each stage.
  const double score_b = entries * (D * 1.0 + 4.0) + entries * 4.0 + B * H * (D + 1) * 4.0;
  const double topk_b = entries * 4.0 + B * kg * 8.0;
  const double attn_b = B * k_tokens * (Da + Dv) * 4.0 + B * Ha * (Da + Dv) * 4.0 + B * kg * 4.0;

  struct State {
    DeviceBuffer<std::uint8_t> comp, ws_topk, ws_attn;
    DeviceBuffer<float> scales, q, hw, scores, vals, keys, values, aq, out;
    DeviceBuffer<long long> tok_off, ent_off, blk_off;
    DeviceBuffer<std::int32_t> ids;
    cuda::ScoreArgs s;
    cuda::TopkArgs t;
    cuda::AttentionArgs a;
  };
  std::unique_ptr<State> st;
  Row setup{"decode", "setup", params};
  bool ready = false;
  run_case(rows, setup, [&](Row& r) {
    need_memory(total * (Da + Dv) * 4.0 + entries * (D + 4.0 + 8.0) + B * kg * 8.0 + (1 << 30), env);
    st = std::make_unique<State>();
    State& x = *st;
    x.comp.resize(static_cast<std::size_t>(entries) * D);
    fill(x.comp.data(), x.comp.size(), Fill::fp8, 800, -1, 1, env);
    x.scales.resize(entries);
    fill(x.scales.data(), entries, Fill::f32, 801, 0.001f, 0.01f, env);
    x.q.resize(static_cast<std::size_t>(B) * H * D);
    fill(x.q.data(), x.q.size(), Fill::f32, 802, -1, 1, env);
    x.hw.resize(static_cast<std::size_t>(B) * H);
    fill(x.hw.data(), x.hw.size(), Fill::f32, 803, 0, 1, env);
    x.scores.resize(entries);
    x.keys.resize(static_cast<std::size_t>(total) * Da);
    fill(x.keys.data(), x.keys.size(), Fill::f32, 804, -1, 1, env);
    x.values.resize(static_cast<std::size_t>(total) * Dv);
    fill(x.values.data(), x.values.size(), Fill::f32, 805, -1, 1, env);
    x.aq.resize(static_cast<std::size_t>(B) * Ha * Da);
    fill(x.aq.data(), x.aq.size(), Fill::f32, 806, -1, 1, env);
    x.out.resize(static_cast<std::size_t>(B) * Ha * Dv);
    x.ids.resize(static_cast<std::size_t>(B) * kg);
    x.vals.resize(static_cast<std::size_t>(B) * kg);
    std::vector<long long> to(B + 1), eo(B + 1), bo(B + 1);
    for (int b = 0; b <= B; ++b) to[b] = b * T, eo[b] = b * groups_b, bo[b] = b * kg;
    x.tok_off = dev(to, env);
    x.ent_off = dev(eo, env);
    x.blk_off = dev(bo, env);
    const cuda::Batch batch{B, x.tok_off.data(), x.ent_off.data(), total, entries};
    x.s.batch = batch;
    x.s.rows = x.comp.data();
    x.s.scales = x.scales.data();
    x.s.precision = prec;
    x.s.dim = D;
    x.s.queries = x.q.data();
    x.s.head_weights = x.hw.data();
    x.s.heads = H;
    x.s.scores = x.scores.data();
    x.t.rows = B;
    x.t.row_offset = x.ent_off.data();
    x.t.max_row = groups_b;
    x.t.scores = x.scores.data();
    x.t.k = static_cast<int>(kg);
    x.t.ids = x.ids.data();
    x.t.values = x.vals.data();
    x.ws_topk.resize(std::max<std::size_t>(1, cuda::topk_workspace_bytes(B, groups_b, static_cast<int>(kg))));
    x.t.workspace = x.ws_topk.data();
    x.t.workspace_bytes = x.ws_topk.size();
    x.a.batch = batch;
    x.a.keys = x.keys.data();
    x.a.values = x.values.data();
    x.a.dim = Da;
    x.a.vdim = Dv;
    x.a.queries = x.aq.data();
    x.a.heads = Ha;
    x.a.blocks = x.ids.data();  // top-k ids are group ids relative to the request = block ids (block = group)
    x.a.block_offset = x.blk_off.data();
    x.a.block_size = G;
    x.a.out = x.out.data();
    x.a.max_attended = k_tokens;  // kg blocks of G tokens per request
    x.ws_attn.resize(std::max<std::size_t>(1, cuda::attention_workspace_bytes(x.a, k_tokens)));
    x.a.workspace = x.ws_attn.data();
    x.a.workspace_bytes = x.ws_attn.size();
    // One untimed step fills the block list the attention-only timing reads.
    cuda::score(x.s, env.stream);
    cuda::topk(x.t, env.stream);
    IP_CUDA_CHECK(cudaStreamSynchronize(env.stream));
    r.verdict = "-";
    r.note = fmt::format("{:.1f} GB resident; one instance (far above L2: no rotation)",
                         (total * (Da + Dv) * 4.0 + entries * (D + 12.0)) / 1e9);
    ready = true;
  });
  if (!ready) return;
  State& x = *st;
  auto stage = [&](const char* name, double bytes, auto&& fn) {
    run_case(rows, Row{"decode", name, params}, [&](Row& r) {
      r.bytes = bytes;
      r.t = time_runs(env, env.runs, [&](int) { fn(); });
      finish(r, env);
      const double tps = double(total) / (r.t.median_ms * 1e-3);
      r.extra = fmt::format("{:.2f} Gtok/s of context", tps / 1e9);
      r.figures = {{"context_tokens_per_s", tps}};
      r.verdict = "-";
    });
  };
  // The attention by the lanes kernel (cuda::AttnKernel::lanes, DEVICE_RUNS item 24), beside the default;
  // its whole step comes after the default's, whose row the verdict goes on.
  cuda::AttentionArgs lanes = x.a;
  lanes.kernel = cuda::AttnKernel::lanes;
  // The top-k with one block a row (cuda::TopkLaunch::block, DEVICE_RUNS item 25), beside the default.
  cuda::TopkArgs one_block = x.t;
  one_block.launch = cuda::TopkLaunch::block;
  stage("score (all requests)", score_b, [&] { cuda::score(x.s, env.stream); });
  stage("top-k (per request)", topk_b, [&] { cuda::topk(x.t, env.stream); });
  stage("top-k (per request) (one block)", topk_b, [&] { cuda::topk(one_block, env.stream); });
  stage("block-sparse attention", attn_b, [&] { cuda::attention(x.a, env.stream); });
  stage("block-sparse attention (lanes)", attn_b, [&] { cuda::attention(lanes, env.stream); });
  stage("whole step", score_b + topk_b + attn_b, [&] {
    cuda::score(x.s, env.stream);
    cuda::topk(x.t, env.stream);
    cuda::attention(x.a, env.stream);
  });
  const std::size_t whole_at = rows.size() - 1;
  stage("whole step (lanes)", score_b + topk_b + attn_b, [&] {
    cuda::score(x.s, env.stream);
    cuda::topk(x.t, env.stream);
    cuda::attention(lanes, env.stream);
  });
  stage("whole step (lanes, one block)", score_b + topk_b + attn_b, [&] {
    cuda::score(x.s, env.stream);
    cuda::topk(one_block, env.stream);
    cuda::attention(lanes, env.stream);
  });
  Row& whole = rows[whole_at];
  if (whole.verdict != "error" && whole.t.runs) {
    try {  // the device-side checks of the last step's selection (block ids, attended counts)
      cuda::attention_check(x.a, env.stream);
    } catch (const std::exception& e) {
      whole.verdict = "error";
      whole.note = e.what();
    }
  }
  if (whole.verdict != "error" && whole.t.runs) {
    whole.target = "B=1024 x 32Ki, one step";
    whole.verdict = "met";
  }
}

void attention_cases(const Env& env, std::vector<Row>& rows) {
  const int Ha = 16, Da = 128, Dv = 128, bs = 4;
  const long long T = env.scaled(env.quick ? 256 * 1024 : 1024 * 1024, 1024), k_tokens = std::min<long long>(2048, T / 2),
                  nb = k_tokens / bs;
  const std::string params = fmt::format("T={}Ki Ha={} D={} k={} (blocks of {})", T / 1024, Ha, Da, k_tokens, bs);
  const double inst = T * (Da + Dv) * 4.0;
  for (const auto kernel : {cuda::AttnKernel::automatic, cuda::AttnKernel::lanes}) {
    const bool lanes = kernel == cuda::AttnKernel::lanes;  // DEVICE_RUNS item 24
    Stats dense_t{}, sparse_t{};
    for (bool sparse : {false, true}) {
      const std::string name = std::string(sparse ? "block-sparse" : "dense") + (lanes ? " (lanes)" : "");
      run_case(rows, Row{"attention", name, params}, [&](Row& r) {
        const int n = env.rotations(inst);
        need_memory(n * inst + 4.0 * Ha * T * 4.0, env);
        std::vector<DeviceBuffer<float>> keys, values;
        for (int i = 0; i < n; ++i) {
          keys.emplace_back(static_cast<std::size_t>(T) * Da);
          fill(keys.back().data(), keys.back().size(), Fill::f32, 900 + i, -1, 1, env);
          values.emplace_back(static_cast<std::size_t>(T) * Dv);
          fill(values.back().data(), values.back().size(), Fill::f32, 950 + i, -1, 1, env);
        }
        DeviceBuffer<float> q(static_cast<std::size_t>(Ha) * Da), out(static_cast<std::size_t>(Ha) * Dv);
        fill(q.data(), q.size(), Fill::f32, 990, -1, 1, env);
        auto tok_off = dev<long long>({0, T}, env), ent_off = dev<long long>({0, (T + bs - 1) / bs}, env);
        auto blocks = dev(spread_blocks((T + bs - 1) / bs, static_cast<int>(nb), 7), env);
        auto blk_off = dev<long long>({0, nb}, env);
        cuda::AttentionArgs a;
        a.batch = {1, tok_off.data(), ent_off.data(), T, (T + bs - 1) / bs};
        a.dim = Da;
        a.vdim = Dv;
        a.queries = q.data();
        a.heads = Ha;
        a.blocks = sparse ? blocks.data() : nullptr;
        a.block_offset = sparse ? blk_off.data() : nullptr;
        a.block_size = bs;
        a.out = out.data();
        a.max_attended = sparse ? k_tokens : T;
        a.kernel = kernel;
        DeviceBuffer<std::uint8_t> ws(std::max<std::size_t>(1, cuda::attention_workspace_bytes(a, a.max_attended)));
        a.workspace = ws.data();
        a.workspace_bytes = ws.size();
        r.bytes = (sparse ? k_tokens : T) * (Da + Dv) * 4.0 + Ha * (Da + Dv) * 4.0;
        r.t = time_runs(env, env.runs, [&](int c) {
          a.keys = keys[c % n].data();
          a.values = values[c % n].data();
          cuda::attention(a, env.stream);
        });
        cuda::attention_check(a, env.stream);  // the last run's device-side checks (throws: an error row)
        finish(r, env);
        (sparse ? sparse_t : dense_t) = r.t;
        r.verdict = "-";
        r.note = fmt::format("{} rotating input copies", n);
        if (sparse && dense_t.runs) {
          const double speedup = dense_t.median_ms / r.t.median_ms;
          r.extra = fmt::format("{:.1f}x vs dense", speedup);
          r.figures = {{"speedup_vs_dense", speedup}};
        }
      });
    }
  }
}

}  // namespace ip::kbench
