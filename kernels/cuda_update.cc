// Incremental index updates on the GPU (kernels/cuda_update.h: streams, slots, timing).
#include "kernels/cuda_update.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/device_buffer.h"
#include "kernels/pool.h"
#include "kernels/pool_weight_args.h"

namespace ip::cuda {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Makes b hold at least n elements keeping its first `keep`, with headroom (a growing context grows it a
// group at a time). Never shrinks: callers pass explicit counts, not b.size(). The copy is ordered on
// stream s, and s is synchronized before the old allocation is freed.
template <class T>
void grow_keep(DeviceBuffer<T>& b, std::size_t n, std::size_t keep, cudaStream_t s) {
  if (n <= b.size()) return;
  DeviceBuffer<T> bigger(n + n / 2);
  keep = std::min(keep, b.size());
  if (keep) {
    IP_CUDA_CHECK(cudaMemcpyAsync(bigger.data(), b.data(), keep * sizeof(T), cudaMemcpyDeviceToDevice, s));
    IP_CUDA_CHECK(cudaStreamSynchronize(s));
  }
  b = std::move(bigger);
}

// Page-locked host staging (device-to-host copies that do not block the host).
class Pinned {
 public:
  ~Pinned() {
    if (p_) IP_CUDA_CHECK_NOTHROW(cudaFreeHost(p_));
  }
  void reserve(std::size_t bytes) {
    if (bytes <= cap_) return;
    if (p_) IP_CUDA_CHECK(cudaFreeHost(p_));
    p_ = nullptr;
    cap_ = 0;
    const std::size_t want = bytes + bytes / 4;
    IP_CUDA_CHECK(cudaMallocHost(&p_, want));
    cap_ = want;
  }
  std::uint8_t* at(std::size_t offset) { return static_cast<std::uint8_t*>(p_) + offset; }

 private:
  void* p_ = nullptr;
  std::size_t cap_ = 0;
};

std::size_t align16(std::size_t x) { return (x + 15) / 16 * 16; }

bool finite_row(const float* row, Index64 n) {
  std::uint32_t bad = 0;
  for (Index64 c = 0; c < n; ++c) {
    std::uint32_t u;
    std::memcpy(&u, row + c, sizeof u);
    bad |= static_cast<std::uint32_t>((u & 0x7F800000u) == 0x7F800000u);
  }
  return bad == 0;
}

}  // namespace

struct IndexUpdater::Impl {
  // The device copy of one IndexState; its identity is the host state it equals (valid only under a hold).
  struct Slot {
    bool valid = false;
    bool busy = false;
    std::uint64_t used = 0;
    const void* payload_host = nullptr;
    const float* weights_host = nullptr;
    Index64 tokens = 0, rows = 0, cols = 0;
    Precision precision = Precision::fp32;
    Weighting method = Weighting::uniform;
    int group_size = 0;
    DeviceRows view;
    DeviceBuffer<std::uint8_t> payload;
    DeviceBuffer<float> scales, weights;

    bool mirrors(const IndexState& st) const {
      const PooledIndex& x = st.index;
      return valid && payload_host == x.rows.payload.data() && weights_host == st.weights.data() &&
             tokens == x.tokens && rows == x.rows.rows && cols == x.rows.cols && precision == x.rows.precision &&
             method == x.method && group_size == x.group_size &&
             static_cast<Index64>(st.weights.size()) == x.tokens;
    }
  };

  Stream side;
  Event ev_begin, ev_start, ev_stop, ev_main;
  Slot slots[2];
  std::uint64_t clock = 0;
  // The update's private copy of the keys; under a hold, rows already there are not uploaded again.
  DeviceBuffer<float> keys;
  const float* keys_host = nullptr;
  Index64 keys_rows = 0, keys_cols = 0, keys_ld = 0;
  bool keys_valid = false;
  // Private inputs.
  DeviceBuffer<float> snap_mass, bias, qref;
  DeviceBuffer<std::uint32_t> snap_count;
  DeviceBuffer<long long> snap_steps, offsets;  // offsets: token 0,T | entry 0,groups | fresh_from
  DeviceBuffer<unsigned long long> counter;
  Pinned staging;
  // The pending update.
  bool pending = false;
  IndexState* st = nullptr;
  Slot* slot = nullptr;
  Index64 groups = 0, rows = 0, dim = 0, tokens = 0;
  std::size_t payload_bytes = 0, off_scales = 0, off_weights = 0, off_counter = 0;
  PoolParams params;

  Slot* pick(const IndexState& s) {
    for (Slot& x : slots)
      if (!x.busy && x.mirrors(s)) return &x;
    Slot* best = nullptr;
    for (Slot& x : slots)
      if (!x.busy && (!best || x.used < best->used)) best = &x;
    IP_REQUIRE(best != nullptr, "cuda update: no free index slot");
    best->valid = false;
    return best;
  }

  // Keys onto the side stream (all of them, or under a hold only rows not uploaded yet).
  const float* upload_keys(MatrixView<const float> k, bool held, cudaStream_t s) {
    const bool grow = held && keys_valid && keys_host == k.data && keys_cols == k.cols && keys_ld == k.ld &&
                      keys_rows <= k.rows;
    const Index64 from = grow ? keys_rows : 0;
    grow_keep(keys, static_cast<std::size_t>(k.rows * k.cols), static_cast<std::size_t>(from * k.cols), s);
    if (k.rows > from)
      IP_CUDA_CHECK(cudaMemcpy2DAsync(keys.data() + from * k.cols, k.cols * sizeof(float), k.row(from),
                                      k.ld * sizeof(float), k.cols * sizeof(float), k.rows - from,
                                      cudaMemcpyHostToDevice, s));
    keys_host = k.data;
    keys_rows = k.rows;
    keys_cols = k.cols;
    keys_ld = k.ld;
    keys_valid = held;
    return keys.data();
  }
};

IndexUpdater::IndexUpdater() : impl_(std::make_unique<Impl>()) {}

IndexUpdater::~IndexUpdater() {
  if (impl_ && impl_->pending) IP_CUDA_CHECK_NOTHROW(cudaStreamSynchronize(impl_->side.get()));
}

bool IndexUpdater::pending() const { return impl_->pending; }

void IndexUpdater::stage_keys(MatrixView<const float> keys, cudaStream_t main, bool held) {
  Impl& m = *impl_;
  if (!held || m.pending) return;  // a pending update reads the key copy on the side stream
  m.upload_keys(keys, held, main);
  IP_CUDA_CHECK(cudaStreamSynchronize(main));
}

Backend::PendingUpdate IndexUpdater::begin(MatrixView<const float> k, const PoolParams& p, const DeviceStats* stats,
                                           const float* query_ref, float tau, IndexState& st, cudaStream_t main,
                                           bool held) {
  Impl& m = *impl_;
  IP_REQUIRE(!m.pending, "cuda update: begin_update_index while another update is pending (call end_update_index)");
  const WeightParams& wp = p.weights;
  IP_REQUIRE(!uses_stats(wp.scheme) || (stats && stats->mass && stats->tokens == k.rows),
             "cuda update: scheme '{}' needs the device statistics of {} tokens", to_string(wp.scheme), k.rows);
  const PooledIndex& idx = st.index;
  const int G = effective_group_size(p);
  const Index64 T = k.rows, D = k.cols;
  IP_REQUIRE(D <= std::numeric_limits<int>::max(), "cuda update: key dimension {} exceeds int", D);
  // The CPU's rule (core/incremental.cc): what the index covers already, unless it must be rebuilt.
  const bool reset = idx.tokens == 0 || idx.method != wp.scheme || idx.group_size != G ||
                     idx.rows.precision != p.precision || idx.rows.cols != D || idx.tokens > T ||
                     static_cast<Index64>(st.weights.size()) != idx.tokens;
  const Index64 old_T = reset ? 0 : idx.tokens;
  const Index64 first_new = old_T / G;
  // Keys of fresh groups are checked here, as the CPU checks them (the others were checked before).
  for (Index64 t = first_new * G; t < T; ++t)
    IP_REQUIRE(finite_row(k.row(t), D), "pooling: index key of token {} contains NaN or infinity", t);

  const int rpg = rows_per_group(wp.scheme);
  const Index64 groups = num_groups(T, G), rows = groups * rpg;
  const std::size_t eb = element_bytes(p.precision);
  const bool has_scales = scale_bytes(p.precision) != 0;
  const Index64 old_rows = reset ? 0 : idx.rows.rows;

  Impl::Slot* slot = m.pick(st);
  const bool upload_state = !reset && !slot->mirrors(st);
  cudaStream_t s = m.side.get();

  // Main stream: snapshot the statistics, then mark the point the update starts after.
  if (uses_stats(wp.scheme)) {
    const std::size_t n = static_cast<std::size_t>(T);
    m.snap_mass.resize(n);
    m.snap_count.resize(n);
    m.snap_steps.resize(1);
    IP_CUDA_CHECK(cudaMemcpyAsync(m.snap_mass.data(), stats->mass, n * sizeof(float), cudaMemcpyDeviceToDevice, main));
    IP_CUDA_CHECK(cudaMemcpyAsync(m.snap_count.data(), stats->count, n * sizeof(std::uint32_t),
                                  cudaMemcpyDeviceToDevice, main));
    IP_CUDA_CHECK(cudaMemcpyAsync(m.snap_steps.data(), stats->steps, sizeof(long long), cudaMemcpyDeviceToDevice, main));
  }
  m.ev_begin.record(main);
  IP_CUDA_CHECK(cudaStreamWaitEvent(s, m.ev_begin.get(), 0));
  m.ev_start.record(s);

  // Side stream: inputs, state, the update, the download.
  PoolArgs a;
  a.keys = m.upload_keys(k, held, s);
  const long long off[5] = {0, T, 0, groups, first_new};
  m.offsets.upload(off, 5, s);  // pageable source: staged before the call returns
  a.batch.requests = 1;
  a.batch.token_offset = m.offsets.data();
  a.batch.entry_offset = m.offsets.data() + 2;
  a.batch.total_tokens = T;
  a.batch.total_entries = groups;
  a.key_type = KeyType::fp32;
  a.dim = static_cast<int>(D);
  a.group_size = G;
  set_weight_args(wp, m.bias, s, a);
  if (wp.cosine_reference == CosineReference::query && query_ref) {  // as build_index
    m.qref.upload(query_ref, static_cast<std::size_t>(D), s);
    a.query_ref = m.qref.data();
  }
  if (uses_stats(wp.scheme)) {
    a.stats_mass = m.snap_mass.data();
    a.stats_count = m.snap_count.data();
    a.stats_steps = m.snap_steps.data();
  }
  a.precision = p.precision;

  // The slot: kept rows stay (or come from the host state), fresh rows are written by the kernel.
  const std::size_t keep_rows = static_cast<std::size_t>(upload_state ? 0 : old_rows);
  const std::size_t keep_tokens = static_cast<std::size_t>(upload_state ? 0 : old_T);
  grow_keep(slot->payload, static_cast<std::size_t>(rows * D) * eb, keep_rows * static_cast<std::size_t>(D) * eb, s);
  if (has_scales) grow_keep(slot->scales, static_cast<std::size_t>(rows), keep_rows, s);
  grow_keep(slot->weights, static_cast<std::size_t>(T), keep_tokens, s);
  if (upload_state) {
    IP_CUDA_CHECK(cudaMemcpyAsync(slot->payload.data(), idx.rows.payload.data(),
                                  static_cast<std::size_t>(old_rows * D) * eb, cudaMemcpyHostToDevice, s));
    if (has_scales)
      IP_CUDA_CHECK(cudaMemcpyAsync(slot->scales.data(), idx.rows.scales.data(),
                                    static_cast<std::size_t>(old_rows) * sizeof(float), cudaMemcpyHostToDevice, s));
    IP_CUDA_CHECK(cudaMemcpyAsync(slot->weights.data(), st.weights.data(), static_cast<std::size_t>(old_T) * sizeof(float),
                                  cudaMemcpyHostToDevice, s));
  }
  a.payload = slot->payload.data();
  a.scales = has_scales ? slot->scales.data() : nullptr;
  a.prev_weights = slot->weights.data();
  a.fresh_from = m.offsets.data() + 4;
  a.tau = tau;
  m.counter.resize(1);
  IP_CUDA_CHECK(cudaMemsetAsync(m.counter.data(), 0, sizeof(unsigned long long), s));
  a.repooled = m.counter.data();
  pool(a, s);

  // Download into pinned staging: payload | scales | weights | counter.
  m.payload_bytes = static_cast<std::size_t>(rows * D) * eb;
  m.off_scales = align16(m.payload_bytes);
  m.off_weights = align16(m.off_scales + (has_scales ? static_cast<std::size_t>(rows) * sizeof(float) : 0));
  m.off_counter = align16(m.off_weights + static_cast<std::size_t>(T) * sizeof(float));
  m.staging.reserve(m.off_counter + sizeof(unsigned long long));
  if (m.payload_bytes)
    IP_CUDA_CHECK(cudaMemcpyAsync(m.staging.at(0), slot->payload.data(), m.payload_bytes, cudaMemcpyDeviceToHost, s));
  if (has_scales)
    IP_CUDA_CHECK(cudaMemcpyAsync(m.staging.at(m.off_scales), slot->scales.data(),
                                  static_cast<std::size_t>(rows) * sizeof(float), cudaMemcpyDeviceToHost, s));
  IP_CUDA_CHECK(cudaMemcpyAsync(m.staging.at(m.off_weights), slot->weights.data(),
                                static_cast<std::size_t>(T) * sizeof(float), cudaMemcpyDeviceToHost, s));
  IP_CUDA_CHECK(cudaMemcpyAsync(m.staging.at(m.off_counter), m.counter.data(), sizeof(unsigned long long),
                                cudaMemcpyDeviceToHost, s));
  m.ev_stop.record(s);

  slot->busy = true;
  slot->used = ++m.clock;
  m.pending = true;
  m.st = &st;
  m.slot = slot;
  m.groups = groups;
  m.rows = rows;
  m.dim = D;
  m.tokens = T;
  m.params = p;

  Backend::PendingUpdate u;
  u.count.groups = groups;
  u.count.repooled = 0;  // known at end
  u.run_ms = u.hidden_ms = kNaN;
  return u;
}

void IndexUpdater::end(Backend::PendingUpdate& u, cudaStream_t main, bool held) {
  Impl& m = *impl_;
  IP_REQUIRE(m.pending, "cuda update: end_update_index without a pending update");
  Impl::Slot* slot = m.slot;
  m.pending = false;  // whatever happens below, the update is over
  slot->busy = false;
  slot->valid = false;
  m.ev_main.record(main);
  m.ev_stop.sync();  // surfaces a failed kernel or copy
  m.ev_main.sync();

  IndexState& st = *m.st;
  PooledIndex& idx = st.index;
  idx.method = m.params.weights.scheme;
  idx.group_size = effective_group_size(m.params);
  idx.tokens = m.tokens;
  resize(idx.rows, m.params.precision, m.rows, m.dim);
  if (m.payload_bytes) std::memcpy(idx.rows.payload.data(), m.staging.at(0), m.payload_bytes);
  if (!idx.rows.scales.empty())
    std::memcpy(idx.rows.scales.data(), m.staging.at(m.off_scales), idx.rows.scales.size() * sizeof(float));
  st.weights.resize(static_cast<std::size_t>(m.tokens));
  std::memcpy(st.weights.data(), m.staging.at(m.off_weights), st.weights.size() * sizeof(float));
  unsigned long long repooled = 0;
  std::memcpy(&repooled, m.staging.at(m.off_counter), sizeof repooled);

  u.count.groups = m.groups;
  u.count.repooled = static_cast<Index64>(repooled);
  // Event times relative to M0 = ev_begin (see the header): update [u0, u1], main window [0, m1].
  const double u0 = m.ev_start.ms_since(m.ev_begin), u1 = m.ev_stop.ms_since(m.ev_begin);
  const double m1 = m.ev_main.ms_since(m.ev_begin);
  u.run_ms = std::max(0.0, u1 - u0);
  u.hidden_ms = std::clamp(std::min(u1, m1) - std::max(u0, 0.0), 0.0, u.run_ms);

  slot->payload_host = idx.rows.payload.data();
  slot->weights_host = st.weights.data();
  slot->tokens = idx.tokens;
  slot->rows = idx.rows.rows;
  slot->cols = idx.rows.cols;
  slot->precision = idx.rows.precision;
  slot->method = idx.method;
  slot->group_size = idx.group_size;
  slot->view.payload = slot->payload.data();
  slot->view.scales = idx.rows.scales.empty() ? nullptr : slot->scales.data();
  slot->valid = held;
  m.st = nullptr;
  m.slot = nullptr;
}

const DeviceRows* IndexUpdater::find(const PooledIndex& x, bool held) {
  if (!held) return nullptr;
  for (Impl::Slot& s : impl_->slots) {
    if (!s.valid || s.payload_host != x.rows.payload.data() || s.tokens != x.tokens || s.rows != x.rows.rows ||
        s.cols != x.rows.cols || s.precision != x.rows.precision)
      continue;
    IP_REQUIRE(!s.busy, "cuda backend: scoring an index whose asynchronous update is pending (end_update_index first)");
    s.used = ++impl_->clock;
    return &s.view;
  }
  return nullptr;
}

void IndexUpdater::forget(const void* payload) {
  for (Impl::Slot& s : impl_->slots)
    if (s.payload_host == payload) {
      s.valid = false;
      if (!s.busy) s.used = 0;  // its rows are of no use now: reused before a slot that holds a state
    }
}

void IndexUpdater::drop() {
  for (Impl::Slot& s : impl_->slots) s.valid = false;
  impl_->keys_valid = false;
}

}  // namespace ip::cuda
