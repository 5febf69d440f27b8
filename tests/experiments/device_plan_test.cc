// Backend choice (backend = cpu | cuda | auto) and the device-memory estimate: the arithmetic and the
// skip reasons, with faked device information so they run on machines without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "core/error.h"
#include "experiments/config.h"
#include "experiments/device_plan.h"
#include "indexpool/build_config.h"
#if IP_HAVE_CUDA
#include "kernels/attention.h"
#include "kernels/topk.h"
#endif

namespace {

using namespace ip::exp;
constexpr double kMiB = 1024.0 * 1024.0;

ip::PipelineParams params(ip::Weighting w, int G, ip::Precision prec, ip::Index64 k) {
  ip::PipelineParams p;
  p.pool.weights.scheme = w;
  p.pool.group_size = G;
  p.pool.precision = prec;
  p.topk_tokens = k;
  return p;
}

TEST(DevicePlan, EstimateArithmeticByPart) {
  // T = 1000 tokens, D = 128, H = 8, Da = Dv = 64, Ha = 4, uniform G = 4 into fp8, k = 100.
  const DeviceShape s{1000, 128, 8, 64, 4, 64};
  const DeviceBytes b = estimate_device_bytes(s, params(ip::Weighting::uniform, 4, ip::Precision::fp8, 100));
  EXPECT_DOUBLE_EQ(b.keys, 1000.0 * 128 * 4 + 1000.0 * 4);
  EXPECT_DOUBLE_EQ(b.composites, 250.0 * (128 * 1 + 4));  // 250 groups, fp8 payload + fp32 scale
  EXPECT_DOUBLE_EQ(b.scores, 1000.0 * 4 + 250.0 * 4 + 8.0 * 128 * 4 + 8.0 * 4 + 2.0 * 128 * 4);
  const double attn_arrays = 1000.0 * 128 * 4 + 4.0 * 64 * 4 + 4.0 * 64 * 4 + 4.0 * 1000 * 4 + 250.0 * 4;
#if IP_HAVE_CUDA
  // The launchers' own workspaces: top-k over the longest row (1000 token scores, fidelity on: k = 100),
  // and the dense attention call's split-K workspace. Dense, T = 1000: splits of 64 tokens (the minimum),
  // 16 splits of 4 heads x (max, sum, 64 values) fp32, plus per-request bookkeeping.
  EXPECT_DOUBLE_EQ(b.topk, 100.0 * 8 + static_cast<double>(ip::cuda::topk_workspace_bytes(1, 1000, 100)));
  const double ws = b.attention - attn_arrays;
  EXPECT_GE(ws, 16.0 * 4 * (64 + 2) * 4);
  EXPECT_LE(ws, 16.0 * 4 * (64 + 2) * 4 + 4096);
#else
  EXPECT_DOUBLE_EQ(b.topk, 100.0 * 8 + 2.0 * 1000 * 8 + kMiB);
  EXPECT_DOUBLE_EQ(b.attention, attn_arrays + 4.0 * 1 * (64 + 2) * 4);  // ceil(1000 / 1024) = 1 slice
#endif
  EXPECT_DOUBLE_EQ(b.stats, 1000.0 * 12 + 250.0 * 16);
  EXPECT_DOUBLE_EQ(b.total(), b.keys + b.composites + b.scores + b.topk + b.attention + b.stats + b.updates + b.local);
  EXPECT_EQ(b.updates, 0.0);  // the plain decode loop: no index updater, no local branch
  EXPECT_EQ(b.local, 0.0);
  // Each part with its unit, sized to be read (not "0.00 GiB").
  EXPECT_EQ(b.describe().rfind("keys " + ip::exp::format_bytes(b.keys) + ", composites ", 0), 0u) << b.describe();
  EXPECT_NE(b.describe().find("; total " + ip::exp::format_bytes(b.total())), std::string::npos) << b.describe();
}

TEST(DevicePlan, EstimateFollowsSchemeAndPrecision) {
  const DeviceShape s{1001, 128, 1, 0, 0, 0};  // partial last group, no attention stage
  const auto maxmin = estimate_device_bytes(s, params(ip::Weighting::maxmin, 4, ip::Precision::bf16, 64));
  EXPECT_DOUBLE_EQ(maxmin.composites, 2.0 * 251 * 128 * 2);  // two rows per group, no scales
  EXPECT_DOUBLE_EQ(maxmin.attention, 0.0);
  // exact keeps every key whatever group_size says; k larger than T counts only T ids.
  const auto exact = estimate_device_bytes(s, params(ip::Weighting::exact, 8, ip::Precision::fp32, 5000));
  EXPECT_DOUBLE_EQ(exact.composites, 1001.0 * 128 * 4);
#if IP_HAVE_CUDA
  EXPECT_DOUBLE_EQ(exact.topk, 1001.0 * 8 + static_cast<double>(ip::cuda::topk_workspace_bytes(1, 1001, 1001)));
#else
  EXPECT_DOUBLE_EQ(exact.topk, 1001.0 * 8 + 2.0 * 1001 * 8 + kMiB);
#endif
  // Large contexts stay in double precision: 16Mi tokens of fp32 keys are 8 GiB and a bit.
  const auto big = estimate_device_bytes({16.0 * (1 << 20), 128, 64, 128, 16, 128},
                                         params(ip::Weighting::uniform, 4, ip::Precision::fp8, 2048));
  EXPECT_DOUBLE_EQ(big.keys, 16.0 * (1 << 20) * 128 * 4 + 16.0 * (1 << 20) * 4);
  EXPECT_GT(big.total(), 16.0 * 1024 * kMiB);
}

TEST(DevicePlan, HeadroomIsFivePercentPlus256MiB) {
  EXPECT_DOUBLE_EQ(device_headroom_bytes(0), 256 * kMiB);
  EXPECT_DOUBLE_EQ(device_headroom_bytes(1000 * kMiB), 50 * kMiB + 256 * kMiB);
}

TEST(DevicePlan, ChoiceAndSkipReasons) {
  const DeviceShape s{65536, 128, 8, 128, 4, 128};
  const auto p = params(ip::Weighting::uniform, 4, ip::Precision::fp32, 2048);
  DeviceInfo none;  // a build without CUDA
  none.description = "CUDA not built";
  EXPECT_EQ(plan_backend("cpu", s, p, none).backend, "cpu");
  EXPECT_EQ(plan_backend("auto", s, p, none).backend, "cpu");
  EXPECT_EQ(plan_backend("auto", s, p, none).skip_reason, "");
  const auto no_build = plan_backend("cuda", s, p, none);
  EXPECT_EQ(no_build.backend, "cuda");
  EXPECT_NE(no_build.skip_reason.find("this build has no CUDA"), std::string::npos) << no_build.skip_reason;

  DeviceInfo no_dev;  // a CUDA build on a machine without a device
  no_dev.cuda_build = true;
  no_dev.description = "no CUDA device (CUDA driver version is insufficient)";
  EXPECT_EQ(plan_backend("auto", s, p, no_dev).backend, "cpu");
  const auto r = plan_backend("cuda", s, p, no_dev).skip_reason;
  EXPECT_EQ(r, "backend = cuda: no CUDA device (CUDA driver version is insufficient)");
  no_dev.description = "";
  EXPECT_EQ(plan_backend("cuda", s, p, no_dev).skip_reason, "backend = cuda: no CUDA device ()");

  DeviceInfo gpu;  // an 80 GiB device with 70 GiB free
  gpu.cuda_build = true;
  gpu.devices = 1;
  gpu.description = "0: NVIDIA H100, sm_90, 79.6 GiB";
  gpu.total_bytes = 80 * 1024 * kMiB;
  gpu.free_bytes = 70 * 1024 * kMiB;
  EXPECT_EQ(plan_backend("cuda", s, p, gpu).skip_reason, "");
  EXPECT_EQ(plan_backend("cuda", s, p, gpu).backend, "cuda");
  EXPECT_EQ(plan_backend("auto", s, p, gpu).backend, "cuda");
  EXPECT_EQ(plan_backend("cpu", s, p, gpu).backend, "cpu");

  // At the limit (plus rounding slack) fits; one token more is skipped, for cuda and for auto alike.
  const double need = estimate_device_bytes(s, p).total();
  gpu.free_bytes = (need + 256 * kMiB) / 0.95 * (1 + 1e-12);
  EXPECT_EQ(plan_backend("cuda", s, p, gpu).skip_reason, "");
  const DeviceShape s1{65537, 128, 8, 128, 4, 128};
  const auto over = plan_backend("cuda", s1, p, gpu).skip_reason;
  EXPECT_NE(over.find("backend = cuda: estimated device memory"), std::string::npos) << over;
  EXPECT_NE(over.find("exceeds the"), std::string::npos) << over;
  // auto runs a point the device cannot hold on the CPU, and says why.
  const auto fallback = plan_backend("auto", s1, p, gpu);
  EXPECT_EQ(fallback.backend, "cpu");
  EXPECT_EQ(fallback.skip_reason, "");
  EXPECT_NE(fallback.note.find("backend = auto: estimated device memory"), std::string::npos) << fallback.note;
  EXPECT_NE(fallback.note.find("running on the CPU"), std::string::npos) << fallback.note;
  EXPECT_EQ(plan_backend("auto", s, p, gpu).note, "");
  EXPECT_EQ(plan_backend("auto", s, p, none).note, "");  // no device at all: the CPU, no note

  EXPECT_THROW(plan_backend("gpu", s, p, gpu), ip::Error);
}

TEST(DevicePlan, TopkBeyondTheGpuLimit) {
  // The GPU top-k takes k <= 4096. With fidelity on, the exact indexer asks for select.topk_tokens.
  const DeviceShape s{1 << 20, 128, 8, 0, 0, 0};
  DeviceInfo gpu;
  gpu.cuda_build = true;
  gpu.devices = 1;
  gpu.total_bytes = gpu.free_bytes = 140 * 1024 * kMiB;
  auto p = params(ip::Weighting::uniform, 4, ip::Precision::fp32, 4096);
  EXPECT_EQ(plan_backend("cuda", s, p, gpu).skip_reason, "");
  p.topk_tokens = 4097;
  const auto over = plan_backend("cuda", s, p, gpu);
  EXPECT_NE(over.skip_reason.find("backend = cuda: the GPU top-k takes k <= 4096, this point needs k = 4097"),
            std::string::npos)
      << over.skip_reason;
  EXPECT_NE(over.skip_reason.find("select.fidelity"), std::string::npos) << over.skip_reason;
  const auto fb = plan_backend("auto", s, p, gpu);
  EXPECT_EQ(fb.backend, "cpu");
  EXPECT_NE(fb.note.find("k = 4097"), std::string::npos) << fb.note;
  // Without fidelity only the groups are selected: 16384 tokens at G = 4 are 4096 groups, which fit;
  // at G = 2 they are 8192 groups, which do not.
  p.fidelity = false;
  p.topk_tokens = 16384;
  EXPECT_EQ(plan_backend("cuda", s, p, gpu).skip_reason, "");
  p.pool.group_size = 2;
  const auto groups = plan_backend("cuda", s, p, gpu).skip_reason;
  EXPECT_NE(groups.find("k = 8192 (the groups select.topk_tokens buys)"), std::string::npos) << groups;
  EXPECT_EQ(device_cannot(s, p, 0), groups.substr(std::string("backend = cuda: ").size()));
  // Adaptive groups are selected on the host: pool.group_size does not bound them, and no top-k of groups
  // runs on the device (a user audit found G = 1 points skipped for a k they never ask for); with fidelity
  // on, the exact indexer's k still does.
  p.adaptive.enabled = true;
  p.adaptive.budget_bytes_per_token = 128;
  p.pool.group_size = 1;
  EXPECT_EQ(plan_backend("cuda", s, p, gpu).skip_reason, "");
  EXPECT_EQ(device_cannot(s, p, 0), "");
  p.fidelity = true;
  EXPECT_NE(plan_backend("cuda", s, p, gpu).skip_reason.find("k = 16384 (select.topk_tokens, for the exact indexer"),
            std::string::npos);
}

// Kernel forms ([kernels]) a point's shapes or the device cannot run: cuda skips the point naming the key,
// auto runs it on the CPU saying why, before any work; forms that can run change nothing.
TEST(DevicePlan, KernelFormsThePointCannotUse) {
  DeviceInfo gpu;
  gpu.cuda_build = true;
  gpu.devices = 1;
  gpu.description = "0: NVIDIA A100, sm_80, 79.6 GiB";
  gpu.total_bytes = gpu.free_bytes = 80 * 1024 * kMiB;
  gpu.cc_major = 8;
  const DeviceShape s{65536, 128, 8, 128, 4, 128};
  auto p = params(ip::Weighting::uniform, 4, ip::Precision::fp8, 2048);
  for (auto f : {ip::ScoreForm::fp32, ip::ScoreForm::split, ip::ScoreForm::bf16}) {
    p.kernels.score = f;
    EXPECT_EQ(plan_backend("cuda", s, p, gpu).skip_reason, "") << ip::to_string(f);
  }
  // Tensor-core scoring: dims 64/128/256, no maxmin pairs.
  const DeviceShape d96{65536, 96, 8, 128, 4, 128};
  EXPECT_EQ(plan_backend("cuda", d96, p, gpu).skip_reason,
            "backend = cuda: kernels.score_math = bf16 (tensor cores) needs workload.dim 64, 128 or 256, not 96");
  p.kernels.score = ip::ScoreForm::fp32;
  EXPECT_EQ(plan_backend("cuda", d96, p, gpu).skip_reason, "");
  p.kernels.score = ip::ScoreForm::split;
  p.pool.weights.scheme = ip::Weighting::maxmin;
  const auto mm = plan_backend("auto", s, p, gpu);
  EXPECT_EQ(mm.backend, "cpu");
  EXPECT_EQ(mm.note,
            "backend = auto: kernels.score_math = split (tensor cores) does not score maxmin pairs (use fp32 or auto); "
            "running on the CPU");
  p = params(ip::Weighting::uniform, 4, ip::Precision::fp8, 2048);
  // A lane per token: attention and value dims 64/128/256 (no attention stage: nothing to refuse).
  p.kernels.attention = ip::AttentionForm::lanes;
  EXPECT_EQ(plan_backend("cuda", s, p, gpu).skip_reason, "");
  const DeviceShape v80{65536, 128, 8, 128, 4, 80};
  EXPECT_EQ(plan_backend("cuda", v80, p, gpu).skip_reason,
            "backend = cuda: kernels.attention = lanes needs workload.attn_dim and workload.value_dim 64, 128 or 256, "
            "not 128 and 80");
  EXPECT_EQ(plan_backend("cuda", DeviceShape{65536, 128, 8, 0, 0, 0}, p, gpu).skip_reason, "");
  // Clusters: sm_90 and later; a device of unknown capability is left to the launcher.
  p.kernels.attention = ip::AttentionForm::automatic;
  p.kernels.topk = ip::TopkForm::cluster;
  EXPECT_EQ(plan_backend("cuda", s, p, gpu).skip_reason,
            "backend = cuda: kernels.topk = cluster needs thread block clusters (sm_90 or later; this device is sm_8x)");
  gpu.cc_major = 9;
  EXPECT_EQ(plan_backend("cuda", s, p, gpu).skip_reason, "");
  gpu.cc_major = 0;
  EXPECT_EQ(plan_backend("cuda", s, p, gpu).skip_reason, "");
  for (auto f : {ip::TopkForm::chain, ip::TopkForm::single, ip::TopkForm::block}) {
    p.kernels.topk = f;
    gpu.cc_major = 8;
    EXPECT_EQ(plan_backend("cuda", s, p, gpu).skip_reason, "") << ip::to_string(f);
  }
}

// The chunk-parallel prefill's workspace is in the hybrid layer's estimate: chunks x (Da (Dv + 1) + Da) floats.
TEST(DevicePlan, ChunkedLinearAttentionWorkspaceIsEstimated) {
  const DeviceShape s{65536, 128, 8, 128, 4, 128};
  auto p = params(ip::Weighting::tfidf, 4, ip::Precision::fp32, 2048);
  p.hybrid.enabled = true;
  p.hybrid.window = 1000;
  p.hybrid.chunk = 64;
  const double plain = estimate_device_bytes(s, p).local;
  EXPECT_GT(plain, 0.0);
  p.kernels.linear = ip::LinearForm::sequential;
  EXPECT_EQ(estimate_device_bytes(s, p).local, plain);
  p.kernels.linear = ip::LinearForm::chunked;
  // Da = 128, chunk 64: 2 x 64 x 129 + 128 x 32 + 64 x 32 floats = 88.5 KiB > 48 KiB, so the estimate counts
  // chunks of the largest that fits 48 KiB (28 tokens: 2 x 28 x 129 + 4096 + 28 x 32 = 12120 floats).
  const double chunks = std::ceil(1000.0 / 28);
  EXPECT_DOUBLE_EQ(estimate_device_bytes(s, p).local - plain, chunks * (128.0 * 129 + 128) * 4);
  p.hybrid.chunk = 16;  // fits: 16-token chunks
  EXPECT_DOUBLE_EQ(estimate_device_bytes(s, p).local - plain, std::ceil(1000.0 / 16) * (128.0 * 129 + 128) * 4);
}

// The shape a point's device plan sizes: a generated request grows by steps x append_per_step tokens, and
// without an attention stage it has no value dim; an imported workload's shapes are its arrays' (rank-3
// attention queries give the attention heads).
TEST(DevicePlan, DeviceShapeOfASpecAndOfAWorkload) {
  ip::WorkloadSpec spec;
  spec.tokens = 1000;
  spec.steps = 8;
  spec.append_per_step = 16;
  spec.dim = 64;
  spec.index_heads = 2;
  spec.attn_dim = 32;
  spec.attn_heads = 3;
  spec.value_dim = 96;
  DeviceShape s = device_shape(spec);
  EXPECT_EQ(s.tokens, 1128.0);
  EXPECT_EQ(s.dim, 64);
  EXPECT_EQ(s.index_heads, 2);
  EXPECT_EQ(s.attn_dim, 32);
  EXPECT_EQ(s.attn_heads, 3);
  EXPECT_EQ(s.value_dim, 96);
  spec.attn_dim = 0;
  spec.append_per_step = 0;
  s = device_shape(spec);
  EXPECT_EQ(s.tokens, 1000.0);
  EXPECT_EQ(s.value_dim, 0);

  ip::Workload w;
  w.index_keys = ip::Tensor<float>({10, 4});
  w.index_queries = ip::Tensor<float>({2, 3, 4});
  w.head_weights = ip::Tensor<float>({2, 3});
  s = device_shape(w);
  EXPECT_EQ(s.tokens, 10.0);
  EXPECT_EQ(s.dim, 4);
  EXPECT_EQ(s.index_heads, 3);
  EXPECT_EQ(s.attn_dim, 0);
  EXPECT_EQ(s.value_dim, 0);
  w.attn_keys = ip::Tensor<float>({10, 5});
  w.attn_queries = ip::Tensor<float>({2, 6, 5});
  w.values = ip::Tensor<float>({10, 7});
  s = device_shape(w);
  EXPECT_EQ(s.attn_dim, 5);
  EXPECT_EQ(s.attn_heads, 6);
  EXPECT_EQ(s.value_dim, 7);
}

// Issue 7's decode loop, by hand: T = 1000, D = 128, uniform G = 4 into fp32 (250 composite rows of 512 B).
// The index updater holds keys [T, D] and one index slot (composites + per-token weights), with 1.5x headroom,
// two slots with asynchronous updates, one old key buffer more with a growing context; then snapshot mass and
// counts [T], G weights, a mean key and 256 B. Adaptive groups are rebuilt on the host: no updater.
TEST(DevicePlan, IndexUpdaterEstimateByHand) {
  const DeviceShape s{1000, 128, 8, 0, 0, 0};
  auto p = params(ip::Weighting::uniform, 4, ip::Precision::fp32, 100);
  const double keys = 1000.0 * 128 * 4, slot = 250.0 * 128 * 4 + 1000.0 * 4;
  const double rest = 1000.0 * 8 + 4.0 * 4 + 128.0 * 4 + 256;
  p.repool_tau = 0.5f;
  EXPECT_DOUBLE_EQ(estimate_device_bytes(s, p).updates, 1.5 * (keys + slot) + rest);
  EXPECT_DOUBLE_EQ(estimate_device_bytes(s, p).keys, keys + 1000.0 * 4);  // no rotating uploads
  p.async_updates = true;
  EXPECT_DOUBLE_EQ(estimate_device_bytes(s, p).updates, 1.5 * (keys + 2 * slot) + rest);
  p.async_updates = false;
  p.append_per_step = 8;
  const DeviceBytes grow = estimate_device_bytes(s, p);
  EXPECT_DOUBLE_EQ(grow.updates, 1.5 * (keys + slot) + keys + rest);
  // A growing context rotates uploads through four resident matrices of T x max(D, Da, Dv): three more of
  // T x D here (no attention stage).
  EXPECT_DOUBLE_EQ(grow.keys, keys + 1000.0 * 4 + 3 * keys);
  p.append_per_step = 0;
  p.repool_tau = -1.0f;
  p.adaptive.enabled = true;
  p.adaptive.budget_bytes_per_token = 128;  // 128 B a token buys 250 rows of 512 B
  const DeviceBytes adaptive = estimate_device_bytes(s, p);
  EXPECT_EQ(adaptive.updates, 0.0);
  EXPECT_DOUBLE_EQ(adaptive.keys, keys + 1000.0 * 4 + 3 * keys);
  EXPECT_DOUBLE_EQ(adaptive.composites, 250.0 * 512);
  p.adaptive.budget_bytes_per_token = 1024;  // would buy 2000 rows: at most one group a token
  EXPECT_DOUBLE_EQ(estimate_device_bytes(s, p).composites, 1000.0 * 512);
}

// The uploads that rotate through four resident matrices: each as wide as the widest of D, Da and Dv, less
// the index keys, attention keys and values counted elsewhere.
TEST(DevicePlan, RotatingUploadsAreFourOfTheWidestLessThoseCounted) {
  EXPECT_DOUBLE_EQ(rotating_upload_bytes({100, 128, 1, 64, 2, 256}), 100.0 * (4 * 256 - (128 + 64 + 256)) * 4);
  EXPECT_DOUBLE_EQ(rotating_upload_bytes({100, 128, 1, 0, 0, 0}), 100.0 * 3 * 128 * 4);
  EXPECT_DOUBLE_EQ(rotating_upload_bytes({100, 64, 1, 64, 1, 64}), 100.0 * 64 * 4);  // the spare
}

// The hybrid layer's local branch over a window longer than the context: the context's tokens only
// (n = T = 500). Da = 64, Dv = 32, Ha = 2: raw keys and values, prepared keys, values with a ones column and
// gates (3 Da + 2 Dv + 1 floats a token), the state Da x (Dv + 1), the queries and the output. Without an
// attention stage there is no local branch.
TEST(DevicePlan, LocalBranchEstimateByHand) {
  auto p = params(ip::Weighting::uniform, 4, ip::Precision::fp32, 100);
  p.hybrid.enabled = true;
  p.hybrid.window = 1000;
  p.kernels.linear = ip::LinearForm::sequential;
  EXPECT_DOUBLE_EQ(estimate_device_bytes({500, 128, 8, 64, 2, 32}, p).local,
                   500.0 * (3 * 64 + 2 * 32 + 1) * 4 + 64.0 * 33 * 4 + 2.0 * (64 + 32) * 4);
  EXPECT_EQ(estimate_device_bytes({500, 128, 8, 0, 0, 0}, p).local, 0.0);
}

// maxmin stores two rows per group: twice the composites and compressed scores of uniform at the same G,
// but the same number of groups, so the same access statistics and attention block list; its top-k row is
// the longer one (2 T scores).
TEST(DevicePlan, MaxminDoublesRowsNotGroups) {
  const DeviceShape s{1000, 64, 1, 32, 1, 32};
  const auto uni = estimate_device_bytes(s, params(ip::Weighting::uniform, 1, ip::Precision::bf16, 100));
  const auto mm = estimate_device_bytes(s, params(ip::Weighting::maxmin, 1, ip::Precision::bf16, 100));
  EXPECT_DOUBLE_EQ(mm.composites, 2 * uni.composites);
  EXPECT_DOUBLE_EQ(mm.scores - uni.scores, 1000.0 * 4);
  EXPECT_DOUBLE_EQ(mm.stats, uni.stats);
  EXPECT_DOUBLE_EQ(mm.stats, 1000.0 * 12 + 1000.0 * 16);
  EXPECT_DOUBLE_EQ(mm.attention, uni.attention);
#if !IP_HAVE_CUDA
  EXPECT_DOUBLE_EQ(mm.topk, 100.0 * 8 + 2.0 * 2000 * 8 + kMiB);
  EXPECT_DOUBLE_EQ(uni.topk, 100.0 * 8 + 2.0 * 1000 * 8 + kMiB);
#endif
}

// exact keeps one row a token whatever pool.group_size says: its group top-k selects k tokens, which the GPU
// top-k cannot past 4096, fidelity or not.
TEST(DevicePlan, ExactSelectsTokensWhateverTheGroupSize) {
  const DeviceShape s{1 << 20, 128, 8, 0, 0, 0};
  auto p = params(ip::Weighting::exact, 8, ip::Precision::fp32, 8192);
  p.fidelity = false;
  EXPECT_EQ(device_cannot(s, p, 0), "the GPU top-k takes k <= 4096, this point needs k = 8192 (the groups "
                                    "select.topk_tokens buys)");
  p.pool.weights.scheme = ip::Weighting::uniform;  // 1024 groups of 8: fits
  EXPECT_EQ(device_cannot(s, p, 0), "");
}

TEST(DevicePlan, BackendKeyAcceptsCpuCudaAuto) {
  const auto dir = std::filesystem::temp_directory_path() / ("ip_device_plan_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = (dir / "b.ini").string();
  std::ofstream(path) << "backend = cpu, cuda, auto\n[workload]\ntokens = 4Ki\n[select]\ntopk_tokens = 256\n";
  const Sweep sw = load_sweep(path);
  ASSERT_EQ(sw.points.size(), 3u);
  EXPECT_EQ(sw.points[0].backend, "cpu");
  EXPECT_EQ(sw.points[1].backend, "cuda");
  EXPECT_EQ(sw.points[2].backend, "auto");
  std::ofstream(path) << "backend = gpu\n";
  try {
    load_sweep(path);
    ADD_FAILURE() << "backend = gpu was accepted";
  } catch (const ip::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("b.ini:1: key 'backend': 'gpu' is not one of: cpu, cuda, auto"), std::string::npos) << m;
  }
  std::filesystem::remove_all(dir);
}

TEST(DevicePlan, QueryDeviceNeverThrows) {
  const DeviceInfo d = query_device();
  EXPECT_GE(d.devices, 0);
  EXPECT_FALSE(d.description.empty());
  if (d.devices > 0) {
    EXPECT_GT(d.total_bytes, 0.0);
  }
}

}  // namespace
