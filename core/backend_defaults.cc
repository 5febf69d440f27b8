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

namespace {
// The host storage a build of `keys` writes, sized (resize() keeps it on the rebuilds that follow).
void size_rows(MatrixView<const float> keys, const PoolParams& p, QuantizedMatrix& rows) {
  const Index64 groups = num_groups(keys.rows, effective_group_size(p));
  resize(rows, p.precision, groups * rows_per_group(p.weights.scheme), keys.cols);
}
}  // namespace

void Backend::warm_up_build(MatrixView<const float> keys, const PoolParams& p, const AccessStats*, const float*,
                            PooledIndex& out) {
  size_rows(keys, p, out.rows);
}

void Backend::warm_up_update(MatrixView<const float> keys, const PoolParams& p, const AccessStats*, const float*,
                             float, bool, IndexState& st) {
  if (st.index.tokens != 0) return;  // not a first build: the timed update reuses what is there
  size_rows(keys, p, st.index.rows);
  st.weights.resize(static_cast<std::size_t>(keys.rows));
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
