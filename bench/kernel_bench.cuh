// The kernel benchmark's measuring kit (NVBench habits): CUDA-event timing of each run after a warm-up,
// with the run's launches queued behind a blocking kernel so they run back to back (the GPU's time, not
// the CPU's launch rate), median / min / max of many runs, the same from an idle GPU (what a synchronous
// caller waits), rotating input buffers whose total exceeds the L2 cache so every run reads from DRAM,
// device-side random fills, and the report rows (table and JSON).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>
#include <fmt/format.h>
#include <stdexcept>

#include "core/error.h"
#include "kernels/device_buffer.h"

namespace ip::kbench {

struct Options {
  bool quick = false;
  bool smoke = false;    // --smoke: every case at 1/256 of its size, no target judged (kernel_bench-emu, CI)
  long long shrink = 0;  // --shrink N: the quick cases' sizes divided by N, no target judged (0: the mode's)
  std::string json;      // --json FILE ("" = none)
  std::string only;      // --only GROUP[,GROUP...]: the case groups to run (pool, score, indexer, topk, decode,
                         // attention, gla, stats); "" all
  int device = 0;
  int runs = 0;     // 0: the mode's default
  int warmup = -1;  // < 0: the mode's default
  // --no-hold: no blocking kernel; every run from an idle GPU (under a profiler, which serializes launches,
  // a held stream would make each case wait for the blocking kernel's timeout).
  bool no_hold = false;
  // --case-timeout S: a case running longer than S seconds stops the benchmark (see guard_case_begins);
  // < 0: the default (60 s on a GPU, off on the emulator), 0: off.
  double case_timeout_s = -1;
  // How the run was made, for its JSON: the command line (arguments in single quotes where they need them)
  // and when it started (UTC, ISO 8601).
  std::string command, started;
};

// NVBench's blocking kernel: hold() launches a kernel that spins until release() (or a timeout), so the
// launches made in between queue behind it and then run without gaps. Host-mapped flags.
class StreamHold {
 public:
  static constexpr double kTimeoutS = 2.0;
  StreamHold();
  ~StreamHold();
  StreamHold(const StreamHold&) = delete;
  StreamHold& operator=(const StreamHold&) = delete;
  void hold(cudaStream_t stream);
  void release();
  // After the stream has synchronized: whether the kernel gave up waiting (the run's launches took longer
  // than kTimeoutS to queue, or blocked on a full queue), which makes the run's time meaningless.
  bool timed_out() const;

 private:
  volatile int* flags_ = nullptr;  // [0] go, [1] timed out
  int* dev_flags_ = nullptr;
};

// What every case needs: the stream, the device's sizes, the run counts and the reference bandwidth.
struct Env {
  cudaStream_t stream = nullptr;
  int device = 0;
  int sms = 0;
  double l2_bytes = 0;
  int runs = 50, warmup = 5;
  bool quick = false;
  // --smoke: token counts divided by `shrink` (256), two rotating copies, targets not judged. The cases
  // still run every launcher with the same shapes of arguments, so a smoke run (on the CPU emulator, or
  // in seconds on a GPU) shows that the benchmark itself works before a full run spends device time.
  bool smoke = false;
  long long shrink = 1;
  double copy_gbs = 0;  // reference copy bandwidth (read + write bytes), GB/s
  // Null on the emulator (its launches run at once): runs are timed unqueued.
  StreamHold* hold = nullptr;
  // A token (or row) count of a case at this run's size: n, or n / shrink but at least `at_least`.
  long long scaled(long long n, long long at_least = 1) const { return std::max(at_least, n / shrink); }
  // Free device memory now (bytes).
  double free_bytes() const;
  // How many copies of an instance of `bytes` to rotate through: enough that their total exceeds
  // twice the L2 size (at least 2), within `budget` bytes (a fraction of free memory) and 64 copies.
  int rotations(double bytes) const;
};

struct Stats {
  double median_ms = 0, min_ms = 0, max_ms = 0;  // launches queued (env.hold), else as sync_median_ms
  double sync_median_ms = 0;                     // each run from an idle GPU, the CPU launching while the GPU runs
  int runs = 0;
  bool queued = false;  // median..max are of queued runs (false: no blocking kernel, or it timed out)
};

inline double median_of(std::vector<double>& t) {
  std::sort(t.begin(), t.end());
  const std::size_t n = t.size();
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

// `warmup` untimed calls, then `runs` calls of fn(i) (i counts every call, so i % rotations picks the
// buffer), each bracketed by its own pair of events on env.stream: first with the launches queued behind
// env.hold (when there is one), then `runs` more from an idle GPU. Checks for launch errors.
template <class Fn>
Stats time_runs(const Env& env, int runs, Fn&& fn) {
  cuda::Event a, b;
  int call = 0;
  for (int w = 0; w < env.warmup; ++w) fn(call++);
  IP_CUDA_CHECK(cudaGetLastError());
  IP_CUDA_CHECK(cudaStreamSynchronize(env.stream));
  std::vector<double> t, u;
  t.reserve(runs);
  u.reserve(runs);
  bool queued = env.hold != nullptr;
#if defined(IP_CUEMU)
  // (the emulator's memory-access profile) the timed calls by number; the warm-ups came first
  const auto mark = [&] { ::cuemu::memprof_run(call - env.warmup); };
#else
  const auto mark = [] {};
#endif
  for (int r = 0; queued && r < runs; ++r) {
    env.hold->hold(env.stream);
    a.record(env.stream);
    mark();
    fn(call++);  // a call that waits for the device (cudaFree, a copy to the host) waits for the timeout
    b.record(env.stream);
    env.hold->release();
    b.sync();
    queued = !env.hold->timed_out();
    t.push_back(b.ms_since(a));
  }
  for (int r = 0; r < runs; ++r) {
    a.record(env.stream);
    mark();
    fn(call++);
    b.record(env.stream);
    b.sync();
    u.push_back(b.ms_since(a));
  }
#if defined(IP_CUEMU)
  ::cuemu::memprof_run(-1);
#endif
  IP_CUDA_CHECK(cudaGetLastError());
  if (!queued) t = u;
  Stats s;
  s.queued = queued;
  s.runs = static_cast<int>(t.size());
  s.median_ms = median_of(t);  // sorts t
  s.min_ms = t.front();
  s.max_ms = t.back();
  s.sync_median_ms = median_of(u);
  return s;
}

// Device-side fills (deterministic: element i of seed s is a hash of (s, i)).
enum class Fill { f32, f16, bf16, fp8, u32 };
// Uniform values in [lo, hi) stored as `kind` (u32: the integer part).
void fill(void* p, std::size_t n, Fill kind, std::uint64_t seed, float lo, float hi, const Env& env);
// `n` bytes copied from src to dst by a plain float4 copy kernel (n a multiple of 16).
void copy_kernel(const void* src, void* dst, std::size_t n, const Env& env);

// One row of the report. Every number has its unit in its name.
struct Row {
  std::string group;   // pool, score, indexer, topk, decode, attention, copy
  std::string name;    // what ran
  std::string params;  // sizes and types
  Stats t;
  double bytes = 0;     // bytes the kernel is declared to move (reads + writes), per run
  double gbs = 0;       // bytes / median time, GB/s (1e9 B/s)
  double frac = -1;     // gbs / reference copy bandwidth (-1: not a bandwidth case)
  std::string extra;    // other figures, with units (tokens/s, TFLOP/s, speedup)
  std::vector<std::pair<std::string, double>> figures;  // the same, for JSON
  std::string target;   // the issue's target ("" none)
  std::string verdict;  // met | not met | - | error | skipped
  std::string note;     // error or skip reason, buffers rotated
};

// Fills gbs and frac from bytes and t.
void finish(Row& r, const Env& env);
std::string fmt_ms(double ms);
// A rate as printed (GB/s, Mtok/s): whole numbers from 100 up, else 3 significant digits (the emulator's are far
// below 1).
inline std::string fmt_gbs(double v) { return v >= 100 ? fmt::format("{:.0f}", v) : fmt::format("{:.3g}", v); }

// The case groups (kernel_bench_cases.cu). Each appends its rows; an error in one case becomes an
// "error" row and the group goes on unless the CUDA context is broken (then it rethrows).
void pool_cases(const Env& env, std::vector<Row>& rows);
void score_cases(const Env& env, std::vector<Row>& rows);
void topk_cases(const Env& env, std::vector<Row>& rows);
void decode_cases(const Env& env, std::vector<Row>& rows);
void attention_cases(const Env& env, std::vector<Row>& rows);
void gla_cases(const Env& env, std::vector<Row>& rows);  // kernel_bench_gla.cu (issue 7)
void stats_cases(const Env& env, std::vector<Row>& rows);

// Throws (skip) when `bytes` would not fit in 90% of the free device memory.
inline void need_memory(double bytes, const Env& env) {
  const double fr = env.free_bytes();
  if (bytes > 0.9 * fr)
    throw std::length_error(fmt::format("needs {:.1f} GB of device memory, {:.1f} GB free", bytes / 1e9, fr / 1e9));
}

// Hang guard (--case-timeout). A kernel that never finishes (a missing barrier, a spin that waits for
// nothing) leaves the CUDA call that waits for it blocked for ever, and the run with it: a device check
// would lose the whole time box and every figure not yet printed. run_case tells the guard when a case
// begins and ends; a watchdog thread that sees one case running longer than the limit prints the case and
// every finished row, writes those rows to the --json file with "stopped" naming the case, and ends the
// process with status 3 (the driver then tears down the context and the kernel with it).
void guard_case_begins(const Row& r);
void guard_case_ends(const Row& r);  // the row as reported
void guard_row(const Row& r);        // a row made outside run_case (the copy reference)

// Runs one case body; its errors become an "error" row (a memory shortfall: "skipped"). A CUDA error
// that leaves the context unusable is rethrown after the row is recorded.
template <class Body>
void run_case(std::vector<Row>& rows, Row r, Body&& body) {
  guard_case_begins(r);
#if defined(IP_CUEMU)
  ::cuemu::memprof_label(r.group + " | " + r.name + " | " + r.params);  // (the emulator's memory-access profile)
#endif
  try {
    body(r);
  } catch (const std::length_error& e) {
    r.verdict = "skipped";
    r.note = e.what();
    r.t = {};
  } catch (const std::exception& e) {
    r.verdict = "error";
    r.note = e.what();
    r.t = {};
    const cudaError_t sticky = cudaDeviceSynchronize();
    if (sticky != cudaSuccess) {
      guard_case_ends(r);
      rows.push_back(r);
      throw Error(fmt::format("the CUDA context is unusable after '{} {}': {}", r.group, r.name,
                              cudaGetErrorString(sticky)));
    }
    cudaGetLastError();
  }
  guard_case_ends(r);
  rows.push_back(std::move(r));
}

}  // namespace ip::kbench
