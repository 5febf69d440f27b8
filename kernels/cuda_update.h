// Incremental index updates on the GPU (issue 7, core/incremental.h) for the CUDA backend
// (kernels/cuda_backend.cc): the pooling kernels in update mode (kernels/pool.h PoolArgs::prev_weights)
// compute every group's weights, decide with the CPU's own rule (core/incremental_math.h repool_group)
// and re-pool only the groups that moved or are fresh. Host-only header, internal to kernels/.
//
// Streams. Every update runs on the updater's own stream (the side stream), after the work the backend
// had enqueued on its main stream before the update began (an event). Everything the update reads is
// private to it: its own copy of the keys, the access statistics snapshotted on the main stream at
// begin (a device-to-device copy ordered before any later update_stats), the query reference, bias
// and offsets. So the main stream may score, select and update statistics while the update runs, and
// the result never depends on timing.
//
// Double buffering. The device copy of an IndexState (payload, scales, the weights each composite was
// pooled with) lives in one of two slots. The decode loop's front and back states (core/decode.cc)
// take one slot each: the update writes the back slot while score_index reads the front one.
// A slot is known by its host state (payload and weights addresses and shapes): under a hold
// (Backend::hold_inputs) an update of a state the updater last wrote reuses the slot as it is, and
// score_index of that state's index reads the slot without an upload; outside a hold, every update
// uploads the host state it starts from (not needed when it re-pools everything). Reading a state
// whose update is pending throws.
//
// Timing (Backend::PendingUpdate), from CUDA events, filled by end():
//   run_ms    = time from the update's first operation to its last on the side stream (key and state
//               uploads when needed, statistics are already snapshotted, the pooling kernel, the
//               download of the state into pinned staging): [U0, U1].
//   hidden_ms = the length of [U0, U1] ∩ [M0, M1], where M0 is the point of the main stream at
//               begin (all main-stream work enqueued before begin done) and M1 the completion of the
//               last main-stream work enqueued before end was called. That is the part of the update
//               that ran while the main stream still had the step's work to do (scoring, top-k,
//               attention, statistics, and the host gaps between those calls, during which the caller
//               was not waiting for the update either); the rest, after M1, is what end's caller
//               waits for. 0 <= hidden_ms <= run_ms by construction. It is not a measure of
//               contention: kernels of both streams that overlap in time may slow each other down.
//   The host time of begin itself (argument checks, pageable uploads being staged) is not in
//   either: the caller measures it (decode.cc's pool_ms).
#pragma once

#include <cstdint>
#include <memory>

#include <cuda_runtime.h>

#include "core/backend.h"

namespace ip::cuda {

// The access statistics as the backend holds them on the device (read on the main stream at begin).
struct DeviceStats {
  const float* mass = nullptr;
  const std::uint32_t* count = nullptr;
  const long long* steps = nullptr;  // [1]
  Index64 tokens = 0;
};

// The device rows of an index held by the updater.
struct DeviceRows {
  const void* payload = nullptr;
  const float* scales = nullptr;  // null unless int8 / fp8
};

class IndexUpdater {
 public:
  IndexUpdater();
  ~IndexUpdater();
  IndexUpdater(const IndexUpdater&) = delete;
  IndexUpdater& operator=(const IndexUpdater&) = delete;

  // Starts the update of `st` (inputs validated by the caller: core/pool.h validate_pool_inputs).
  // `stats` is required when the scheme uses statistics. `held`: the backend's hold state. The
  // returned count holds the groups only; end() fills repooled, run_ms and hidden_ms.
  Backend::PendingUpdate begin(MatrixView<const float> keys, const PoolParams& p, const DeviceStats* stats,
                               const float* query_ref, float tau, IndexState& st, cudaStream_t main, bool held);
  // Waits for the pending update, writes `st` on the host and fills u.
  void end(Backend::PendingUpdate& u, cudaStream_t main, bool held);
  bool pending() const;
  // Backend::stage_keys for updates: under a hold and with no update pending, copies the rows of `keys`
  // its key copy lacks on `main` and waits for them, so that the next begin() uploads none.
  void stage_keys(MatrixView<const float> keys, cudaStream_t main, bool held);

  // The device rows of `index` if a slot holds them and `held` (else null); throws when that slot is
  // being written by the pending update.
  const DeviceRows* find(const PooledIndex& index, bool held);
  // Forgets any slot that mirrors host payload `payload` (the backend wrote that index another way); such
  // a slot, unless an update is writing it, is the first one taken for a state no slot holds.
  void forget(const void* payload);
  // Forgets every slot's and key copy's identity (hold_inputs); a pending update still ends normally.
  void drop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ip::cuda
