// What the NVTX ranges cost when no tool is attached (issue 6: "with counters off, profiling adds no
// measurable time"). With counters and kernel records off the runner does not wrap the backend at all
// (experiments/profiling.cc, PointProfiler::wrap), so the ranges of core/ranges.h are all that profiling
// adds. This measures, in one run on this machine:
//   1. a push + pop of a stage range (registered string) and of a per-point range (a message formatted at
//      run time), in ns, against an empty loop of the same iterations (the baseline);
//   2. a sweep through the runner (the same code as `indexpool run`), its time per decode step, and the
//      share of it that the ranges of one step cost (at most 6 per step: pool, score, topk, attention,
//      fidelity, stats; experiments.NvtxCapture.* counts them);
//   3. the same share for a 10 us GPU stage (a top-k of one row), the shortest stage issue 5 targets.
// Run it as it is (no NVTX_INJECTION64_PATH): with a tool attached the cost is the tool's.
//
//   nvtx_bench [ITERATIONS]   (default 10,000,000 range pairs per measurement)
#include <cerrno>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "core/ranges.h"
#include "experiments/config.h"
#include "experiments/runner.h"

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

namespace {

inline void keep(const void* p) { asm volatile("" : : "r"(p) : "memory"); }

constexpr char kHelp[] =
    "usage: nvtx_bench [ITERATIONS]\n\n"
    "What IndexPool's NVTX ranges (core/ranges.h) cost with no tool attached (issue 6), on this CPU:\n"
    "  - a push + pop of a stage range (registered string), in ns per pair, against an empty loop of the same\n"
    "    iterations (the baseline, ns per iteration);\n"
    "  - a push + pop of a per-point range (a name formatted at run time), in ns per pair, against formatting\n"
    "    the name alone;\n"
    "  - a sweep through the runner (cpu backend, 16Ki tokens): us per decode step, and the share (%) of a step\n"
    "    that its ranges (at most 6 pairs) cost; the same share of a 10 us GPU stage.\n"
    "Each loop figure is the median of 7 repetitions. Run it with NVTX_INJECTION64_PATH unset: with a tool\n"
    "attached the cost measured is the tool's.\n\n"
    "  ITERATIONS  range pairs per measurement, a whole number >= 1000 (default 10000000; the per-point\n"
    "              range runs a tenth as many)\n"
    "  --help, -h  this text\n"
    "Exit status: 0, 2 on bad arguments.\n";

// Median over 7 repetitions of the ns per iteration of fn(i) for i < n.
template <class Fn>
double ns_per(long n, Fn&& fn) {
  std::vector<double> t;
  for (int rep = 0; rep < 7; ++rep) {
    const auto t0 = Clock::now();
    for (long i = 0; i < n; ++i) fn(i);
    t.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / static_cast<double>(n));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const bool help = argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h");
  char* end = nullptr;
  errno = 0;
  const long n = argc > 1 && !help ? std::strtol(argv[1], &end, 10) : 10'000'000;
  if (help || argc > 2 || n < 1000 || (end && (*end != '\0' || errno != 0))) {
    if (help) std::fputs(kHelp, stdout);
    else if (argc > 2)
      std::fprintf(stderr, "nvtx_bench: %d arguments: expected at most one, ITERATIONS (try --help)\n", argc - 1);
    else std::fprintf(stderr, "nvtx_bench: ITERATIONS '%s': expected a whole number >= 1000 (try --help)\n", argv[1]);
    return help ? 0 : 2;
  }
  std::printf("%s\n", ip::bench::provenance_line("nvtx_bench").c_str());
  if (std::getenv("NVTX_INJECTION64_PATH"))
    std::printf("note: NVTX_INJECTION64_PATH is set, so a tool is attached and this measures the tool too\n");
  std::printf("nvtx_bench: %s; %ld range pairs per measurement, median of 7\n",
              IP_HAVE_NVTX ? "NVTX is compiled into this build" : "this build has no NVTX (the ranges are no-ops)", n);

  const double base = ns_per(n, [](long i) { keep(&i); });
  const double stage = ns_per(n, [](long i) {
    const ip::prof::ScopedRange r(ip::prof::Stage::score);
    keep(&r);
    keep(&i);
  });
  const std::string key = "pool.weighting=tfidf;pool.group_size=4;pool.precision=fp8";
  const long n_msg = std::max(1000L, n / 10);
  const double msg_base = ns_per(n_msg, [&](long i) {
    const std::string s = fmt::format("point {}: {}", i, key);
    keep(s.data());
  });
  const double msg = ns_per(n_msg, [&](long i) {
    const ip::prof::ScopedRange r(std::string_view(fmt::format("point {}: {}", i, key)));
    keep(&r);
  });
  std::printf("empty loop (baseline):           %8.2f ns per iteration\n", base);
  std::printf("stage range push + pop:          %8.2f ns per pair (%.2f ns over the baseline)\n", stage, stage - base);
  std::printf("point range, formatted + pushed: %8.2f ns per pair (%.2f ns over formatting the name alone)\n", msg,
              msg - msg_base);

  // A sweep through the runner: time per decode step.
  const fs::path dir = fs::temp_directory_path() / ("ip_nvtx_bench_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string cfg = (dir / "sweep.ini").string();
  std::ofstream(cfg) << "[workload]\ntokens = 16Ki\nsteps = 16\nindex_heads = 8\nattn_heads = 2\n"
                        "[pool]\nweighting = uniform, tfidf\ngroup_size = 4\n[select]\ntopk_tokens = 512\n"
                        "[cache]\nenabled = false\n";
  const ip::exp::Sweep sweep = ip::exp::load_sweep(cfg);
  ip::exp::WorkloadCache cache;
  ip::exp::RunOptions ro;
  ro.quiet = true;
  const auto t0 = Clock::now();
  const auto rows = ip::exp::run_points(sweep, sweep.points, ro, cache, nullptr);
  const double sweep_s = std::chrono::duration<double>(Clock::now() - t0).count();
  fs::remove_all(dir);
  long steps = 0;
  for (const auto& p : sweep.points) steps += static_cast<long>(p.workload.steps) * p.workload.requests;
  const double per_step_ns = sweep_s * 1e9 / static_cast<double>(steps);
  const double over = std::max(0.0, stage - base);
  std::printf("runner: %zu points, %ld decode steps of 16Ki tokens (cpu backend) in %.3f s: %.1f us per step "
              "(workload generation included)\n",
              rows.size(), steps, sweep_s, per_step_ns * 1e-3);
  std::printf("ranges of one step (<= 6 pairs): %.1f ns = %.5f %% of a step on this CPU\n", 6 * over,
              100.0 * 6 * over / per_step_ns);
  std::printf("one range pair against a 10 us GPU stage: %.3f %%\n", 100.0 * over / 10'000.0);
  return 0;
}
