// BatchedDecoder: B requests laid back to back, one pool launch to build every index, then per decode
// step one score launch, one top-k launch (one row per request) and one attention launch (the top-k
// ids are the block lists). See batched_decode.h.
#include "kernels/batched_decode.h"

#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "core/topk.h"
#include "kernels/attention.h"
#include "kernels/device.h"
#include "kernels/device_buffer.h"
#include "kernels/forms.h"
#include "kernels/pool.h"
#include "kernels/pool_weight_args.h"
#include "kernels/score.h"
#include "kernels/topk.h"

namespace ip::cuda {
namespace {

// Element counts (and workspace bytes) of every device allocation: the one source of both the
// estimate and the allocation, so they cannot drift apart.
struct Sizes {
  long long B = 0, total = 0, G = 1, rpg = 1, groups = 0, rows = 0, max_groups = 0, k_groups = 0, attended = 0;
  std::size_t topk_ws = 0, attn_ws = 0;
  std::size_t bytes = 0;
};

AttentionArgs attention_shape(const BatchedDecodeConfig& c, long long total) {
  // The workspace size depends on whether blocks are given, not on their address: stand-in pointers.
  static const std::int32_t kBlocks = 0;
  static const long long kOffsets = 0;
  AttentionArgs a;
  a.batch.requests = c.requests;
  a.batch.token_offset = &kOffsets;
  a.batch.total_tokens = total;
  a.dim = c.attn_dim;
  a.vdim = c.value_dim;
  a.heads = c.attn_heads;
  a.blocks = &kBlocks;
  a.block_offset = &kOffsets;
  a.block_size = effective_group_size(c.pool);
  return a;
}

Sizes sizes_of(const BatchedDecodeConfig& c) {
  Sizes z;
  z.B = c.requests;
  z.total = c.total_tokens;
  z.G = effective_group_size(c.pool);
  z.rpg = rows_per_group(c.pool.weights.scheme);
  z.groups = (z.total + z.B * (z.G - 1)) / z.G;  // >= sum_b ceil(T_b / G)
  z.rows = z.groups * z.rpg;
  z.max_groups = num_groups(c.max_tokens, static_cast<int>(z.G));
  z.k_groups = groups_for_budget(c.topk_tokens, static_cast<int>(z.G));
  z.attended = z.k_groups * z.G;
  z.topk_ws = topk_workspace_bytes(c.requests, z.max_groups, static_cast<int>(z.k_groups));
  z.attn_ws = attention_workspace_bytes(attention_shape(c, z.total), z.attended);
  const std::size_t f = sizeof(float), B = static_cast<std::size_t>(z.B), T = static_cast<std::size_t>(z.total);
  z.bytes = T * f * (c.dim + c.attn_dim + c.value_dim) +                                          // contexts
            static_cast<std::size_t>(z.rows) * (c.dim * element_bytes(c.pool.precision) + scale_bytes(c.pool.precision)) +
            static_cast<std::size_t>(z.groups) * f +                                               // scores
            4 * (B + 1) * sizeof(long long) +                                                      // offsets
            B * f * (c.index_heads * (c.dim + 1) + c.attn_heads * c.attn_dim) +                    // queries
            B * static_cast<std::size_t>(z.k_groups) * sizeof(std::int32_t) +                      // ids
            B * f * c.attn_heads * (c.value_dim + (c.want_probs ? z.attended : 0)) +               // out, probs
            static_cast<std::size_t>(z.G) * f + z.topk_ws + z.attn_ws;
  return z;
}

bool finite_rows(const float* x, std::size_t n) {
  std::uint32_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t u;
    std::memcpy(&u, x + i, sizeof u);
    bad |= static_cast<std::uint32_t>((u & 0x7F800000u) == 0x7F800000u);
  }
  return bad == 0;
}

}  // namespace

void validate(const BatchedDecodeConfig& c) {
  IP_REQUIRE(c.requests >= 1 && c.requests <= 65535, "batched decode: requests = {} (must be 1..65535)", c.requests);
  IP_REQUIRE(c.topk_tokens >= 1, "batched decode: topk_tokens = {} (must be >= 1)", c.topk_tokens);
  IP_REQUIRE(c.max_tokens >= c.topk_tokens, "batched decode: max_tokens = {} is below topk_tokens = {}", c.max_tokens,
             c.topk_tokens);
  IP_REQUIRE(c.total_tokens >= c.max_tokens, "batched decode: total_tokens = {} is below max_tokens = {}",
             c.total_tokens, c.max_tokens);
  IP_REQUIRE(c.dim >= 1 && c.attn_dim >= 1 && c.value_dim >= 1, "batched decode: dims {}, {}, {} (must be >= 1)", c.dim,
             c.attn_dim, c.value_dim);
  IP_REQUIRE(c.index_heads >= 1 && c.attn_heads >= 1, "batched decode: heads {}, {} (must be >= 1)", c.index_heads,
             c.attn_heads);
  IP_REQUIRE(c.pool.group_size >= 1, "batched decode: group size {} (must be >= 1)", c.pool.group_size);
  const WeightParams& wp = c.pool.weights;
  IP_REQUIRE(!uses_stats(wp.scheme) && !uses_query_reference(wp),
             "batched decode: unsupported weighting '{}' (it learns from a request's history; use the pipeline)",
             to_string(wp.scheme));
  IP_REQUIRE(wp.positional_bias.empty() || static_cast<int>(wp.positional_bias.size()) == effective_group_size(c.pool),
             "batched decode: positional bias has {} entries for group size {}", wp.positional_bias.size(),
             effective_group_size(c.pool));
  const std::string forms = unsupported_forms(c.forms, c.dim, wp.scheme == Weighting::maxmin, c.attn_dim, c.value_dim, 0);
  IP_REQUIRE(forms.empty(), "batched decode: {}", forms);
}

std::size_t estimate_device_bytes(const BatchedDecodeConfig& c) {
  validate(c);
  return sizes_of(c).bytes;
}

std::string check_fits(const BatchedDecodeConfig& c, int device, std::size_t reserve_bytes) {
  const std::size_t need = estimate_device_bytes(c);
  if (device_count() <= device) return fmt::format("no CUDA device {} ({})", device, describe_devices());
  IP_CUDA_CHECK(cudaSetDevice(device));
  std::size_t free = 0, total = 0;
  IP_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  const std::size_t avail = free > reserve_bytes ? free - reserve_bytes : 0;
  if (need <= avail) return {};
  const double gib = 1ull << 30;
  return fmt::format("needs {:.2f} GiB of device memory, {:.2f} GiB free on device {} ({:.2f} GiB kept in reserve)",
                     need / gib, free / gib, device, reserve_bytes / gib);
}

struct BatchedDecoder::Impl {
  BatchedDecodeConfig c;
  Sizes z;
  int device = 0;
  Stream stream;
  Event e0, e1, e_score, e_topk;
  DeviceBuffer<float> keys, attn_keys, values, scales, scores, queries, head_w, attn_q, out, probs, bias;
  DeviceBuffer<std::uint8_t> payload, topk_ws, attn_ws;
  DeviceBuffer<long long> offsets;  // token [B+1], entry [B+1], block [B+1], prob [B+1]
  DeviceBuffer<std::int32_t> ids;
  FormsUsed used;  // kernel_forms()
  bool loaded = false;
  long long total = 0, entries = 0;

  long long* token_off() { return offsets.data(); }
  long long* entry_off() { return offsets.data() + (z.B + 1); }
  long long* block_off() { return offsets.data() + 2 * (z.B + 1); }
  long long* prob_off() { return offsets.data() + 3 * (z.B + 1); }
  Batch batch() {
    Batch b;
    b.requests = c.requests;
    b.token_offset = token_off();
    b.entry_offset = entry_off();
    b.total_tokens = total;
    b.total_entries = entries;
    return b;
  }
};

BatchedDecoder::BatchedDecoder(const BatchedDecodeConfig& c, int device) {
  validate(c);
  IP_REQUIRE(device >= 0 && device < device_count(), "batched decode: no CUDA device {} ({})", device,
             describe_devices());
  IP_CUDA_CHECK(cudaSetDevice(device));
  impl_ = std::make_unique<Impl>();
  Impl& m = *impl_;
  m.c = c;
  m.z = sizes_of(c);
  m.device = device;
  const auto T = static_cast<std::size_t>(m.z.total), B = static_cast<std::size_t>(m.z.B);
  const auto rows = static_cast<std::size_t>(m.z.rows), kg = static_cast<std::size_t>(m.z.k_groups);
  m.keys.resize(T * c.dim);
  m.attn_keys.resize(T * c.attn_dim);
  m.values.resize(T * c.value_dim);
  m.payload.resize(rows * c.dim * element_bytes(c.pool.precision));
  if (scale_bytes(c.pool.precision)) m.scales.resize(rows);
  m.scores.resize(static_cast<std::size_t>(m.z.groups));
  m.offsets.resize(4 * (B + 1));
  m.queries.resize(B * c.index_heads * c.dim);
  m.head_w.resize(B * c.index_heads);
  m.attn_q.resize(B * c.attn_heads * c.attn_dim);
  m.ids.resize(B * kg);
  m.out.resize(B * c.attn_heads * c.value_dim);
  if (c.want_probs) m.probs.resize(B * c.attn_heads * static_cast<std::size_t>(m.z.attended));
  m.bias.resize(static_cast<std::size_t>(m.z.G));
  m.topk_ws.resize(m.z.topk_ws);
  m.attn_ws.resize(m.z.attn_ws);
}

BatchedDecoder::~BatchedDecoder() = default;

float BatchedDecoder::load(const BatchedContext& ctx) {
  Impl& m = *impl_;
  const BatchedDecodeConfig& c = m.c;
  const long long B = m.z.B, G = m.z.G, kg = m.z.k_groups;
  IP_REQUIRE(static_cast<long long>(ctx.token_offset.size()) == B + 1, "batched decode: token_offset has {} entries for {} requests",
             ctx.token_offset.size(), B);
  IP_REQUIRE(ctx.token_offset[0] == 0, "batched decode: token_offset[0] = {} (must be 0)", ctx.token_offset[0]);
  std::vector<long long> off(4 * (B + 1));
  for (long long b = 0; b < B; ++b) {
    const long long Tb = ctx.token_offset[b + 1] - ctx.token_offset[b];
    IP_REQUIRE(Tb >= c.topk_tokens, "batched decode: request {} has {} tokens, fewer than topk_tokens = {}", b, Tb,
               c.topk_tokens);
    IP_REQUIRE(Tb <= c.max_tokens, "batched decode: request {} has {} tokens, more than max_tokens = {}", b, Tb,
               c.max_tokens);
    off[b + 1] = ctx.token_offset[b + 1];
    off[(B + 1) + b + 1] = off[(B + 1) + b] + num_groups(Tb, static_cast<int>(G));
    off[2 * (B + 1) + b + 1] = (b + 1) * kg;
    off[3 * (B + 1) + b + 1] = (b + 1) * kg * G;
  }
  m.total = off[B];
  m.entries = off[2 * B + 1];
  IP_REQUIRE(m.total <= m.z.total, "batched decode: {} tokens, more than total_tokens = {}", m.total, m.z.total);
  const auto T = static_cast<std::size_t>(m.total);
  const bool packed = ctx.index_keys || ctx.attn_keys || ctx.values;
  if (packed) {
    IP_REQUIRE(ctx.index_keys && ctx.attn_keys && ctx.values, "batched decode: context arrays missing");
    IP_REQUIRE(finite_rows(ctx.index_keys, T * c.dim), "pooling: an index key contains NaN or infinity");
  } else {
    const auto nb = static_cast<std::size_t>(B);
    IP_REQUIRE(ctx.request_index_keys.size() == nb && ctx.request_attn_keys.size() == nb &&
                   ctx.request_values.size() == nb,
               "batched decode: context arrays missing (neither packed arrays nor {} per-request pointers each)", B);
    for (std::size_t b = 0; b < nb; ++b) {
      const auto n = static_cast<std::size_t>(off[b + 1] - off[b]);
      IP_REQUIRE(ctx.request_index_keys[b] && ctx.request_attn_keys[b] && ctx.request_values[b],
                 "batched decode: request {}'s context arrays missing", b);
      IP_REQUIRE(finite_rows(ctx.request_index_keys[b], n * c.dim),
                 "pooling: an index key of request {} contains NaN or infinity", b);
    }
  }

  IP_CUDA_CHECK(cudaSetDevice(m.device));
  cudaStream_t s = m.stream.get();
  m.offsets.upload(off.data(), off.size(), s);
  m.keys.resize(T * c.dim);
  m.attn_keys.resize(T * c.attn_dim);
  m.values.resize(T * c.value_dim);
  if (packed) {
    m.keys.upload_at(0, ctx.index_keys, T * c.dim, s);
    m.attn_keys.upload_at(0, ctx.attn_keys, T * c.attn_dim, s);
    m.values.upload_at(0, ctx.values, T * c.value_dim, s);
  } else {
    for (long long b = 0; b < B; ++b) {
      const auto at = static_cast<std::size_t>(off[b]), n = static_cast<std::size_t>(off[b + 1] - off[b]);
      const auto i = static_cast<std::size_t>(b);
      m.keys.upload_at(at * c.dim, ctx.request_index_keys[i], n * c.dim, s);
      m.attn_keys.upload_at(at * c.attn_dim, ctx.request_attn_keys[i], n * c.attn_dim, s);
      m.values.upload_at(at * c.value_dim, ctx.request_values[i], n * c.value_dim, s);
    }
  }

  const WeightParams& wp = c.pool.weights;
  PoolArgs a;
  a.batch = m.batch();
  a.keys = m.keys.data();
  a.key_type = KeyType::fp32;
  a.dim = c.dim;
  a.group_size = static_cast<int>(G);
  set_weight_args(wp, m.bias, s, a);
  a.precision = c.pool.precision;
  a.payload = m.payload.data();
  a.scales = scale_bytes(c.pool.precision) ? m.scales.data() : nullptr;
  // An untimed launch first, with the same writes: the first pool launch of a process loads its kernel
  // (lazy module loading, on the host, while the stream idles after e0), which the events would count.
  pool(a, s);
  m.e0.record(s);
  pool(a, s);
  m.e1.record(s);
  m.e1.sync();
  m.loaded = true;
  return m.e1.ms_since(m.e0);
}

BatchedStep BatchedDecoder::step(const BatchedQueries& q) {
  Impl& m = *impl_;
  const BatchedDecodeConfig& c = m.c;
  IP_REQUIRE(m.loaded, "batched decode: step() before load()");
  IP_REQUIRE(q.index_queries && q.head_weights && q.attn_queries, "batched decode: query arrays missing");
  const auto B = static_cast<std::size_t>(m.z.B);
  for (std::size_t i = 0; i < B * c.index_heads; ++i)
    IP_REQUIRE(std::isfinite(q.head_weights[i]) && q.head_weights[i] >= 0.0f,
               "scoring: head weight {} = {} (must be finite and >= 0)", i, q.head_weights[i]);
  IP_REQUIRE(finite_rows(q.index_queries, B * c.index_heads * c.dim), "scoring: a query head contains NaN or infinity");
  IP_CUDA_CHECK(cudaSetDevice(m.device));
  cudaStream_t s = m.stream.get();
  m.queries.upload(q.index_queries, B * c.index_heads * c.dim, s);
  m.head_w.upload(q.head_weights, B * c.index_heads, s);
  m.attn_q.upload(q.attn_queries, B * c.attn_heads * c.attn_dim, s);

  m.e0.record(s);
  ScoreArgs sa;
  sa.batch = m.batch();
  sa.rows = m.payload.data();
  sa.scales = scale_bytes(c.pool.precision) ? m.scales.data() : nullptr;
  sa.precision = c.pool.precision;
  sa.dim = c.dim;
  sa.maxmin = c.pool.weights.scheme == Weighting::maxmin;
  sa.queries = m.queries.data();
  sa.head_weights = m.head_w.data();
  sa.heads = c.index_heads;
  sa.scores = m.scores.data();
  sa.math = score_math(c.forms.score);
  score(sa, s);
  m.used.note("score", to_string(resolve_score_math(sa)));
  m.e_score.record(s);

  TopkArgs ta;
  ta.rows = c.requests;
  ta.row_offset = m.entry_off();
  ta.max_row = m.z.max_groups;
  ta.scores = m.scores.data();
  ta.k = static_cast<int>(m.z.k_groups);
  ta.ids = m.ids.data();
  ta.workspace = m.topk_ws.data();
  ta.workspace_bytes = m.topk_ws.size();
  ta.launch = topk_launch(c.forms.topk);
  topk(ta, s);
  m.used.note("top-k", to_string(ta.launch));
  m.e_topk.record(s);

  AttentionArgs aa;
  aa.batch = m.batch();
  aa.keys = m.attn_keys.data();
  aa.values = m.values.data();
  aa.dim = c.attn_dim;
  aa.vdim = c.value_dim;
  aa.queries = m.attn_q.data();
  aa.heads = c.attn_heads;
  aa.blocks = m.ids.data();
  aa.block_offset = m.block_off();
  aa.block_size = static_cast<int>(m.z.G);
  aa.max_attended = m.z.attended;
  aa.out = m.out.data();
  if (c.want_probs) {
    aa.probs = m.probs.data();
    aa.prob_offset = m.prob_off();
  }
  aa.workspace = m.attn_ws.data();
  aa.workspace_bytes = m.attn_ws.size();
  aa.kernel = attn_kernel(c.forms.attention);
  attention(aa, s);
  m.used.note("attention", to_string(aa.kernel));
  m.e1.record(s);

  BatchedStep r;
  r.k_groups = m.z.k_groups;
  r.selected.resize(m.ids.size());
  m.ids.download(r.selected.data(), r.selected.size(), s);
  r.out.resize(m.out.size());
  m.out.download(r.out.data(), r.out.size(), s);
  if (c.want_probs) {
    r.probs.resize(m.probs.size());
    m.probs.download(r.probs.data(), r.probs.size(), s);
  }
  attention_check(aa, s);  // synchronizes the stream
  r.device_ms = m.e1.ms_since(m.e0);
  r.score_ms = m.e_score.ms_since(m.e0);
  r.topk_ms = m.e_topk.ms_since(m.e_score);
  r.attention_ms = m.e1.ms_since(m.e_topk);
  return r;
}

std::vector<std::uint8_t> BatchedDecoder::index_payload() const {
  const Impl& m = *impl_;
  IP_REQUIRE(m.loaded, "batched decode: index_payload() before load()");
  IP_CUDA_CHECK(cudaSetDevice(m.device));
  const std::size_t rows = static_cast<std::size_t>(m.entries * m.z.rpg);
  std::vector<std::uint8_t> h(rows * m.c.dim * element_bytes(m.c.pool.precision));
  m.payload.download(h.data(), h.size(), m.stream.get());
  m.stream.sync();
  return h;
}

std::string BatchedDecoder::kernel_forms() const { return impl_->used.describe(); }

}  // namespace ip::cuda
