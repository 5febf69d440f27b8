// IndexPool kernel benchmark (issue 5): every kernel timed with CUDA events after a warm-up, median
// (and min / max) of many runs over rotating buffers larger than the L2 cache, reported as achieved
// GB/s of the bytes it is declared to move and as a fraction of the device's copy bandwidth measured
// in the same run, with the issue's targets marked met / not met. Without a device it says so and exits 0.
//
//   kernel_bench [--quick | --smoke | --shrink N] [--json FILE] [--only GROUP[,GROUP...]] [--runs N] [--warmup N] [--no-hold]
//                [--device N]
//                [--case-timeout S] [--help]
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "bench/kernel_bench.cuh"
#include "core/error.h"
#include "core/json_text.h"
#include "core/numeric.h"
#include "core/provenance.h"
#include "indexpool/build_config.h"
#include "indexpool/git_revision.h"
#include "kernels/device.h"
#include "kernels/launch.h"

namespace ip::kbench {
namespace {

__device__ __forceinline__ unsigned long long mix64(unsigned long long x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

__global__ void fill_kernel(void* p, unsigned long long n, Fill kind, unsigned long long seed, float lo, float hi) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    const float u = static_cast<float>(mix64(seed * 0x100000001B3ull ^ i) >> 40) * (1.0f / 16777216.0f);
    const float v = lo + (hi - lo) * u;
    switch (kind) {
      case Fill::f32: static_cast<float*>(p)[i] = v; break;
      case Fill::f16: static_cast<std::uint16_t*>(p)[i] = fp16_from_float(v); break;
      case Fill::bf16: static_cast<std::uint16_t*>(p)[i] = bf16_from_float(v); break;
      case Fill::fp8: static_cast<std::uint8_t*>(p)[i] = fp8e4m3_from_float(v); break;
      case Fill::u32: static_cast<std::uint32_t*>(p)[i] = static_cast<std::uint32_t>(v); break;
    }
  }
}

// NVBench's blocking kernel: one thread spins on a host-mapped flag until the host releases it, or gives
// up after timeout_ns of the GPU's global timer and says so.
__global__ void hold_kernel(const volatile int* go, volatile int* timed_out, unsigned long long timeout_ns) {
#ifndef IP_CUEMU
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  while (*go == 0) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 > timeout_ns) {
      *timed_out = 1;
      return;
    }
    __nanosleep(1000);
  }
#else
  (void)go, (void)timed_out, (void)timeout_ns;
#endif
}

__global__ void copy_float4(const float4* __restrict__ src, float4* __restrict__ dst, unsigned long long n) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x; i < n;
       i += stride)
    dst[i] = src[i];
}

void print_help() {
  std::puts(
      "kernel_bench: times IndexPool's CUDA kernels (pooling, scoring, the indexer, top-k, a batched decode step,\n"
      "block-sparse and dense attention, gated linear attention, the access-statistics update) against the\n"
      "device's copy bandwidth measured in the same run.\n\n"
      "  --quick        fewer sizes and runs (about a tenth of the time)\n"
      "  --smoke        the quick cases at 1/256 of their sizes, 1 warm-up and 2 timed runs, no target judged:\n"
      "                 checks that every case runs (seconds on a GPU; kernel_bench-emu runs it on the CPU)\n"
      "  --shrink N     the quick cases' sizes divided by N (N >= 1; with --smoke, in place of 256), no target\n"
      "                 judged unless N is 1: e.g. kernel_bench-emu's memory-access profile at larger sizes. Only\n"
      "                 the sizes: --smoke also runs the decode step at B = 64 (not 1024) and rotates 2 copies\n"
      "  --json FILE    also write the results as JSON (checked first: FILE must be writable, its folder must exist)\n"
      "  --only GROUPS  one group or several, comma-separated: pool, score, indexer, topk, decode, attention, gla,\n"
      "                 stats\n"
      "  --runs N       timed runs per case, N >= 1 (default 50, quick 15)\n"
      "  --warmup N     untimed runs before timing (default 5, quick 2; 0: none)\n"
      "  --no-hold      no blocking kernel: every run from an idle GPU (for profilers such as ncu, which run\n"
      "                 one kernel at a time, so that a held stream would wait for the blocking kernel's timeout)\n"
      "  --device N     CUDA device (default 0; one the machine does not have is a bad argument)\n"
      "  --case-timeout S  a case still running after S seconds (a kernel that never finishes) stops the run:\n"
      "                 the finished rows are printed and written to --json with \"stopped\", exit status 3\n"
      "                 (default 60 on a GPU, off on the emulator; 0: off)\n"
      "  --help         this text\n\n"
      "Each case: CUDA events around every run, median (min..max) of the runs, inputs rotated over copies\n"
      "whose total exceeds twice the L2 size. The run's launches are queued behind a blocking kernel (as NVBench\n"
      "does), so they run back to back and 'median' is the GPU's time; 'sync' is the median of as many runs\n"
      "more from an idle GPU, the CPU launching each kernel while the GPU runs (what a caller that waits for\n"
      "each call sees; it also counts launch gaps between a case's kernels). GB/s counts the bytes the kernel\n"
      "is declared to move (reads + writes, in the 'bytes' column), 1 GB = 1e9 B, 3 significant digits below\n"
      "100 GB/s. '% copy' is that over the copy bandwidth (the faster of cudaMemcpyAsync device-to-device and\n"
      "a float4 copy kernel, counting read + write bytes); the copy group also times the float4 copy kernel at\n"
      "1-256 MiB each way, the sizes of the cases: what a plain streaming kernel that moves that many bytes in\n"
      "one launch reaches (not judged).\n"
      "Exit status: 0 (also with no CUDA device: 'skipped: no CUDA device'), 1 when a case failed, 2 on bad\n"
      "arguments, 3 when a case ran past --case-timeout. Targets not met are reported, not an error.");
}

std::string json_str(const std::string& s) { return ip::json_string(s); }
std::string json_num(double x) { return std::isfinite(x) ? fmt::format("{}", x) : "null"; }  // shortest exact

std::string fmt_bytes(double b) {
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.1f} MB", b / 1e6);
  return fmt::format("{:.1f} KB", b / 1e3);
}

constexpr char kRowFormat[] = "{:<9} {:<44} {:<40} {:>10} {:>21} {:>10} {:>9} {:>9} {:>7}  {:<28} {:<18} {}";

void print_header() {
  const auto head = fmt::format(kRowFormat, "group", "case", "params", "median", "min..max", "sync", "bytes", "GB/s",
                                "% copy", "figures", "target", "verdict");
  std::printf("%s\n%s\n", head.c_str(), std::string(head.size(), '-').c_str());
}

void print_row(const Row& r, bool queued_mode) {
  std::string line;
  if (r.t.runs == 0) {
    line = fmt::format(kRowFormat, r.group, r.name, r.params, "-", "-", "-", r.bytes > 0 ? fmt_bytes(r.bytes) : "-",
                       "-", "-", r.extra, r.target, r.verdict);
  } else {
    line = fmt::format(kRowFormat, r.group, r.name, r.params, fmt_ms(r.t.median_ms),
                       fmt_ms(r.t.min_ms) + ".." + fmt_ms(r.t.max_ms), fmt_ms(r.t.sync_median_ms),
                       r.bytes > 0 ? fmt_bytes(r.bytes) : "-",
                       r.bytes > 0 ? fmt_gbs(r.gbs) : "-",
                       r.frac >= 0 ? fmt::format("{:.1f} %", 100 * r.frac) : "-", r.extra, r.target, r.verdict);
  }
  std::printf("%s\n", line.c_str());
  if (!r.note.empty() && (r.verdict == "error" || r.verdict == "skipped")) std::printf("          %s\n", r.note.c_str());
  if (queued_mode && r.t.runs > 0 && !r.t.queued)
    std::printf("          blocking kernel timed out (a call waited for the device): times of runs from an idle GPU\n");
}

void print_table(const std::vector<Row>& rows, bool queued_mode) {
  print_header();
  for (const auto& r : rows) print_row(r, queued_mode);
}

// What the sizes are divided by: --shrink N, else 256 for --smoke, else 1.
long long shrink_of(const Options& o) {
  return o.shrink ? o.shrink : o.smoke ? 256 : 1;
}

void write_json(const std::string& path, const std::string& device, const Options& o, const Env& env,
                const std::vector<Row>& rows, int met, int targets, int errors, const std::string& skipped,
                const std::string& stopped = "") {
  std::ofstream f(path);
  IP_REQUIRE(f.good(), "--json: cannot write '{}'", path);
  f << "{\n  \"tool\": \"kernel_bench\",\n  \"git_revision\": " << json_str(IP_GIT_REVISION)
    << ",\n  \"device\": " << json_str(device) << ",\n  \"quick\": " << (o.quick ? "true" : "false")
    << ",\n  \"smoke\": " << (o.smoke ? "true" : "false") << ",\n  \"shrink\": " << shrink_of(o)
    << ",\n  \"command\": " << json_str(o.command)
    << ",\n  \"started\": " << json_str(o.started);
  if (!skipped.empty()) {
    f << ",\n  \"skipped\": " << json_str(skipped) << "\n}\n";
    return;
  }
  f << ",\n  \"l2_bytes\": " << json_num(env.l2_bytes) << ",\n  \"copy_gbs\": " << json_num(env.copy_gbs)
    << ",\n  \"runs\": " << env.runs << ",\n  \"warmup\": " << env.warmup
    << ",\n  \"timing\": " << json_str(env.hold ? "queued" : "unqueued");
  if (!stopped.empty()) f << ",\n  \"stopped\": " << json_str(stopped);
  f << ",\n  \"cases\": [";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    f << (i ? "," : "") << "\n    {\"group\": " << json_str(r.group) << ", \"name\": " << json_str(r.name)
      << ", \"params\": " << json_str(r.params) << ", \"runs\": " << r.t.runs
      << ", \"median_ms\": " << json_num(r.t.median_ms) << ", \"min_ms\": " << json_num(r.t.min_ms)
      << ", \"max_ms\": " << json_num(r.t.max_ms) << ", \"sync_median_ms\": " << json_num(r.t.sync_median_ms)
      << ", \"queued\": " << (r.t.queued ? "true" : "false")
      << ", \"bytes\": " << json_num(r.bytes)
      << ", \"gbs\": " << json_num(r.gbs) << ", \"frac_of_copy\": " << json_num(r.frac >= 0 ? r.frac : NAN);
    for (const auto& [k, v] : r.figures) f << ", " << json_str(k) << ": " << json_num(v);
    f << ", \"target\": " << json_str(r.target) << ", \"verdict\": " << json_str(r.verdict)
      << ", \"note\": " << json_str(r.note) << "}";
  }
  f << "\n  ],\n  \"summary\": {\"cases\": " << rows.size() << ", \"errors\": " << errors
    << ", \"targets\": " << targets << ", \"targets_met\": " << met << "}\n}\n";
}

// Targets met, targets judged and errors among the rows.
struct Tally {
  int met = 0, targets = 0, errors = 0;
};
Tally tally(const std::vector<Row>& rows) {
  Tally t;
  for (const auto& r : rows) {
    if (r.verdict == "met" || r.verdict == "not met") ++t.targets;
    if (r.verdict == "met") ++t.met;
    if (r.verdict == "error") ++t.errors;
  }
  return t;
}

// The hang guard's state (guard_case_begins in kernel_bench.cuh).
struct Guard {
  std::mutex m;
  std::condition_variable cv;
  double timeout_s = 0;  // 0: off
  bool quit = false;
  struct Open {
    std::string what;
    std::chrono::steady_clock::time_point since;  // the case's start, or the end of the last case inside it
  };
  std::vector<Open> open;  // begun and not ended, innermost last (an indexer case runs inside its score case)
  std::vector<Row> done;   // rows as they ended
  // What the report needs.
  Options o;
  const Env* env = nullptr;
  std::string device;
};

Guard& guard() {
  static Guard g;
  return g;
}

std::string case_label(const Row& r) { return fmt::format("{} / {} ({})", r.group, r.name, r.params); }

// With g.m held: report the case that does not end and the finished rows, then end the process.
[[noreturn]] void guard_stop(Guard& g, double seconds) {
  const std::string why =
      fmt::format("case '{}' still running after {:.3g} s (--case-timeout {}): a kernel that does not finish?",
                  g.open.back().what, seconds, g.timeout_s);
  std::printf("\nkernel_bench: %s\nthe rows finished before it:\n", why.c_str());
  print_table(g.done, g.env->hold != nullptr);
  const auto [met, targets, errors] = tally(g.done);
  std::printf("kernel_bench: summary: stopped: %s; copy %s GB/s; cases %zu finished; errors %d; targets met %d of %d\n",
              why.c_str(), fmt_gbs(g.env->copy_gbs).c_str(), g.done.size(), errors, met, targets);
  if (!g.o.json.empty()) {
    try {
      write_json(g.o.json, g.device, g.o, *g.env, g.done, met, targets, errors, "", why);
      std::printf("json: %s (the finished rows)\n", g.o.json.c_str());
    } catch (const std::exception& e) {
      std::printf("kernel_bench: %s\n", e.what());
    }
  }
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(3);  // exit() would run destructors that wait for the device
}

void guard_watch() {
  Guard& g = guard();
  std::unique_lock<std::mutex> lk(g.m);
  const auto tick = std::chrono::duration<double>(std::min(1.0, g.timeout_s / 4));
  while (!g.quit) {
    g.cv.wait_for(lk, tick);
    if (g.quit || g.open.empty()) continue;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - g.open.back().since).count();
    if (s > g.timeout_s) guard_stop(g, s);
  }
}

// Runs the watchdog for as long as it lives (none when timeout_s is 0).
class GuardThread {
 public:
  GuardThread(double timeout_s, const Options& o, const Env& env, const std::string& device) {
    Guard& g = guard();
    std::lock_guard<std::mutex> lk(g.m);
    g.timeout_s = timeout_s;
    g.o = o;
    g.env = &env;
    g.device = device;
    if (timeout_s > 0) t_ = std::thread(guard_watch);
  }
  ~GuardThread() {
    Guard& g = guard();
    {
      std::lock_guard<std::mutex> lk(g.m);
      g.quit = true;
    }
    g.cv.notify_all();
    if (t_.joinable()) t_.join();
  }
  GuardThread(const GuardThread&) = delete;
  GuardThread& operator=(const GuardThread&) = delete;

 private:
  std::thread t_;
};

}  // namespace

#ifndef IP_CUEMU
StreamHold::StreamHold() {
  void* p = nullptr;
  IP_CUDA_CHECK(cudaHostAlloc(&p, 2 * sizeof(int), cudaHostAllocMapped));
  flags_ = static_cast<volatile int*>(p);
  flags_[0] = 0;
  flags_[1] = 0;
  void* d = nullptr;
  IP_CUDA_CHECK(cudaHostGetDevicePointer(&d, p, 0));
  dev_flags_ = static_cast<int*>(d);
}

StreamHold::~StreamHold() { cudaFreeHost(const_cast<int*>(flags_)); }
#else  // the emulator has no mapped host memory, and its launches run at once: nothing to hold
StreamHold::StreamHold() { throw std::logic_error("kernel_bench: no blocking kernel on the emulator"); }
StreamHold::~StreamHold() = default;
#endif

void StreamHold::hold(cudaStream_t stream) {
  flags_[0] = 0;
  flags_[1] = 0;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  IP_LAUNCH(1, 1, 0, stream, hold_kernel)(dev_flags_, dev_flags_ + 1, static_cast<unsigned long long>(kTimeoutS * 1e9));
  IP_CUDA_CHECK(cudaGetLastError());
}

void StreamHold::release() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  flags_[0] = 1;
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

bool StreamHold::timed_out() const { return flags_[1] != 0; }

void guard_case_begins(const Row& r) {
  Guard& g = guard();
  std::lock_guard<std::mutex> lk(g.m);
  g.open.push_back({case_label(r), std::chrono::steady_clock::now()});
}

void guard_case_ends(const Row& r) {
  Guard& g = guard();
  std::lock_guard<std::mutex> lk(g.m);
  if (!g.open.empty()) g.open.pop_back();
  if (!g.open.empty()) g.open.back().since = std::chrono::steady_clock::now();
  g.done.push_back(r);
}

void guard_row(const Row& r) {
  Guard& g = guard();
  std::lock_guard<std::mutex> lk(g.m);
  g.done.push_back(r);
}

double Env::free_bytes() const {
  std::size_t fr = 0, tot = 0;
  IP_CUDA_CHECK(cudaMemGetInfo(&fr, &tot));
  return static_cast<double>(fr);
}

int Env::rotations(double bytes) const {
  const double budget = 0.6 * free_bytes();
  if (smoke) return 2;
  int n = std::max(2, static_cast<int>(std::ceil(2.0 * l2_bytes / std::max(1.0, bytes))));
  n = std::min(n, 64);
  while (n > 1 && n * bytes > budget) --n;
  return n;
}

void fill(void* p, std::size_t n, Fill kind, std::uint64_t seed, float lo, float hi, const Env& env) {
  if (!n) return;
  const unsigned blocks = static_cast<unsigned>(std::min<std::size_t>((n + 255) / 256, 32ull * env.sms));
  IP_LAUNCH(blocks, 256, 0, env.stream, fill_kernel)(p, n, kind, seed, lo, hi);
  IP_CUDA_CHECK(cudaGetLastError());
}

void copy_kernel(const void* src, void* dst, std::size_t n, const Env& env) {
  const std::size_t v = n / 16;
  const unsigned blocks = static_cast<unsigned>(std::min<std::size_t>((v + 255) / 256, 8ull * env.sms));
  IP_LAUNCH(blocks, 256, 0, env.stream, copy_float4)(static_cast<const float4*>(src), static_cast<float4*>(dst), v);
  IP_CUDA_CHECK(cudaGetLastError());
}

// The float4 copy kernel at the sizes of the cases (not judged; after the reference, so '% copy' is of
// it): a kernel that streams a case's bytes in one launch pays the same ramp, first round trip and tail
// as a copy of those bytes, so this row says how near the reference a plain streaming kernel of that size
// gets (a case below its size's row loses to more than its size).
// Sources and destinations rotate over copies larger than twice the L2, as the cases' inputs do.
void copy_size_cases(const Env& env, std::vector<Row>& rows) {
  for (const std::size_t mib : {1ull, 4ull, 16ull, 64ull, 256ull}) {
    const std::size_t n = std::max<std::size_t>(4096, ((mib << 20) / static_cast<std::size_t>(env.shrink)) & ~std::size_t{15});
    const int rot = env.rotations(2.0 * n);
    ip::cuda::DeviceBuffer<std::uint8_t> src(n * rot), dst(n * rot);
    fill(src.data(), n * rot / 4, Fill::f32, 2, -1, 1, env);
    Row r{"copy", "float4 copy kernel (case-sized)", fmt_bytes(static_cast<double>(n)) + " each way"};
    r.t = time_runs(env, env.runs, [&](int i) {
      const std::size_t at = static_cast<std::size_t>(i % rot) * n;
      copy_kernel(src.data() + at, dst.data() + at, n, env);
    });
    r.bytes = 2.0 * n;
    finish(r, env);
    r.verdict = "-";
    r.note = fmt::format("{} buffers rotated; a plain kernel streaming {} in one launch", rot,
                         fmt_bytes(r.bytes));
    guard_row(r);
    rows.push_back(r);
  }
}

void finish(Row& r, const Env& env) {
  if (r.t.runs > 0 && r.t.median_ms > 0 && r.bytes > 0) {
    r.gbs = r.bytes / (r.t.median_ms * 1e-3) / 1e9;
    if (env.copy_gbs > 0) r.frac = r.gbs / env.copy_gbs;
  }
}

std::string fmt_ms(double ms) {
  if (ms < 1.0) return fmt::format("{:.1f} us", ms * 1e3);
  if (ms < 1000.0) return fmt::format("{:.3f} ms", ms);
  return fmt::format("{:.2f} s", ms * 1e-3);
}

}  // namespace ip::kbench

int main(int argc, char** argv) {
  using namespace ip::kbench;
  Options o;
  o.command = ip::command_line(argc, argv);
  o.started = ip::utc_now();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "kernel_bench: %s needs a value (try --help)\n", name);
        std::exit(2);
      }
      return argv[++i];
    };
    auto count = [&](const char* name) {
      const std::string v = value(name);
      char* end = nullptr;
      const long x = std::strtol(v.c_str(), &end, 10);
      if (!end || *end || x < 0 || x > 100000) {
        std::fprintf(stderr, "kernel_bench: %s '%s' is not a count in 0..100000\n", name, v.c_str());
        std::exit(2);
      }
      return static_cast<int>(x);
    };
    if (a == "--help" || a == "-h") {
      print_help();
      return 0;
    } else if (a == "--quick") o.quick = true;
    else if (a == "--smoke") o.smoke = o.quick = true;
    else if (a == "--shrink") {
      o.shrink = count("--shrink");
      if (o.shrink < 1) {
        std::fprintf(stderr, "kernel_bench: --shrink 0: the sizes are divided by N, which must be at least 1\n");
        return 2;
      }
      o.quick = true;
    }
    else if (a == "--json") o.json = value("--json");
    else if (a == "--only") o.only = value("--only");
    else if (a == "--runs") {
      o.runs = count("--runs");
      if (o.runs < 1) {
        std::fprintf(stderr, "kernel_bench: --runs 0: a case needs at least 1 timed run\n");
        return 2;
      }
    }
    else if (a == "--warmup") o.warmup = count("--warmup");
    else if (a == "--no-hold") o.no_hold = true;
    else if (a == "--device") o.device = count("--device");
    else if (a == "--case-timeout") {
      const std::string v = value("--case-timeout");
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      if (v.empty() || !end || *end || !(x >= 0 && x <= 86400)) {
        std::fprintf(stderr, "kernel_bench: --case-timeout '%s' is not a number of seconds in 0..86400\n", v.c_str());
        return 2;
      }
      o.case_timeout_s = x;
    }
    else {
      std::fprintf(stderr, "kernel_bench: unknown argument '%s' (try --help)\n", a.c_str());
      return 2;
    }
  }
  static const char* kGroups[] = {"pool", "score", "indexer", "topk", "decode", "attention", "gla", "stats"};
  // --only takes one group or several, comma-separated.
  std::vector<std::string> only;
  for (std::size_t at = 0; !o.only.empty() && at <= o.only.size();) {
    const std::size_t comma = std::min(o.only.find(',', at), o.only.size());
    only.push_back(o.only.substr(at, comma - at));
    at = comma + 1;
  }
  for (const std::string& g : only)
    if (std::none_of(std::begin(kGroups), std::end(kGroups), [&](const char* k) { return g == k; })) {
      std::fprintf(stderr,
                   "kernel_bench: --only '%s': '%s' is not one of: pool, score, indexer, topk, decode, attention, gla, "
                   "stats\n",
                   o.only.c_str(), g.c_str());
      return 2;
    }
  // --json: a path that cannot be written fails now, not after every case has run. Opened for appending, so an
  // existing file is left as it is until the results replace it (a new one stays empty until then).
  if (!o.json.empty() && !std::ofstream(o.json, std::ios::app).good()) {
    std::fprintf(stderr, "kernel_bench: --json '%s': cannot write this file (does its folder exist?): %s\n",
                 o.json.c_str(), std::strerror(errno));
    return 2;
  }
  try {
    if (ip::cuda::device_count() == 0) {
      std::string why = ip::cuda::describe_devices();  // "no CUDA device (reason)" or "no CUDA device"
      const std::string prefix = "no CUDA device (";
      if (why.rfind(prefix, 0) == 0 && why.back() == ')') why = why.substr(prefix.size(), why.size() - prefix.size() - 1);
      std::printf("kernel_bench: skipped: no CUDA device (%s)\n", why.c_str());
      if (!o.json.empty()) write_json(o.json, why, o, Env{}, {}, 0, 0, 0, "no CUDA device");
      return 0;
    }
    if (o.device >= ip::cuda::device_count()) {
      std::fprintf(stderr, "kernel_bench: --device %d: this machine has %d CUDA device(s), 0..%d\n", o.device,
                   ip::cuda::device_count(), ip::cuda::device_count() - 1);
      return 2;
    }
    IP_CUDA_CHECK(cudaSetDevice(o.device));
    cudaDeviceProp prop{};
    IP_CUDA_CHECK(cudaGetDeviceProperties(&prop, o.device));
    int l2 = 0, driver = 0, runtime = 0;
    IP_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, o.device));
    IP_CUDA_CHECK(cudaDriverGetVersion(&driver));
    IP_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
    ip::cuda::Stream stream;
    Env env;
    env.stream = stream;
#ifndef IP_CUEMU
    StreamHold hold;  // the emulator runs each launch at once: nothing to queue behind
    if (!o.no_hold) env.hold = &hold;
#endif
    env.device = o.device;
    env.sms = prop.multiProcessorCount;
    env.l2_bytes = l2;
    env.quick = o.quick;
    env.smoke = o.smoke;
    env.shrink = shrink_of(o);
    env.runs = o.runs ? o.runs : (o.smoke ? 2 : o.quick ? 15 : 50);
    env.warmup = o.warmup >= 0 ? o.warmup : (o.smoke ? 1 : o.quick ? 2 : 5);
    const std::string device =
        fmt::format("{}, sm_{}{}, {} SMs, {:.1f} GiB, L2 {:.1f} MiB, CUDA driver API {}.{}, runtime {}.{}", prop.name, prop.major,
                    prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1073741824.0, l2 / 1048576.0,
                    driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
    std::printf("kernel_bench (git %s): %s\n%s mode: %d timed runs per case after %d warm-up runs, %s\n",
                IP_GIT_REVISION, device.c_str(), o.smoke ? "smoke" : o.quick ? "quick" : "full", env.runs, env.warmup,
                env.hold ? "launches queued behind a blocking kernel ('sync': as many more from an idle GPU)"
                         : "each run from an idle GPU (no blocking kernel)");
    if (o.smoke)
      std::printf("smoke: sizes divided by %lld and targets not judged: this run checks that every case runs, "
                  "its times say nothing\n",
                  env.shrink);
    else if (env.shrink > 1)
      std::printf("sizes divided by %lld (--shrink): targets not judged\n", env.shrink);
#ifdef IP_CUEMU
    constexpr double kDefaultCaseTimeoutS = 0;  // the emulator reports its own deadlocks; its speed varies
#else
    constexpr double kDefaultCaseTimeoutS = 60;  // the longest case took about 1 s on an H200 (2026-12-04)
#endif
    const double case_timeout_s = o.case_timeout_s >= 0 ? o.case_timeout_s : kDefaultCaseTimeoutS;
    if (case_timeout_s > 0) std::printf("hang guard: a case still running after %g s stops the run (--case-timeout)\n", case_timeout_s);
    std::printf("\n");
    GuardThread hang_guard(case_timeout_s, o, env, device);

    // Copy bandwidth, the reference of every '% copy' figure.
    std::vector<Row> rows;
    {
      const std::size_t n = ((o.quick ? 512ull : 2048ull) << 20) / static_cast<std::size_t>(env.shrink);
      ip::cuda::DeviceBuffer<std::uint8_t> src(n), dst(n);
      fill(src.data(), n / 4, Fill::f32, 1, -1, 1, env);
      Row m{"copy", "cudaMemcpyAsync D2D", fmt_bytes(static_cast<double>(n)) + " each way"};
      m.t = time_runs(env, env.runs, [&](int) {
        IP_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), n, cudaMemcpyDeviceToDevice, env.stream));
      });
      m.bytes = 2.0 * n;
      Row k{"copy", "float4 copy kernel", m.params};
      k.t = time_runs(env, env.runs, [&](int) { copy_kernel(src.data(), dst.data(), n, env); });
      k.bytes = 2.0 * n;
      finish(m, env);
      finish(k, env);
      env.copy_gbs = std::max(m.gbs, k.gbs);
      for (Row* r : {&m, &k}) {
        r->frac = r->gbs / env.copy_gbs;
        r->verdict = "-";
        r->note = "reference: the faster of the two";
        guard_row(*r);
        rows.push_back(*r);
      }
    }
    std::printf("copy bandwidth (reference): %s GB/s (read + write bytes)\n", fmt_gbs(env.copy_gbs).c_str());
    copy_size_cases(env, rows);
    std::printf("\nas each group ends:\n");
    print_header();
    std::fflush(stdout);

    // A group that leaves the CUDA context broken (a sticky error) stops the remaining groups.
    auto want = [&](const char* g) { return only.empty() || std::find(only.begin(), only.end(), g) != only.end(); };
    bool broken = false;
    // Each group's rows are printed as soon as it ends (with its wall time), so a run stopped by a time
    // limit still shows what it measured; the full table follows at the end.
    auto guarded = [&](const char* group, auto&& fn) {
      if (broken) return;
      const std::size_t first = rows.size();
      const auto t0 = std::chrono::steady_clock::now();
      try {
        fn();
      } catch (const std::exception& e) {
        broken = true;
        Row r{group, "(remaining cases not run)", ""};
        r.verdict = "error";
        r.note = e.what();
        rows.push_back(r);
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (o.smoke || env.shrink > 1)  // at a fraction of the sizes, or on 2 runs, a target means nothing
        for (std::size_t i = first; i < rows.size(); ++i)
          if (rows[i].verdict == "met" || rows[i].verdict == "not met" || rows[i].verdict == "pending")
            rows[i].verdict = "not judged";
      std::printf("[%s: %zu cases in %.1f s wall]\n", group, rows.size() - first, s);
      for (std::size_t i = first; i < rows.size(); ++i) print_row(rows[i], env.hold != nullptr);
      std::fflush(stdout);
    };
    if (want("pool")) guarded("pool", [&] { pool_cases(env, rows); });
    if (want("score") || want("indexer"))
      guarded("score", [&] {
        std::vector<Row> sc;
        try {
          score_cases(env, sc);
        } catch (...) {
          for (auto& r : sc) rows.push_back(std::move(r));
          throw;
        }
        for (auto& r : sc)
          if (want(r.group.c_str())) rows.push_back(std::move(r));
      });
    if (want("topk")) guarded("topk", [&] { topk_cases(env, rows); });
    if (want("decode")) guarded("decode", [&] { decode_cases(env, rows); });
    if (want("attention")) guarded("attention", [&] { attention_cases(env, rows); });
    if (want("gla")) guarded("gla", [&] { gla_cases(env, rows); });
    if (want("stats")) guarded("stats", [&] { stats_cases(env, rows); });

    const auto [met, targets, errors] = tally(rows);
    std::printf("\n");
    print_table(rows, env.hold != nullptr);
    std::printf(
        "\nTimes: median of %d runs (min..max) with CUDA events, %s; sync: median of %d runs from an idle GPU. "
        "bytes: declared per run (reads + writes); GB/s = bytes / median, 1 GB = 1e9 B; %% copy: of %s GB/s.\n",
        env.runs, env.hold ? "launches queued behind a blocking kernel" : "each from an idle GPU", env.runs,
        fmt_gbs(env.copy_gbs).c_str());
    std::printf("kernel_bench: summary: copy %s GB/s; cases %zu; errors %d; targets met %d of %d%s\n",
                fmt_gbs(env.copy_gbs).c_str(), rows.size(), errors, met, targets,
                o.smoke || env.shrink > 1
                    ? fmt::format(" ({}sizes / {}, targets not judged)", o.smoke ? "smoke run: " : "", env.shrink)
                          .c_str()
                    : "");
    if (!o.json.empty()) {
      write_json(o.json, device, o, env, rows, met, targets, errors, "");
      std::printf("json: %s\n", o.json.c_str());
    }
    return errors ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kernel_bench: error: %s\n", e.what());
    return 1;
  }
}
