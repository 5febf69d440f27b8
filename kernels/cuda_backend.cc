// ip::Backend on one GPU: every stage through the launchers of kernels/ on one stream. Each call
// uploads what it needs, launches, copies its outputs back and synchronizes the stream before it
// returns, so a host timer around a call measures kernel + transfer time.
//
// Residency (Backend::hold_inputs): while the caller holds its inputs, key/value matrices, the index,
// the statistics and score arrays this backend filled stay on the device, keyed by host address and
// shape (and for statistics the step count), and are not uploaded again. Address + shape alone is
// safe only under the caller's promise that the data did not change; a checksum would either read
// all the data (as costly as the upload) or sample it (unsafe), so the promise is explicit and scoped:
// run_request holds for one request, and both hold_inputs calls drop every resident copy. Outside a
// hold every call uploads again. Device buffers only grow (DeviceBuffer::resize).
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "core/attention.h"
#include "core/topk.h"
#include "kernels/attention.h"
#include "kernels/cuda_backend.h"
#include "kernels/cuda_update.h"
#include "kernels/device.h"
#include "kernels/device_buffer.h"
#include "kernels/forms.h"
#include "kernels/local_branch.h"
#include "kernels/pool.h"
#include "kernels/pool_weight_args.h"
#include "kernels/score.h"
#include "kernels/stats.h"
#include "kernels/topk.h"

namespace ip::cuda {
namespace {

// Copies a (possibly strided) host matrix into a contiguous device buffer.
void upload_matrix(DeviceBuffer<float>& d, MatrixView<const float> m, cudaStream_t s) {
  d.resize(static_cast<std::size_t>(m.rows * m.cols));
  if (m.rows * m.cols == 0) return;
  IP_CUDA_CHECK(cudaMemcpy2DAsync(d.data(), m.cols * sizeof(float), m.data, m.ld * sizeof(float),
                                  m.cols * sizeof(float), m.rows, cudaMemcpyHostToDevice, s));
}

bool all_finite(MatrixView<const float> m) {
  std::uint32_t bad = 0;
  for (Index64 r = 0; r < m.rows; ++r) {
    const float* row = m.row(r);
    for (Index64 c = 0; c < m.cols; ++c) {
      std::uint32_t u;
      std::memcpy(&u, row + c, sizeof u);
      bad |= static_cast<std::uint32_t>((u & 0x7F800000u) == 0x7F800000u);
    }
  }
  return bad == 0;
}

// A device copy of a host matrix, valid while `held` (see the file comment).
struct ResidentMatrix {
  const float* host = nullptr;
  Index64 rows = 0, cols = 0, ld = 0;
  std::uint64_t used = 0;  // LRU stamp
  bool valid = false;      // reusable (only under a hold)
  bool checked = false;    // the host data was checked finite when uploaded
  DeviceBuffer<float> dev;
  bool matches(MatrixView<const float> m) const {
    return valid && host == m.data && rows == m.rows && cols == m.cols && ld == m.ld;
  }
};

// A device copy of scores this backend wrote to host array `host`.
struct ScoreMirror {
  const float* host = nullptr;
  Index64 n = 0;
  bool valid = false;
  DeviceBuffer<float> dev;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, const KernelForms& forms)
      : device_(device), forms_(forms), local_(linear_chunked(forms.linear)) {
    const int n = device_count();
    IP_REQUIRE(n > 0, "cuda backend: no usable CUDA device ({})", describe_devices());
    IP_REQUIRE(device >= 0 && device < n, "cuda backend: device {} outside [0, {})", device, n);
    IP_CUDA_CHECK(cudaSetDevice(device_));
    cudaDeviceProp prop{};
    IP_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
    desc_ = fmt::format("{} (device {}), sm_{}{}, {} SMs, {:.1f} GiB", prop.name, device_, prop.major, prop.minor,
                        prop.multiProcessorCount, static_cast<double>(prop.totalGlobalMem) / (1ull << 30));
    stream_ = std::make_unique<Stream>();
  }

  std::string name() const override { return "cuda"; }
  std::string device() const override { return desc_; }
  std::string kernel_forms() const override { return used_.describe(); }

  void hold_inputs(bool hold) override {
    held_ = hold;
    for (auto& r : resident_) r.valid = false;
    index_valid_ = stats_valid_ = false;
    group_scores_.valid = token_scores_.valid = false;
    if (updater_) updater_->drop();
  }

  void stage_keys(MatrixView<const float> keys, bool for_updates) override {
    if (!held_) return;  // outside a hold every call uploads again: nothing to stage
    select_device();
    if (for_updates) {
      if (!updater_) updater_ = std::make_unique<IndexUpdater>();
      updater_->stage_keys(keys, s(), held_);  // its private copy, read by the side stream
    } else {
      resident(keys, /*check_finite=*/true, "pooling: index key");
      stream_->sync();
    }
  }

  // Backend::warm_up_build: the build once, untimed. It allocates payload_, scales_, the offsets and
  // statistics at this size, loads the pooling kernel and sizes `out` on the host; the timed build that
  // follows writes the same bytes again.
  void warm_up_build(MatrixView<const float> keys, const PoolParams& p, const AccessStats* stats,
                     const float* query_ref, PooledIndex& out) override {
    build_index(keys, p, stats, query_ref, out);
  }
  // Backend::warm_up_update: the full build of an empty state, so that the updater's index slot, key copy,
  // statistics snapshot and page-locked staging exist at this size; twice for an asynchronous loop, whose
  // updates write the second slot while scoring reads the first. Then the state is empty again and no
  // slot claims it (forgotten slots are reused first: the timed update takes the first one).
  void warm_up_update(MatrixView<const float> keys, const PoolParams& p, const AccessStats* stats,
                      const float* query_ref, float tau, bool async, IndexState& st) override {
    if (st.index.tokens != 0) return;
    for (int slot = 0; slot < (async ? 2 : 1); ++slot) {
      update_index(keys, p, stats, query_ref, tau, st);
      st.index.tokens = 0;  // empty: the next update (the timed one, after these) is a full build
    }
    updater_->forget(st.index.rows.payload.data());
  }

  void build_index(MatrixView<const float> keys, const PoolParams& p, const AccessStats* stats, const float* query_ref,
                   PooledIndex& out) override {
    validate_pool_inputs(keys, p, stats, query_ref);
    select_device();
    if (updater_) updater_->forget(out.rows.payload.data());  // its slot no longer mirrors `out`
    const float* dkeys = resident(keys, /*check_finite=*/true, "pooling: index key");
    const WeightParams& wp = p.weights;
    const int G = effective_group_size(p);
    const Index64 T = keys.rows, D = keys.cols, groups = num_groups(T, G);
    const int rpg = rows_per_group(wp.scheme);
    set_offsets(T, groups);

    PoolArgs a;
    a.batch = single_batch(T, groups);
    a.keys = dkeys;
    a.key_type = KeyType::fp32;
    a.dim = static_cast<int>(D);
    a.group_size = G;
    set_weight_args(wp, bias_, s(), a);
    if (wp.cosine_reference == CosineReference::query && query_ref) {
      qref_.upload(query_ref, static_cast<std::size_t>(D), s());
      a.query_ref = qref_.data();
    }
    if (uses_stats(wp.scheme)) {
      sync_stats_to_device(*stats);
      a.stats_mass = mass_.data();
      a.stats_count = count_.data();
      a.stats_steps = steps_.data();
    }
    a.precision = p.precision;
    const Index64 rows = groups * rpg;
    payload_.resize(static_cast<std::size_t>(rows * D * element_bytes(p.precision)));
    a.payload = payload_.data();
    if (scale_bytes(p.precision)) {
      scales_.resize(static_cast<std::size_t>(rows));
      a.scales = scales_.data();
    }
    pool(a, s());

    out.method = wp.scheme;
    out.group_size = G;
    out.tokens = T;
    resize(out.rows, p.precision, rows, D);
    payload_.download(out.rows.payload.data(), out.rows.payload.size(), s());
    if (!out.rows.scales.empty()) scales_.download(out.rows.scales.data(), out.rows.scales.size(), s());
    stream_->sync();
    if (updater_) updater_->forget(out.rows.payload.data());
    remember_index(out);
  }

  void score_index(const PooledIndex& index, const IndexQuery& q, float* out) override {
    score_groups(index, q, out, /*host_copy=*/true);
  }
  // Backend::score_index_for_topk: the scores stay in group_scores_ (the mirror topk reads) under a hold.
  void score_index_for_topk(const PooledIndex& index, const IndexQuery& q, float* scores) override {
    score_groups(index, q, scores, /*host_copy=*/!held_);
  }

  void score_groups(const PooledIndex& index, const IndexQuery& q, float* out, bool host_copy) {
    validate_query(q, index.rows.cols);
    select_device();
    const QuantizedMatrix& m = index.rows;
    if (const DeviceRows* r = updater_ ? updater_->find(index, held_) : nullptr) {  // an updated index
      const Index64 groups = index.groups();
      set_offsets(index.tokens, groups);
      run_score(r->payload, r->scales, m.precision, m.cols, index.method == Weighting::maxmin,
                single_batch(index.tokens, groups), q, groups, group_scores_, out, host_copy);
      return;
    }
    if (!index_matches(index)) {
      payload_.upload(m.payload.data(), m.payload.size(), s());
      if (!m.scales.empty()) scales_.upload(m.scales.data(), m.scales.size(), s());
      remember_index(index);
    }
    const Index64 groups = index.groups();
    set_offsets(index.tokens, groups);
    run_score(payload_.data(), m.scales.empty() ? nullptr : scales_.data(), m.precision, m.cols,
              index.method == Weighting::maxmin, single_batch(index.tokens, groups), q, groups, group_scores_, out,
              host_copy);
  }

  void score_tokens(MatrixView<const float> keys, const IndexQuery& q, float* out) override {
    validate_query(q, keys.cols);
    select_device();
    const float* dkeys = resident(keys, false, nullptr);
    set_offsets(keys.rows, keys.rows);
    run_score(dkeys, nullptr, Precision::fp32, keys.cols, false, single_batch(keys.rows, keys.rows), q, keys.rows,
              token_scores_, out, /*host_copy=*/true);
  }

  std::vector<std::int32_t> topk(const float* scores, Index64 n, Index64 k) override {
    IP_REQUIRE(k >= 1 && k <= n, "top-k: k = {} outside [1, n = {}]", k, n);
    IP_REQUIRE(n <= std::numeric_limits<std::int32_t>::max(), "top-k: {} scores exceed int32 ids", n);
    select_device();
    const float* d = nullptr;
    for (ScoreMirror* m : {&group_scores_, &token_scores_})
      if (held_ && m->valid && m->host == scores && m->n == n) d = m->dev.data();
    if (!d) {
      for (Index64 i = 0; i < n; ++i) IP_REQUIRE(!std::isnan(scores[i]), "top-k: score {} is NaN", i);
      upload_scores_.upload(scores, static_cast<std::size_t>(n), s());
      d = upload_scores_.data();
    }
    const long long off[2] = {0, n};
    row_offset_.upload(off, 2, s());
    TopkArgs a;
    a.rows = 1;
    a.row_offset = row_offset_.data();
    a.max_row = n;
    a.scores = d;
    a.k = static_cast<int>(k);
    ids_.resize(static_cast<std::size_t>(k));
    a.ids = ids_.data();
    a.workspace_bytes = topk_workspace_bytes(1, n, a.k);
    topk_ws_.resize(a.workspace_bytes);
    a.workspace = topk_ws_.data();
    a.launch = topk_launch(forms_.topk);
    cuda::topk(a, s());
    used_.note("top-k", to_string(a.launch));
    std::vector<std::int32_t> ids(static_cast<std::size_t>(k));
    ids_.download(ids.data(), ids.size(), s());
    stream_->sync();
    return ids;
  }

  AttentionOutput attention(MatrixView<const float> keys, MatrixView<const float> values, MatrixView<const float> queries,
                            std::span<const Index64> tokens, bool want_probs) override {
    validate_attention_inputs(keys, values, queries, tokens);
    const Index64 T = keys.rows, Da = keys.cols, Dv = values.cols, Ha = queries.rows;
    const bool dense = tokens.empty();
    const Index64 n = dense ? T : static_cast<Index64>(tokens.size());
    select_device();
    // The listed tokens become blocks of one token (any ascending list; the pipeline's groups too).
    if (!dense) {
      IP_REQUIRE(T <= std::numeric_limits<std::int32_t>::max(), "attention: {} tokens exceed int32 block ids", T);
      host_blocks_.resize(tokens.size());
      for (std::size_t i = 0; i < tokens.size(); ++i) host_blocks_[i] = static_cast<std::int32_t>(tokens[i]);
      blocks_.upload(host_blocks_, s());
    }
    const float* dk = resident(keys, false, nullptr);
    const float* dv = resident(values, false, nullptr);
    upload_matrix(attn_q_, queries, s());
    const long long off[6] = {0, T, 0, n, 0, n};  // tokens, blocks, probabilities
    attn_off_.upload(off, 6, s());

    AttentionArgs a;
    a.batch.requests = 1;
    a.batch.token_offset = attn_off_.data();
    a.batch.total_tokens = T;
    a.keys = dk;
    a.values = dv;
    a.dim = static_cast<int>(Da);
    a.vdim = static_cast<int>(Dv);
    a.queries = attn_q_.data();
    a.heads = static_cast<int>(Ha);
    if (!dense) {
      a.blocks = blocks_.data();
      a.block_offset = attn_off_.data() + 2;
      a.block_size = 1;
    }
    a.max_attended = n;
    attn_out_.resize(static_cast<std::size_t>(Ha * Dv));
    a.out = attn_out_.data();
    if (want_probs) {
      attn_probs_.resize(static_cast<std::size_t>(Ha * n));
      a.probs = attn_probs_.data();
      a.prob_offset = attn_off_.data() + 4;
    }
    a.workspace_bytes = attention_workspace_bytes(a, n);
    attn_ws_.resize(a.workspace_bytes);
    a.workspace = attn_ws_.data();
    a.kernel = attn_kernel(forms_.attention);
    cuda::attention(a, s());
    used_.note("attention", to_string(a.kernel));

    AttentionOutput res;
    res.out.reshape({Ha, Dv});
    attn_out_.download(res.out.data(), static_cast<std::size_t>(res.out.size()), s());
    if (want_probs) {
      res.probs.reshape({Ha, n});
      attn_probs_.download(res.probs.data(), static_cast<std::size_t>(res.probs.size()), s());
    }
    attention_check(a, s());  // synchronizes
    return res;
  }

  void update_stats(AccessStats& stats, std::span<const float> step_mass,
                    std::span<const std::pair<Index64, Index64>> selected_ranges) override {
    const Index64 T = stats.tokens();
    IP_REQUIRE(static_cast<Index64>(step_mass.size()) == T, "access statistics: step mass has {} entries for {} tokens",
               step_mass.size(), T);
    for (const auto& [first, last] : selected_ranges)
      IP_REQUIRE(0 <= first && first <= last && last <= T, "access statistics: range [{}, {}) outside [0, {})", first,
                 last, T);
    IP_REQUIRE(selected_ranges.size() <= static_cast<std::size_t>(std::numeric_limits<int>::max()),
               "access statistics: {} ranges exceed one launch", selected_ranges.size());
    select_device();
    sync_stats_to_device(stats);
    step_mass_.upload(step_mass.data(), step_mass.size(), s());
    host_ranges_.resize(2 * selected_ranges.size());
    for (std::size_t i = 0; i < selected_ranges.size(); ++i) {
      host_ranges_[2 * i] = selected_ranges[i].first;
      host_ranges_[2 * i + 1] = selected_ranges[i].second;
    }
    ranges_.upload(host_ranges_, s());
    StatsArgs a;
    a.mass = mass_.data();
    a.count = count_.data();
    a.tokens = T;
    a.decay = stats.decay;
    a.step_mass = step_mass_.data();
    a.ranges = ranges_.data();
    a.n_ranges = static_cast<int>(selected_ranges.size());
    cuda::update_stats(a, s());
    mass_.download(stats.mass.data(), stats.mass.size(), s());
    count_.download(stats.count.data(), stats.count.size(), s());
    stream_->sync();
    ++stats.steps;
    const long long steps = stats.steps;
    steps_.upload(&steps, 1, s());  // pageable source: staged before the call returns
    remember_stats(stats);
  }

  // Issue 7: incremental updates on the GPU (kernels/cuda_update.h), synchronous and asynchronous.
  RepoolCount update_index(MatrixView<const float> keys, const PoolParams& p, const AccessStats* stats,
                           const float* query_ref, float tau, IndexState& st) override {
    PendingUpdate u = begin_update_index(keys, p, stats, query_ref, tau, st);
    end_update_index(u);
    return u.count;
  }
  PendingUpdate begin_update_index(MatrixView<const float> keys, const PoolParams& p, const AccessStats* stats,
                                   const float* query_ref, float tau, IndexState& st) override {
    validate_pool_inputs(keys, p, stats, query_ref);
    select_device();
    if (!updater_) updater_ = std::make_unique<IndexUpdater>();
    // payload_ may hold st.index as it was before (a build_index): the update changes it elsewhere.
    if (index_host_ == &st.index || index_payload_ == st.index.rows.payload.data()) index_valid_ = false;
    DeviceStats ds;
    if (uses_stats(p.weights.scheme)) {
      sync_stats_to_device(*stats);
      ds = {mass_.data(), count_.data(), steps_.data(), stats->tokens()};
    }
    return updater_->begin(keys, p, uses_stats(p.weights.scheme) ? &ds : nullptr, query_ref, tau, st, s(), held_);
  }
  void end_update_index(PendingUpdate& u) override {
    select_device();
    IP_REQUIRE(updater_ != nullptr, "cuda backend: end_update_index without begin_update_index");
    updater_->end(u, s(), held_);
  }

  // Issue 7: the hybrid layer's local branch (kernels/local_branch.h; lb.state stays host-visible).
  void local_prefill(const Workload& w, Index64 begin, Index64 end, int chunk, LocalBranch& lb) override {
    select_device();
    local_.prefill(w, begin, end, chunk, lb, s());
    used_.note("linear attention", linear_chunked(forms_.linear) ? "chunked" : "sequential");
  }
  void warm_up_local_prefill(const Workload& w, Index64 begin, Index64 end, int chunk) override {
    LocalBranch scratch;
    local_prefill(w, begin, end, chunk, scratch);
  }
  void local_append(const Workload& w, Index64 new_end, LocalBranch& lb) override {
    select_device();
    local_.append(w, new_end, lb, s());
  }
  void local_readout(const LocalBranch& lb, MatrixView<const float> queries, float* out) override {
    select_device();
    local_.readout(lb, queries, out, s());
  }

 private:
  cudaStream_t s() const { return stream_->get(); }
  void select_device() const { IP_CUDA_CHECK(cudaSetDevice(device_)); }

  // The device copy of m: resident under a hold, uploaded otherwise (least recently used slot).
  const float* resident(MatrixView<const float> m, bool check_finite, const char* what) {
    ++clock_;
    auto check = [&] {
      if (all_finite(m)) return;
      for (Index64 t = 0; t < m.rows; ++t)
        IP_REQUIRE(all_finite(m.rows_range(t, t + 1)), "{} of token {} contains NaN or infinity", what, t);
    };
    if (held_)
      for (auto& r : resident_)
        if (r.matches(m)) {
          if (check_finite && !r.checked) {
            check();
            r.checked = true;
          }
          r.used = clock_;
          return r.dev.data();
        }
    if (check_finite) check();
    ResidentMatrix* slot = &resident_[0];
    for (auto& r : resident_)
      if (r.used < slot->used) slot = &r;
    upload_matrix(slot->dev, m, s());
    slot->checked = check_finite;
    slot->host = m.data;
    slot->rows = m.rows;
    slot->cols = m.cols;
    slot->ld = m.ld;
    slot->used = clock_;
    slot->valid = held_;
    return slot->dev.data();
  }

  Batch single_batch(Index64 tokens, Index64 entries) const {
    Batch b;
    b.requests = 1;
    b.token_offset = offsets_.data();
    b.entry_offset = offsets_.data() + 2;
    b.total_tokens = tokens;
    b.total_entries = entries;
    return b;
  }
  void set_offsets(Index64 tokens, Index64 entries) {
    const long long off[4] = {0, tokens, 0, entries};
    offsets_.upload(off, 4, s());  // pageable source: staged before the call returns
  }

  void run_score(const void* rows, const float* scales, Precision prec, Index64 dim, bool maxmin, const Batch& batch,
                 const IndexQuery& q, Index64 n, ScoreMirror& mirror, float* out, bool host_copy) {
    upload_matrix(query_, q.heads, s());
    head_w_.upload(q.head_weights, static_cast<std::size_t>(q.heads.rows), s());
    mirror.dev.resize(static_cast<std::size_t>(n));
    ScoreArgs a;
    a.batch = batch;
    a.rows = rows;
    a.scales = scales;
    a.precision = prec;
    a.dim = static_cast<int>(dim);
    a.maxmin = maxmin;
    a.queries = query_.data();
    a.head_weights = head_w_.data();
    a.heads = static_cast<int>(q.heads.rows);
    a.scores = mirror.dev.data();
    a.math = score_math(forms_.score);
    score(a, s());
    used_.note(&mirror == &token_scores_ ? "exact score" : "score", to_string(resolve_score_math(a)));
    if (host_copy) mirror.dev.download(out, static_cast<std::size_t>(n), s());
    stream_->sync();
    mirror.host = out;
    mirror.n = n;
    mirror.valid = held_;
  }

  bool index_matches(const PooledIndex& x) const {
    return held_ && index_valid_ && index_host_ == &x && index_payload_ == x.rows.payload.data() &&
           index_rows_ == x.rows.rows && index_cols_ == x.rows.cols && index_prec_ == x.rows.precision;
  }
  void remember_index(const PooledIndex& x) {
    index_valid_ = held_;
    index_host_ = &x;
    index_payload_ = x.rows.payload.data();
    index_rows_ = x.rows.rows;
    index_cols_ = x.rows.cols;
    index_prec_ = x.rows.precision;
  }

  void sync_stats_to_device(const AccessStats& st) {
    if (held_ && stats_valid_ && stats_host_ == &st && stats_tokens_ == st.tokens() && stats_steps_ == st.steps) return;
    mass_.upload(st.mass, s());
    count_.upload(st.count, s());
    const long long steps = st.steps;
    steps_.upload(&steps, 1, s());  // pageable source: staged before the call returns
    remember_stats(st);
  }
  void remember_stats(const AccessStats& st) {
    stats_valid_ = held_;
    stats_host_ = &st;
    stats_tokens_ = st.tokens();
    stats_steps_ = st.steps;
  }

  int device_;
  KernelForms forms_;
  FormsUsed used_;  // what kernel_forms() reports
  std::string desc_;
  std::unique_ptr<Stream> stream_;
  bool held_ = false;
  std::uint64_t clock_ = 0;
  ResidentMatrix resident_[4];  // index keys, attention keys, values, one spare
  DeviceBuffer<long long> offsets_, row_offset_, attn_off_, steps_, ranges_;
  DeviceBuffer<float> bias_, qref_, scales_, query_, head_w_, upload_scores_, attn_q_, attn_out_, attn_probs_;
  DeviceBuffer<float> mass_, step_mass_;
  DeviceBuffer<std::uint32_t> count_;
  DeviceBuffer<std::uint8_t> payload_, topk_ws_, attn_ws_;
  DeviceBuffer<std::int32_t> ids_, blocks_;
  std::vector<std::int32_t> host_blocks_;
  std::vector<long long> host_ranges_;
  ScoreMirror group_scores_, token_scores_;
  // The index whose rows payload_/scales_ hold.
  bool index_valid_ = false;
  const PooledIndex* index_host_ = nullptr;
  const void* index_payload_ = nullptr;
  Index64 index_rows_ = 0, index_cols_ = 0;
  Precision index_prec_ = Precision::fp32;
  // The statistics mass_/count_/steps_ hold.
  bool stats_valid_ = false;
  const AccessStats* stats_host_ = nullptr;
  Index64 stats_tokens_ = 0;
  std::int64_t stats_steps_ = 0;
  // Incremental updates: created on first use (its stream on this backend's device).
  std::unique_ptr<IndexUpdater> updater_;
  DeviceLocalBranch local_;  // issue 7: the hybrid layer's local branch
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int device, const KernelForms& forms) {
  return std::make_unique<CudaBackend>(device, forms);
}

}  // namespace ip::cuda
