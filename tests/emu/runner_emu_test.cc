// The runner end to end with backend = cuda on the CPU emulator of the kernels (indexpool-emu) against
// backend = cpu (indexpool): the same sweep must give the same points, recalls, errors and cache hits.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>
#include <fmt/format.h>

#include "experiments/batched_run.h"
#include "experiments/config.h"
#include "experiments/device_plan.h"
#include "experiments/h5.h"

namespace {

namespace fs = std::filesystem;

int run(const std::string& bin, const std::string& args, std::string& out) {
  FILE* p = popen((bin + " " + args + " 2>&1").c_str(), "r");
  if (!p) return -1;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), p)) out += buf.data();
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Runs the config `text` with indexpool (backend = cpu) into dir/cpu.h5 and with indexpool-emu
// (backend = cuda) into dir/emu.h5.
void run_cpu_and_emu(const fs::path& dir, const std::string& text) {
  fs::create_directories(dir);
  const std::string cfg = (dir / "sweep.ini").string();
  std::ofstream(cfg) << text;
  std::string out;
  ASSERT_EQ(run(IP_INDEXPOOL_BIN,
                "run " + cfg + " --quiet --set backend=cpu --set output.path=" + (dir / "cpu.h5").string(), out),
            0)
      << out;
  ASSERT_EQ(run(IP_INDEXPOOL_EMU_BIN,
                "run " + cfg + " --quiet --set backend=cuda --set output.path=" + (dir / "emu.h5").string(), out),
            0)
      << out;
}

TEST(RunnerOnEmulator, CudaBackendPointsMatchCpuPoints) {
  const fs::path dir = fs::temp_directory_path() / ("ip_runner_emu_" + std::to_string(::getpid()));
  // Two requests of different lengths, four schemes, two precisions, the cache model on.
  ASSERT_NO_FATAL_FAILURE(run_cpu_and_emu(
      dir, "[workload]\ntokens = 3Ki\nsteps = 3\nindex_heads = 8\nattn_heads = 2\nrequests = 2\n"
           "length_spread = 0.5\n[pool]\nweighting = uniform, tfidf, cosine, exact\n"
           "precision = fp32, int8\n[select]\ntopk_tokens = 256\n"));
  ip::h5::File fc((dir / "cpu.h5").string(), "r"), fe((dir / "emu.h5").string(), "r");
  const ip::h5::Table c = fc.read_table("points"), e = fe.read_table("points");
  ASSERT_EQ(c.rows(), 8u);
  ASSERT_EQ(e.rows(), c.rows());
  for (std::size_t i = 0; i < c.rows(); ++i) {
    SCOPED_TRACE("point " + std::to_string(i) + ": " + c.column("pool.weighting").strings[i] + " " +
                 c.column("pool.precision").strings[i]);
    EXPECT_EQ(e.column("status").strings[i], "ok") << e.column("reason").strings[i];
    EXPECT_EQ(e.column("run_backend").strings[i], "cuda");
    EXPECT_NE(e.column("run_device").strings[i].find("cuemu"), std::string::npos) << e.column("run_device").strings[i];
    EXPECT_EQ(c.column("run_backend").strings[i], "cpu");
    for (const char* col : {"index_bytes_per_token", "macs_per_query", "tokens"})
      EXPECT_EQ(e.column(col).floats[i], c.column(col).floats[i]) << col;
    // Scores differ from the CPU's in the last bits (other summation orders), which may swap tokens
    // whose scores tie to within that; recalls and errors may move by that much and no more.
    for (const char* col : {"token_recall", "block_recall", "mass_recall", "output_error", "cache_hit_rate"})
      EXPECT_NEAR(e.column(col).floats[i], c.column(col).floats[i], 2e-3) << col;
  }
  fs::remove_all(dir);
}

// select.batched = true: on cuda the four requests of each point decode together through the batched
// decoder (one pool launch, then one score, top-k and attention launch per step for all of them); the cpu
// backend runs them one after another. Every point must agree, and the cuda points must have run batched
// (their stage times are the batch's, the same for every request, so the batch_step ranges are checked
// in emu.NvtxCapture instead; here the selections' consequences are compared).
TEST(RunnerOnEmulator, BatchedCudaPointsMatchSequentialCpuPoints) {
  const fs::path dir = fs::temp_directory_path() / ("ip_runner_emu_batched_" + std::to_string(::getpid()));
  ASSERT_NO_FATAL_FAILURE(run_cpu_and_emu(
      dir, "[workload]\ntokens = 3Ki\nsteps = 3\nindex_heads = 8\nattn_heads = 2\nrequests = 4\n"
           "length_spread = 0.5\n[pool]\nweighting = uniform, exact, positional, maxmin\n"
           "precision = fp32, int8\n[select]\ntopk_tokens = 256\nbatched = true\n"));
  ip::h5::File fc((dir / "cpu.h5").string(), "r"), fe((dir / "emu.h5").string(), "r");
  const ip::h5::Table c = fc.read_table("points"), e = fe.read_table("points");
  ASSERT_EQ(c.rows(), 8u);
  ASSERT_EQ(e.rows(), c.rows());
  for (std::size_t i = 0; i < c.rows(); ++i) {
    SCOPED_TRACE("point " + std::to_string(i) + ": " + c.column("key").strings[i]);
    EXPECT_EQ(e.column("status").strings[i], "ok") << e.column("reason").strings[i];
    EXPECT_EQ(e.column("run_backend").strings[i], "cuda");
    for (const char* col : {"index_bytes_per_token", "exact_bytes_per_token", "macs_per_query", "tokens"})
      EXPECT_EQ(e.column(col).floats[i], c.column(col).floats[i]) << col;
    for (const char* col : {"token_recall", "block_recall", "mass_recall", "output_error", "cache_hit_rate",
                            "layer_output_error", "layer_mass_recall", "layer_tokens_per_step"})
      EXPECT_NEAR(e.column(col).floats[i], c.column(col).floats[i], 2e-3) << col;
    // Every request of a batched step carries the batch's times: one pool launch for the whole point.
    const std::string g = "point_" + std::string(6 - std::to_string(i).size(), '0') + std::to_string(i) + "/steps";
    const ip::h5::Table st = fe.read_table(g);
    ASSERT_EQ(st.rows(), 12u);  // 4 requests x 3 steps
    for (std::size_t r = 0; r < st.rows(); ++r) {
      EXPECT_EQ(st.column("score_ms").floats[r], st.column("score_ms").floats[r % 3]) << "row " << r;
      EXPECT_EQ(st.column("pool_ms").floats[r] > 0, st.column("step").ints[r] == 0) << "row " << r;
    }
  }
  fs::remove_all(dir);
}

// A batch that does not fit the device (the emulated one made 320 MiB): backend = auto runs that point on
// the cpu, one request after another, saying why; backend = cuda skips it with the same reason. A
// single request still runs batched on the device.
TEST(RunnerOnEmulator, BatchedPointThatDoesNotFitRunsOnTheCpuUnderAutoAndIsSkippedUnderCuda) {
  const fs::path dir = fs::temp_directory_path() / ("ip_runner_emu_fit_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string cfg = (dir / "sweep.ini").string();
  std::ofstream(cfg) << "[workload]\ntokens = 16Ki\nsteps = 2\nindex_heads = 8\nattn_heads = 2\nrequests = 1, 4\n"
                        "[select]\ntopk_tokens = 256\nbatched = true\n[cache]\nenabled = false\n";
  for (const std::string backend : {"auto", "cuda"}) {
    SCOPED_TRACE("backend = " + backend);
    const std::string h5 = (dir / (backend + ".h5")).string();
    std::string out;
    ASSERT_EQ(run("CUEMU_DEVICE_MEMORY=335544320 " IP_INDEXPOOL_EMU_BIN,
                  "run " + cfg + " --quiet --set backend=" + backend + " --set output.path=" + h5, out),
              0)
        << out;
    ip::h5::File f(h5, "r");
    const ip::h5::Table t = f.read_table("points");
    ASSERT_EQ(t.rows(), 2u);
    EXPECT_EQ(t.column("status").strings[0], "ok") << t.column("reason").strings[0];
    EXPECT_EQ(t.column("run_backend").strings[0], "cuda");
    const std::string why = t.column("reason").strings[1];
    EXPECT_NE(why.find("select.batched: the batch does not fit the device: needs "), std::string::npos) << why;
    if (backend == "auto") {
      EXPECT_EQ(t.column("status").strings[1], "ok");
      EXPECT_EQ(t.column("run_backend").strings[1], "cpu");
      EXPECT_NE(why.find("running on the CPU"), std::string::npos) << why;
      EXPECT_EQ(t.column("tokens").floats[1], t.column("tokens").floats[0]);
    } else {
      EXPECT_EQ(t.column("status").strings[1], "skipped");
      EXPECT_EQ(why.rfind("backend = cuda: select.batched", 0), 0u) << why;
    }
  }
  fs::remove_all(dir);
}

// Runs `cfg` (one point) with backend = cuda on the emulator into dir/r.h5 and returns cuemu's peak device
// bytes (CUEMU_STATS_LOG); -1 (with a test failure) when the run or the log fails.
double peak_device_bytes(const fs::path& dir, const std::string& cfg) {
  const std::string log = (dir / "stats.txt").string();
  fs::remove(log);
  std::string out;
  const int rc = run("CUEMU_STATS_LOG=" + log + " " IP_INDEXPOOL_EMU_BIN,
                     "run " + cfg + " --quiet --overwrite --set backend=cuda --set output.path=" + (dir / "r.h5").string(),
                     out);
  EXPECT_EQ(rc, 0) << out;
  std::ifstream in(log);
  std::string key;
  double peak = -1;
  in >> key >> peak;
  EXPECT_EQ(key, "peak_device_bytes");
  return rc == 0 && key == "peak_device_bytes" ? peak : -1;
}

// The device memory a cuda point takes (cuemu's peak, CUEMU_STATS_LOG) against the estimate the runner
// checks before it starts the point (experiments/device_plan.h): the estimate must not be below it, or a
// point "that fits" could fail to allocate on a device; nor far above it. Every scheme and precision
// family, fidelity off, and each issue-7 feature (which the estimate did not cover before 2026-12-04:
// the hybrid layer's point took 1.55x its estimate).
TEST(RunnerOnEmulator, DeviceEstimateCoversWhatAPointTakes) {
  const fs::path dir = fs::temp_directory_path() / ("ip_runner_emu_peak_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  struct Case {
    const char* name;
    std::string config;
  };
  const std::string base = "[select]\ntopk_tokens = 512\n[workload]\ntokens = 6Ki\nsteps = 3\nindex_heads = 8\n"
                           "attn_heads = 2\n";
  const std::vector<Case> cases = {
      {"uniform fp32", base + "[pool]\nweighting = uniform\nprecision = fp32\n"},
      {"tfidf int8", base + "[pool]\nweighting = tfidf\nprecision = int8\n"},
      {"hybrid fp8", base + "[pool]\nweighting = hybrid\nprecision = fp8\n"},
      {"cosine bf16", base + "[pool]\nweighting = cosine\nprecision = bf16\n"},
      {"maxmin fp16", base + "[pool]\nweighting = maxmin\nprecision = fp16\n"},
      {"exact", base + "[pool]\nweighting = exact\n"},
      {"no fidelity", base + "[select]\nfidelity = false\n[pool]\nweighting = uniform\n"},
      // Issue 7: the hybrid layer's local branch, incremental re-pooling, growing contexts, asynchronous
      // updates on a second stream, adaptive group sizes.
      {"hybrid layer", base + "[pool]\nweighting = tfidf\n[hybrid]\nenabled = true\nwindow = 256\nchunk = 64\n"},
      {"hybrid layer, chunks in parallel", base + "[pool]\nweighting = tfidf\n[hybrid]\nenabled = true\nwindow = 2048\n"
                                                   "chunk = 16\n[kernels]\nlinear_attention = chunked\n"},
      {"repool tau", base + "[pool]\nweighting = hybrid\nrepool_tau = 0.05\n"},
      {"growing", base + "append_per_step = 16\n[pool]\nweighting = tfidf\nrepool_tau = 0\n"},
      {"async int8", base + "[pool]\nweighting = tfidf\nprecision = int8\nasync_updates = true\nrepool_tau = 0.05\n"},
      {"adaptive", base + "[pool]\nweighting = tfidf\nprecision = fp32\n[adaptive]\nenabled = true\nbudget = 128\n"
                         "segment = 256\n"},
      // Index keys wider than the attention arrays, four steps: without a hold every upload takes the least
      // recently used of the backend's four slots, and each grows to the widest matrix (a user audit found
      // 1.9x the estimate here); a budget that buys a row a token (G = 1 however large pool.group_size).
      {"adaptive, wide keys, G = 1",
       "[select]\ntopk_tokens = 256\n[workload]\ntokens = 4Ki\nsteps = 4\ndim = 256\nindex_heads = 1\n"
       "attn_dim = 64\nvalue_dim = 64\nattn_heads = 1\n[pool]\nweighting = uniform\ngroup_size = 16\n"
       "[adaptive]\nenabled = true\nbudget = 1024\nsegment = 256\n[cache]\nenabled = false\n"},
      {"growing, wide keys",
       "[select]\ntopk_tokens = 256\n[workload]\ntokens = 4Ki\nsteps = 4\ndim = 256\nindex_heads = 1\n"
       "attn_dim = 64\nvalue_dim = 64\nattn_heads = 1\nappend_per_step = 16\n[pool]\nweighting = tfidf\n"
       "repool_tau = 0\n[cache]\nenabled = false\n"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string cfg = (dir / "sweep.ini").string();
    std::ofstream(cfg) << c.config;
    const double peak = peak_device_bytes(dir, cfg);
    ASSERT_GT(peak, 0);
    const auto sw = ip::exp::load_sweep(cfg, {"backend=cuda"});
    ASSERT_EQ(sw.points.size(), 1u);
    const auto& p = sw.points[0];
    const double est = ip::exp::estimate_device_bytes(ip::exp::device_shape(p.workload), p.pipeline).total();
    std::printf("%-12s peak %.0f B, estimate %.0f B (%.3f)\n", c.name, peak, est, est / peak);
    EXPECT_GE(est, peak);
    EXPECT_LE(est, 1.3 * peak);  // and not so far above it that points that fit are skipped
  }
  fs::remove_all(dir);
}

// select.batched with fidelity: the decoder and, request after request, the fidelity pass (each request under
// a hold of its own, so the backend's upload slots rotate). The estimate list prints and the run's fit check
// uses (batched_device_bytes) must cover the peak (a user audit found 41.5 MB reserved for a 44.5 MB peak).
TEST(RunnerOnEmulator, BatchedDeviceEstimateCoversTheDecoderAndItsFidelityPass) {
  const fs::path dir = fs::temp_directory_path() / ("ip_runner_emu_batched_peak_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  struct Case {
    const char* name;
    const char* dims;
  };
  // Requests of one length (the estimate is the longest request's): the fidelity pass's uploads fill every
  // slot (without the rotation the estimate was 2 MiB short of the peak in the first case).
  for (const Case& c : {Case{"D = Da = Dv = 128", "dim = 128\nattn_dim = 128\nvalue_dim = 128\n"},
                        Case{"D = 64, Da = 128, Dv = 32", "dim = 64\nattn_dim = 128\nvalue_dim = 32\n"}}) {
    SCOPED_TRACE(c.name);
    const char* dims = c.dims;
    const std::string cfg = (dir / "sweep.ini").string();
    std::ofstream(cfg) << "[workload]\ntokens = 4Ki\nsteps = 2\nrequests = 3\nindex_heads = 4\n"
                          "attn_heads = 2\n"
                       << dims << "[pool]\nweighting = uniform\n[select]\ntopk_tokens = 256\nbatched = true\n"
                                  "[cache]\nenabled = false\n";
    const double peak = peak_device_bytes(dir, cfg);
    ASSERT_GT(peak, 0);
    {
      ip::h5::File f((dir / "r.h5").string(), "r");
      ASSERT_EQ(f.read_table("points").column("status").strings, (std::vector<std::string>{"ok"}));
    }
    const auto sw = ip::exp::load_sweep(cfg, {"backend=cuda"});
    ASSERT_EQ(sw.points.size(), 1u);
    const double est = ip::exp::batched_device_bytes(sw.points[0].workload, sw.points[0].pipeline);
    std::printf("batched, %s: peak %.0f B, estimate %.0f B (%.3f)\n", c.name, peak, est, est / peak);
    EXPECT_GE(est, peak);
    EXPECT_LE(est, 1.3 * peak);
  }
  fs::remove_all(dir);
}

}  // namespace

namespace {

std::string point_group(std::size_t i) {
  const std::string n = std::to_string(i);
  return "point_" + std::string(6 - n.size(), '0') + n;
}

}  // namespace

// [kernels]: every form of top-k, attention, scoring and the hybrid layer's prefill through the whole
// runner on the emulated device. Each point must give the cpu's selections (up to the rounding its math
// documents) and say in run_kernels which forms its calls ran; the cpu points say the forms did not apply.
TEST(RunnerOnEmulator, KernelFormsGiveTheCpuResultsAndAreRecorded) {
  const fs::path dir = fs::temp_directory_path() / ("ip_runner_emu_forms_" + std::to_string(::getpid()));
  ASSERT_NO_FATAL_FAILURE(run_cpu_and_emu(
      dir, "[workload]\ntokens = 3Ki\nsteps = 3\nindex_heads = 8\nattn_heads = 2\nrequests = 2\n"
           "length_spread = 0.5\n[pool]\nprecision = fp8\n[select]\ntopk_tokens = 256\n"
           "[kernels]\ntopk = chain, single, cluster, block\nattention = tiles, lanes\nscore_math = fp32, split\n"));
  ip::h5::File fc((dir / "cpu.h5").string(), "r"), fe((dir / "emu.h5").string(), "r");
  const ip::h5::Table c = fc.read_table("points"), e = fe.read_table("points");
  ASSERT_EQ(c.rows(), 16u);
  ASSERT_EQ(e.rows(), c.rows());
  const char* topk[] = {"chain", "single", "cluster", "block"};
  const char* attn[] = {"tiles", "lanes"};
  const char* math[] = {"fp32", "f16x2"};  // split on fp8 rows is f16x2 (rows exact in f16)
  for (std::size_t i = 0; i < c.rows(); ++i) {
    SCOPED_TRACE("point " + std::to_string(i) + ": " + c.column("key").strings[i]);
    EXPECT_EQ(e.column("status").strings[i], "ok") << e.column("reason").strings[i];
    EXPECT_EQ(e.column("run_backend").strings[i], "cuda");
    EXPECT_EQ(e.column("reason").strings[i], "");
    EXPECT_EQ(c.column("reason").strings[i],
              "the kernels.* forms apply to the cuda backend only; this point ran on the cpu");
    for (const char* col : {"token_recall", "block_recall", "mass_recall", "output_error", "cache_hit_rate"})
      EXPECT_NEAR(e.column(col).floats[i], c.column(col).floats[i], 2e-3) << col;
    // Grid order: topk slowest, then attention, then score_math.
    const std::string forms = fe.attr_string(point_group(i), "run_kernels");
    const std::string want = fmt::format("attention {}, exact score {}, score {}, top-k {}", attn[(i / 2) % 2],
                                         i % 2 ? "bf16x3" : "fp32", math[i % 2], topk[i / 4]);
    EXPECT_EQ(forms, want);
    EXPECT_EQ(fc.attr_string(point_group(i), "run_kernels"), "");
  }
  // `indexpool inspect` lists the forms the points ran, with their counts (none for the cpu file).
  std::string shown, cpu_shown;
  ASSERT_EQ(run(IP_INDEXPOOL_BIN, "inspect " + (dir / "emu.h5").string(), shown), 0) << shown;
  EXPECT_NE(shown.find("kernel forms the points ran (attribute run_kernels of point_<index>):\n  1 point: attention "
                       "lanes, exact score bf16x3, score f16x2, top-k block\n"),
            std::string::npos)
      << shown;
  ASSERT_EQ(run(IP_INDEXPOOL_BIN, "inspect " + (dir / "cpu.h5").string(), cpu_shown), 0) << cpu_shown;
  EXPECT_EQ(cpu_shown.find("kernel forms"), std::string::npos) << cpu_shown;
  fs::remove_all(dir);
}

// One-product bf16 scoring is recorded and stays close to the cpu; the chunk-parallel prefill gives the
// sequential one's bits; the batched decoder runs the forms asked for; forms a point's shapes cannot use
// skip it under backend = cuda naming the key (here a value dim of 80 with a lane per token).
// Runs the config `text` with indexpool-emu (backend = cuda) into dir/r.h5 and returns that path.
std::string run_emu_into(const fs::path& dir, const std::string& text) {
  const std::string cfg = (dir / "sweep.ini").string(), h5 = (dir / "r.h5").string();
  std::ofstream(cfg) << text;
  std::string out;
  const int rc = run(IP_INDEXPOOL_EMU_BIN, "run " + cfg + " --quiet --overwrite --set backend=cuda --set output.path=" + h5, out);
  EXPECT_EQ(rc, 0) << out;
  return h5;
}

TEST(RunnerOnEmulator, KernelFormsOfScoringLinearAttentionAndBatchedPoints) {
  const fs::path dir = fs::temp_directory_path() / ("ip_runner_emu_forms2_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  // bf16 scoring.
  std::string h5 = run_emu_into(dir, "[workload]\ntokens = 3Ki\nsteps = 3\nindex_heads = 8\nattn_heads = 2\n[pool]\nprecision = bf16\n"
                        "[select]\ntopk_tokens = 256\n[kernels]\nscore_math = auto, bf16\n");
  {
    ip::h5::File f(h5, "r");
    const ip::h5::Table t = f.read_table("points");
    ASSERT_EQ(t.rows(), 2u);
    EXPECT_EQ(f.attr_string(point_group(0), "run_kernels"),
              "attention tiles, exact score bf16x3, score bf16x2, top-k chain");
    EXPECT_EQ(f.attr_string(point_group(1), "run_kernels"), "attention tiles, exact score bf16, score bf16, top-k chain");
    for (const char* col : {"token_recall", "mass_recall"})
      EXPECT_NEAR(t.column(col).floats[1], t.column(col).floats[0], 0.05) << col;
  }
  // The hybrid layer's prefill: chunks in order or in parallel, the same bits.
  h5 = run_emu_into(dir, "[workload]\ntokens = 3Ki\nsteps = 3\nindex_heads = 8\nattn_heads = 2\n[pool]\nweighting = tfidf\n"
                        "[select]\ntopk_tokens = 256\n[hybrid]\nenabled = true\nwindow = 700\nchunk = 64\n"
                        "[kernels]\nlinear_attention = sequential, chunked\n");
  {
    ip::h5::File f(h5, "r");
    const ip::h5::Table t = f.read_table("points");
    ASSERT_EQ(t.rows(), 2u);
    EXPECT_NE(f.attr_string(point_group(0), "run_kernels").find("linear attention sequential"), std::string::npos);
    EXPECT_NE(f.attr_string(point_group(1), "run_kernels").find("linear attention chunked"), std::string::npos);
    for (const char* col : {"layer_output_error", "layer_mass_recall", "token_recall", "output_error"})
      EXPECT_EQ(t.column(col).floats[1], t.column(col).floats[0]) << col;
  }
  // Batched: the decoder's forms, then the fidelity calls' on the backend; and the skip.
  h5 = run_emu_into(dir, "[workload]\ntokens = 3Ki\nsteps = 2\nindex_heads = 8\nattn_heads = 2\nrequests = 3\n"
                        "value_dim = 128, 80\n[select]\ntopk_tokens = 256\nbatched = true\n"
                        "[kernels]\ntopk = block\nattention = lanes\n");
  {
    ip::h5::File f(h5, "r");
    const ip::h5::Table t = f.read_table("points");
    ASSERT_EQ(t.rows(), 2u);
    EXPECT_EQ(t.column("status").strings[0], "ok") << t.column("reason").strings[0];
    EXPECT_EQ(f.attr_string(point_group(0), "run_kernels"),
              "batched decoder: attention lanes, score bf16x3, top-k block; attention lanes, exact score bf16x3, "
              "top-k block");
    EXPECT_EQ(t.column("status").strings[1], "skipped");
    EXPECT_EQ(t.column("reason").strings[1],
              "backend = cuda: kernels.attention = lanes needs workload.attn_dim and workload.value_dim 64, 128 or "
              "256, not 128 and 80");
  }
  fs::remove_all(dir);
}
