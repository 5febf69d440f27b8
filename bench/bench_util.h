// Timing helper shared by the benchmark programs.
#pragma once

#include <time.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "core/provenance.h"
#include "indexpool/git_revision.h"

namespace ip::bench {

// The first line a benchmark prints: what made its figures ("# cache_bench: git 1a2b3c4d5e6f, 2026-12-07T06:40:00Z,
// Intel Xeon ..., 2 hardware threads"), so that a figure copied from its output says its commit, date and machine.
inline std::string provenance_line(const char* tool) {
  return std::string("# ") + tool + ": git " + IP_GIT_REVISION + ", " + utc_now() + ", " + cpu_description();
}

// CPU seconds this thread has run (not counting time the scheduler gave to other processes).
inline double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Best and median wall-clock seconds of `reps` (>= 1) calls of fn(): on a shared machine the best is
// the run least disturbed by other work. cpu_best / cpu_median: the same in CPU seconds of the calling
// thread (meaningful for single-threaded work; unaffected by time the process waited for a core, still
// affected by other processes sharing the caches).
struct Timing {
  double best = 0, median = 0;
  double cpu_best = 0, cpu_median = 0;
};

template <class Fn>
Timing time_runs(int reps, Fn&& fn) {
  std::vector<double> t, c;
  for (int i = 0; i < reps; ++i) {
    const double c0 = thread_cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    c.push_back(thread_cpu_seconds() - c0);
  }
  std::sort(t.begin(), t.end());
  std::sort(c.begin(), c.end());
  return Timing{t.front(), t[t.size() / 2], c.front(), c[c.size() / 2]};
}

template <class Fn>
double median_seconds(int reps, Fn&& fn) {
  return time_runs(reps, fn).median;
}

}  // namespace ip::bench
