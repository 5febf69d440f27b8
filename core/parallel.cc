#include "core/parallel.h"

#include <atomic>

#include <omp.h>

namespace ip {
namespace {
std::atomic<int> g_threads{0};
}

void set_num_threads(int n) { g_threads = n < 0 ? 0 : n; }

int num_threads() {
  if (const int share = detail::task_threads(); share > 0) return share;
  const int n = g_threads.load();
  return n > 0 ? n : omp_get_max_threads();
}

int hardware_threads() { return omp_get_max_threads(); }

namespace detail {
int& task_threads() {
  thread_local int share = 0;
  return share;
}

int& fork_level() {
  thread_local int level = 0;
  return level;
}

int nesting_level() { return omp_get_level(); }

bool may_fork() { return omp_get_level() == fork_level(); }

void allow_nested_parallelism() {
  if (omp_get_max_active_levels() < 2) omp_set_max_active_levels(2);
}
}  // namespace detail

}  // namespace ip
