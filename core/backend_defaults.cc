// The CPU defaults of the issue-7 Backend methods (core/backend.h).
#include <chrono>
#include <limits>

#include "core/backend.h"

namespace ip {

void Backend::local_prefill(const Workload& w, Index64 begin, Index64 end, int chunk, LocalBranch& lb) {
  ip::local_prefill(w, begin, end, chunk, lb);
}

void Backend::local_append(const Workload& w, Index64 new_end, LocalBranch& lb) { ip::local_append(w, new_end, lb); }

void Backend::local_readout(const LocalBranch& lb, MatrixView<const float> queries, float* out) {
  ip::local_readout(lb, queries, out);
}

RepoolCount Backend::update_index(MatrixView<const float> keys, const PoolParams& p, const AccessStats* stats,
                                  const float* query_ref, float tau, IndexState& st) {
  return ip::update_index(keys, p, stats, query_ref, tau, st);
}

Backend::PendingUpdate Backend::begin_update_index(MatrixView<const float> keys, const PoolParams& p,
                                                   const AccessStats* stats, const float* query_ref, float tau,
                                                   IndexState& st) {
  const auto t0 = std::chrono::steady_clock::now();
  PendingUpdate u;
  u.count = update_index(keys, p, stats, query_ref, tau, st);
  u.run_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  u.hidden_ms = std::numeric_limits<double>::quiet_NaN();
  return u;
}

}  // namespace ip
