#include "core/parallel.h"

#include <atomic>

#include <omp.h>

namespace ip {
namespace {
std::atomic<int> g_threads{0};
}

void set_num_threads(int n) { g_threads = n < 0 ? 0 : n; }

int num_threads() {
  const int n = g_threads.load();
  return n > 0 ? n : omp_get_max_threads();
}

}  // namespace ip
