// Gated linear attention cases of the kernel benchmark (issue 7, kernels/linear_attention.h): the
// hybrid layer's prefill (state only, window 512, Da = 128, Dv + 1 = 129, chunk 64), the chunked form
// with outputs over a long sequence, the decode append of a few tokens and the read-out of 4 heads.
// No target: tokens/s, and GB/s of the declared bytes (inputs read once, outputs and state written
// once) as a fraction of the copy bandwidth. The chunked kernel runs one block per 32 value columns
// (5 blocks at Dv + 1 = 129), so it is latency-bound far from the copy bandwidth: these rows say how far;
// the "(chunk-parallel)" rows run the chunks at once (a workspace of a state sum per chunk).
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/kernel_bench.cuh"
#include "kernels/linear_attention.h"

namespace ip::kbench {
namespace {

using cuda::DeviceBuffer;

struct GlaBuffers {
  DeviceBuffer<float> k, v, a, q, out, state;
};

GlaBuffers make_buffers(long long n, int dk, int dv, bool outputs, std::uint64_t seed, const Env& env) {
  GlaBuffers b;
  b.k.resize(static_cast<std::size_t>(n * dk));
  b.v.resize(static_cast<std::size_t>(n * dv));
  b.a.resize(static_cast<std::size_t>(n * dk));
  b.state.resize(static_cast<std::size_t>(dk) * dv);
  fill(b.k.data(), b.k.size(), Fill::f32, seed, 0.0f, 1.0f, env);
  fill(b.v.data(), b.v.size(), Fill::f32, seed + 1, -1.0f, 1.0f, env);
  fill(b.a.data(), b.a.size(), Fill::f32, seed + 2, 0.8f, 1.0f, env);
  fill(b.state.data(), b.state.size(), Fill::f32, seed + 3, -1.0f, 1.0f, env);
  if (outputs) {
    b.q.resize(static_cast<std::size_t>(n * dk));
    b.out.resize(static_cast<std::size_t>(n * dv));
    fill(b.q.data(), b.q.size(), Fill::f32, seed + 4, -1.0f, 1.0f, env);
  }
  return b;
}

}  // namespace

void gla_cases(const Env& env, std::vector<Row>& rows) {
  struct C {
    const char* name;
    long long n;
    int dk, dv, chunk;
    bool outputs, append;
    bool parallel = false;
  };
  // The two chunked cases also in the chunk-parallel form (GlaArgs::workspace, DEVICE_RUNS item 26).
  const C cases[] = {{"gla prefill (hybrid window)", env.scaled(512, 128), 128, 129, 64, false, false},
                     {"gla chunked + outputs", env.scaled(env.quick ? 8192 : 65536, 256), 128, 128, 64, true, false},
                     {"gla prefill (hybrid window) (chunk-parallel)", env.scaled(512, 128), 128, 129, 64, false, false,
                      true},
                     {"gla chunked + outputs (chunk-parallel)", env.scaled(env.quick ? 8192 : 65536, 256), 128, 128,
                      64, true, false, true},
                     {"gla append (decode)", 4, 128, 129, 0, false, true}};
  for (const C& c : cases) {
    Row row{"gla", c.name, fmt::format("n = {}, Dk = {}, Dv = {}{}", c.n, c.dk, c.dv,
                                       c.append ? std::string() : fmt::format(", chunk {}", c.chunk))};
    run_case(rows, row, [&](Row& r) {
      const double in_bytes = 4.0 * c.n * (2.0 * c.dk + c.dv + (c.outputs ? c.dk : 0));
      const double state_bytes = 4.0 * c.dk * c.dv;
      r.bytes = in_bytes + 2 * state_bytes + (c.outputs ? 4.0 * c.n * c.dv : 0.0);
      const int n = env.rotations(in_bytes + state_bytes);
      need_memory(n * (in_bytes + state_bytes + (c.outputs ? 4.0 * c.n * c.dv : 0.0)), env);
      std::vector<GlaBuffers> bufs;
      for (int i = 0; i < n; ++i) bufs.push_back(make_buffers(c.n, c.dk, c.dv, c.outputs, 900 + 10 * i, env));
      cuda::GlaArgs a;
      a.n = c.n;
      a.dk = c.dk;
      a.dv = c.dv;
      a.chunk = c.append ? 1 : c.chunk;
      DeviceBuffer<std::uint8_t> ws;
      if (c.parallel) {
        ws.resize(cuda::gla_chunked_workspace_bytes(c.n, c.dk, c.dv, c.chunk));
        a.workspace = ws.data();
        a.workspace_bytes = ws.size();
      }
      r.t = time_runs(env, env.runs, [&](int call) {
        GlaBuffers& b = bufs[call % n];
        a.keys = b.k.data();
        a.values = b.v.data();
        a.gates = b.a.data();
        a.state = b.state.data();
        a.queries = c.outputs ? b.q.data() : nullptr;
        a.out = c.outputs ? b.out.data() : nullptr;
        if (c.append)
          cuda::gla_append(a, env.stream);
        else
          cuda::gla_chunked(a, env.stream);
      });
      finish(r, env);
      const double tps = c.n / (r.t.median_ms * 1e-3);
      r.extra = fmt::format("{:.2f} M tokens/s", tps / 1e6);
      r.figures.emplace_back("tokens_per_s", tps);
      r.verdict = "-";
      r.note = fmt::format("{} rotating input copies; gates uniform in [0.8, 1)", n);
    });
  }
  Row row{"gla", "gla read-out (normalised)", "4 heads, Dk = 128, Dv + 1 = 129"};
  run_case(rows, row, [&](Row& r) {
    const int heads = 4, dk = 128, dv = 129;
    r.bytes = 4.0 * (dk * dv + heads * dk + heads * (dv - 1));
    DeviceBuffer<float> s(static_cast<std::size_t>(dk) * dv), q(static_cast<std::size_t>(heads) * dk),
        o(static_cast<std::size_t>(heads) * (dv - 1));
    fill(s.data(), s.size(), Fill::f32, 950, 0.1f, 1.0f, env);
    fill(q.data(), q.size(), Fill::f32, 951, -1.0f, 1.0f, env);
    cuda::GlaReadoutArgs a;
    a.state = s.data();
    a.queries = q.data();
    a.out = o.data();
    a.dk = dk;
    a.dv = dv;
    a.heads = heads;
    a.feature_scale = 0.3f;
    a.normalise = true;
    r.t = time_runs(env, env.runs, [&](int) { cuda::gla_readout(a, env.stream); });
    finish(r, env);
    r.verdict = "-";
    r.note = "state resident in L2 (one 66 KB state, as in decode)";
  });
}

}  // namespace ip::kbench
