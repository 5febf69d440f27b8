// The backend interface: every stage of the pipeline, implemented on the CPU here (cpu_backend.cc)
// and on the GPU in kernels/. The pipeline and the runner only ever talk to this interface.
//
// Inputs are host views; a device backend keeps its own resident copies. Outputs come back to the host.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/attention.h"
#include "core/hybrid.h"
#include "core/incremental.h"
#include "core/pool.h"
#include "core/score.h"
#include "core/stats.h"

namespace ip {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;    // "cpu", "cuda"
  virtual std::string device() const = 0;  // human-readable device description
  // The forms of the GPU kernels this backend's calls have run, e.g. "attention tiles, score bf16x2,
  // top-k chain" (core/kernel_forms.h); "" for a backend with one form of each stage (the cpu).
  virtual std::string kernel_forms() const { return ""; }

  // Weights, pooling and quantization of one request's index keys into `out` (storage reused on rebuilds).
  virtual void build_index(MatrixView<const float> keys, const PoolParams& p, const AccessStats* stats,
                           const float* query_ref, PooledIndex& out) = 0;
  // Compressed scores of every group (index.groups() floats).
  virtual void score_index(const PooledIndex& index, const IndexQuery& q, float* out) = 0;
  // score_index for a caller that only hands `scores` to this backend's next topk and never reads them
  // itself (the pipelines' indexer): under a hold a device backend keeps the scores on the device, where
  // topk finds them by this address, and leaves the host array unwritten, so the stage's time has no copy
  // of every score to the host (an inference engine selects where it scores). Default: score_index.
  virtual void score_index_for_topk(const PooledIndex& index, const IndexQuery& q, float* scores) {
    score_index(index, q, scores);
  }
  // Exact scores of every token (keys.rows floats).
  virtual void score_tokens(MatrixView<const float> keys, const IndexQuery& q, float* out) = 0;
  // Exact top-k ids, best first, ties to the lower id.
  virtual std::vector<std::int32_t> topk(const float* scores, Index64 n, Index64 k) = 0;
  // Attention over the listed tokens (empty: dense), with probabilities when asked.
  virtual AttentionOutput attention(MatrixView<const float> keys, MatrixView<const float> values,
                                    MatrixView<const float> queries, std::span<const Index64> tokens,
                                    bool want_probs) = 0;
  // Feeds one step's attention mass and selection into the access statistics.
  virtual void update_stats(AccessStats& stats, std::span<const float> step_mass,
                            std::span<const std::pair<Index64, Index64>> selected_ranges) = 0;

  // Residency hint for device backends. Between hold_inputs(true) and hold_inputs(false) the caller
  // promises that key and value matrices, the PooledIndex, the AccessStats, and score arrays filled by
  // score_index/score_tokens change only through this backend's own calls, so a device backend may
  // reuse the copy it already holds for the same address and shape instead of uploading again
  // (queries, query references and step masses are always uploaded). Both calls drop every resident
  // copy, so a freed and reused address never aliases. Default: nothing (the CPU backend reads the
  // host arrays directly). See HeldInputs for the scoped form.
  virtual void hold_inputs(bool hold) {}
  // Under a hold, copies `keys` (the index keys of a request, or the prefix of them a growing context
  // has so far) to the device and checks them, for the build_index (for_updates false) or the
  // update_index / begin_update_index (true) calls that follow. The pipelines call it before they start
  // a pool stage's clock, so that pool_ms measures pooling from keys already on the device, as the
  // batched decoder's and the CPU's do, not the copy of the workload over the bus. Outside a hold, and
  // on the CPU, nothing.
  virtual void stage_keys(MatrixView<const float> keys, bool for_updates) {}
  // Before a request's first timed pool stage (after stage_keys), with that stage's inputs: the stage's
  // one-time costs, outside pool_ms. A device backend runs the stage once here, so that its buffers and
  // page-locked staging are allocated at this size and its kernels loaded (lazy module loading) before
  // the clock; without it a point built once (uniform, positional, cosine, exact) reports its first,
  // coldest build. The defaults size the host outputs only (their pages touched here, not in the clock).
  // Results are unchanged: warm_up_build leaves `out` as build_index would (the timed build writes it
  // again); warm_up_update takes an empty state (index.tokens == 0; anything else: nothing to do) and
  // leaves it empty, its storage sized, so the timed update_index is the same full build. `async`: the
  // loop will also begin asynchronous updates (a device backend then prepares its second index buffer).
  virtual void warm_up_build(MatrixView<const float> keys, const PoolParams& p, const AccessStats* stats,
                             const float* query_ref, PooledIndex& out);
  virtual void warm_up_update(MatrixView<const float> keys, const PoolParams& p, const AccessStats* stats,
                              const float* query_ref, float tau, bool async, IndexState& st);

  // ---- Issue 7: hybrid layer and index updates. Not pure: the defaults run the CPU implementation
  // (core/backend_defaults.cc) on host data, so a device backend works before it overrides them.
  // Local branch: chunked gated linear attention over tokens [begin, end) into a fresh state.
  virtual void local_prefill(const Workload& w, Index64 begin, Index64 end, int chunk, LocalBranch& lb);
  // Appends tokens [lb.end, new_end) by the recurrence (the decode update).
  virtual void local_append(const Workload& w, Index64 new_end, LocalBranch& lb);
  // Normalised read-out for Ha query heads [Ha, Da] into out [Ha, Dv].
  virtual void local_readout(const LocalBranch& lb, MatrixView<const float> queries, float* out);
  // Before the timed local_prefill of a request (local_prefill_ms), with its arguments: a device backend
  // runs the prefill once into a scratch state, so that its buffers exist and its kernels are loaded
  // (as warm_up_build for the pool stage). Default: nothing (the CPU's prefill allocates one small state).
  virtual void warm_up_local_prefill(const Workload& w, Index64 begin, Index64 end, int chunk) {}
  // Re-pools the groups whose weights moved by more than tau, and any group with new tokens
  // (core/incremental.h). tau = 0 gives build_index's bits.
  virtual RepoolCount update_index(MatrixView<const float> keys, const PoolParams& p, const AccessStats* stats,
                                   const float* query_ref, float tau, IndexState& st);
  // Asynchronous form: begin starts an update of `st` (which must not be read until end returns);
  // end waits for it. One update at a time: begin, end, begin, ... A GPU backend runs it on a second
  // stream, overlapping the next step's scoring, and reports the part of its time that was hidden
  // (cuda: kernels/cuda_update.h defines run_ms and hidden_ms from CUDA events). count.repooled,
  // run_ms and hidden_ms are final only after end (the cuda backend fills them there; begin returns
  // count.groups, repooled = 0 and NaN times). Default: begin runs update_index at once, end only
  // reports (hidden_ms = NaN: nothing overlapped).
  struct PendingUpdate {
    RepoolCount count;
    double run_ms = 0;     // time of the update itself (cpu: wall time; cuda: device time, event to event)
    double hidden_ms = 0;  // of run_ms, the part that overlapped other work (NaN: not measured)
  };
  virtual PendingUpdate begin_update_index(MatrixView<const float> keys, const PoolParams& p,
                                           const AccessStats* stats, const float* query_ref, float tau,
                                           IndexState& st);
  virtual void end_update_index(PendingUpdate& u) {}
};

// Holds a backend's inputs for one scope (run_request holds them for one request).
class HeldInputs {
 public:
  explicit HeldInputs(Backend& b) : b_(b) { b_.hold_inputs(true); }
  ~HeldInputs() { b_.hold_inputs(false); }
  HeldInputs(const HeldInputs&) = delete;
  HeldInputs& operator=(const HeldInputs&) = delete;

 private:
  Backend& b_;
};

// The CPU backend on `threads` threads (0: all hardware threads).
std::unique_ptr<Backend> make_cpu_backend(int threads = 0);

}  // namespace ip
