// Deterministic data parallelism: work is cut into chunks whose boundaries depend only on the
// problem size, never on the thread count, and each output element is written by exactly one chunk.
// Reductions combine per-chunk partials in chunk order.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <vector>

namespace ip {

// Threads used by the CPU backend (0 = all hardware threads). Process-wide; inside parallel_tasks, a
// task's own share.
void set_num_threads(int n);
int num_threads();
// What 0 threads means: OpenMP's default (all hardware threads unless OMP_NUM_THREADS says otherwise).
int hardware_threads();

namespace detail {
// parallel_tasks: this thread's share while it runs a task (0: none, num_threads() is the process-wide one).
int& task_threads();
// The OpenMP nesting level at which this thread's parallel_for may start threads: 0, or inside a task the
// task's level (a parallel_for inside another one's chunk runs on its thread, whatever OMP_NESTED says).
int& fork_level();
int nesting_level();  // omp_get_level()
bool may_fork();
void allow_nested_parallelism();
}  // namespace detail

// Calls fn(begin, end) over [0, n) in chunks of `chunk` items, in parallel.
template <class Fn>
void parallel_for(std::int64_t n, std::int64_t chunk, Fn&& fn) {
  if (n <= 0) return;
  chunk = std::max<std::int64_t>(1, chunk);
  const std::int64_t chunks = (n + chunk - 1) / chunk;
  const int threads = static_cast<int>(std::min<std::int64_t>(num_threads(), chunks));
  if (threads <= 1 || !detail::may_fork()) {
    for (std::int64_t c = 0; c < chunks; ++c) fn(c * chunk, std::min(n, (c + 1) * chunk));
    return;
  }
  // An exception must not leave an OpenMP region: keep the one from the lowest chunk and rethrow.
  std::exception_ptr error;
  std::int64_t error_chunk = chunks;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (std::int64_t c = 0; c < chunks; ++c) {
    try {
      fn(c * chunk, std::min(n, (c + 1) * chunk));
    } catch (...) {
#pragma omp critical(ip_parallel_error)
      if (c < error_chunk) {
        error_chunk = c;
        error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

// Calls fn(i) for every i in [0, n), min(n, num_threads() / threads_per_task) of them at once (at least
// one), each task's own parallel_for calls on threads_per_task threads (num_threads() says so inside it).
// Since parallel_for's chunks never depend on the thread count, every task gives the bits it gives alone.
// The lowest task's exception is rethrown after all have run.
template <class Fn>
void parallel_tasks(std::int64_t n, int threads_per_task, Fn&& fn) {
  if (n <= 0) return;
  threads_per_task = std::clamp(threads_per_task, 1, num_threads());
  const int at_once = static_cast<int>(std::min<std::int64_t>(n, std::max(1, num_threads() / threads_per_task)));
  std::exception_ptr error;
  std::int64_t error_task = n;
  auto run = [&](std::int64_t i) {
    int &share = detail::task_threads(), &level = detail::fork_level();
    const int before = share, before_level = level;
    share = threads_per_task;
    level = detail::nesting_level();
    try {
      fn(i);
    } catch (...) {
#pragma omp critical(ip_parallel_error)
      if (i < error_task) {
        error_task = i;
        error = std::current_exception();
      }
    }
    share = before;
    level = before_level;
  };
  if (at_once <= 1) {
    for (std::int64_t i = 0; i < n; ++i) run(i);
  } else {
    if (threads_per_task > 1) detail::allow_nested_parallelism();
#pragma omp parallel for schedule(dynamic, 1) num_threads(at_once)
    for (std::int64_t i = 0; i < n; ++i) run(i);
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace ip
