// Deterministic data parallelism: work is cut into chunks whose boundaries depend only on the
// problem size, never on the thread count, and each output element is written by exactly one chunk.
// Reductions combine per-chunk partials in chunk order.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <vector>

namespace ip {

// Threads used by the CPU backend (0 = all hardware threads). Process-wide.
void set_num_threads(int n);
int num_threads();

// Calls fn(begin, end) over [0, n) in chunks of `chunk` items, in parallel.
template <class Fn>
void parallel_for(std::int64_t n, std::int64_t chunk, Fn&& fn) {
  if (n <= 0) return;
  chunk = std::max<std::int64_t>(1, chunk);
  const std::int64_t chunks = (n + chunk - 1) / chunk;
  const int threads = static_cast<int>(std::min<std::int64_t>(num_threads(), chunks));
  if (threads <= 1) {
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

}  // namespace ip
