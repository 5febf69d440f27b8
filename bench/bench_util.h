// Timing helper shared by the benchmark programs.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace ip::bench {

// Best and median wall-clock seconds of `reps` (>= 1) calls of fn(): on a shared machine the best is
// the run least disturbed by other work.
struct Timing {
  double best = 0, median = 0;
};

template <class Fn>
Timing time_runs(int reps, Fn&& fn) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return Timing{t.front(), t[t.size() / 2]};
}

template <class Fn>
double median_seconds(int reps, Fn&& fn) {
  return time_runs(reps, fn).median;
}

}  // namespace ip::bench
