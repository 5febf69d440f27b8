#include "experiments/config.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sys/resource.h>
#include <unistd.h>
#include <fstream>
#include <set>
#include <sstream>
#include <unordered_set>

#include "core/adaptive.h"
#include "core/error.h"
#include "core/parallel.h"
#include "cache_sim/capacity.h"
#include "experiments/import.h"

namespace ip::exp {
namespace {

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> split_list(const std::string& v) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(v);
  while (std::getline(in, item, ',')) out.push_back(trim(item));
  if (!v.empty() && v.back() == ',') out.push_back("");
  return out;
}

long long parse_int(const std::string& v);

// Expands `pow2:A..B` and `range:A..B[:STEP]` items; other items stay as written.
std::vector<std::string> expand_items(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const auto& it : items) {
    const bool pow2 = it.rfind("pow2:", 0) == 0, range = it.rfind("range:", 0) == 0;
    if (!pow2 && !range) {
      out.push_back(it);
      continue;
    }
    const std::string body = it.substr(pow2 ? 5 : 6);
    const auto dots = body.find("..");
    IP_REQUIRE(dots != std::string::npos, "'{}': expected {}A..B", it, pow2 ? "pow2:" : "range:");
    std::string hi = body.substr(dots + 2), step_s = "1";
    if (const auto colon = hi.find(':'); colon != std::string::npos) {
      IP_REQUIRE(range, "'{}': pow2 ranges take no step", it);
      step_s = hi.substr(colon + 1);
      hi = hi.substr(0, colon);
    }
    const long long a = parse_int(trim(body.substr(0, dots))), b = parse_int(trim(hi)), step = parse_int(trim(step_s));
    IP_REQUIRE(step > 0, "'{}': step must be > 0", it);
    IP_REQUIRE(a <= b, "'{}': empty range ({} > {})", it, a, b);
    IP_REQUIRE((b - a) / step < 100000, "'{}': more than 100000 values", it);
    if (pow2) IP_REQUIRE(a >= 0 && b <= 62, "'{}': exponents must lie in 0..62", it);
    for (long long x = a; x <= b; x += step) out.push_back(std::to_string(pow2 ? (1LL << x) : x));
  }
  return out;
}

// Integers with an optional binary unit: 65536, 64Ki, 1Mi, 2Gi.
long long parse_int(const std::string& v) {
  long long mult = 1;
  std::string num = v;
  for (auto [suffix, m] : {std::pair{"Ki", 1LL << 10}, std::pair{"Mi", 1LL << 20}, std::pair{"Gi", 1LL << 30}}) {
    if (num.size() > 2 && num.ends_with(suffix)) {
      num = num.substr(0, num.size() - 2);
      mult = m;
      break;
    }
  }
  long long x = 0;
  const auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), x);
  IP_REQUIRE(ec == std::errc() && p == num.data() + num.size(), "'{}' is not an integer (units: Ki, Mi, Gi)", v);
  IP_REQUIRE(x <= (1LL << 62) / mult && x >= -(1LL << 62) / mult, "'{}' is out of range", v);
  return x * mult;
}

int parse_i32(const std::string& v) {
  const long long x = parse_int(v);
  IP_REQUIRE(x >= INT32_MIN && x <= INT32_MAX, "'{}' is out of the 32-bit range", v);
  return static_cast<int>(x);
}

double parse_double(const std::string& v) {
  std::size_t used = 0;
  double x = 0;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  IP_REQUIRE(used == v.size() && used > 0, "'{}' is not a number", v);
  // No key takes NaN or infinity (pool.repool_tau's "off" is -1, limits are 0 for none).
  IP_REQUIRE(std::isfinite(x), "'{}' is not a finite number", v);
  return x;
}

bool parse_bool(const std::string& v) {
  if (v == "true" || v == "1" || v == "yes" || v == "on") return true;
  if (v == "false" || v == "0" || v == "no" || v == "off") return false;
  throw Error(fmt::format("'{}' is not a boolean (true or false)", v));
}

std::string one_of(const std::string& v, std::initializer_list<const char*> allowed) {
  for (const char* a : allowed)
    if (v == a) return v;
  std::string list;
  for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
  throw Error(fmt::format("'{}' is not one of: {}", v, list));
}

// A kernel form (core/kernel_forms.h) by its config name.
template <class E, std::size_t N>
E parse_form(const std::string& v, const std::array<std::string_view, N>& names) {
  const int i = form_index(v, names);
  if (i >= 0) return static_cast<E>(i);
  std::string list;
  for (std::string_view n : names) list += (list.empty() ? "" : ", ") + std::string(n);
  throw Error(fmt::format("'{}' is not one of: {}", v, list));
}

std::vector<float> parse_floats(const std::string& v) {
  std::vector<float> out;
  std::istringstream in(v);
  std::string tok;
  while (in >> tok) out.push_back(static_cast<float>(parse_double(tok)));
  return out;
}

std::string default_metric_list() {
  std::string s;
  for (const auto& m : default_metrics()) s += (s.empty() ? "" : " ") + m;
  return s;
}

std::vector<KeyInfo> make_keys() {
  using P = Point;
  std::vector<KeyInfo> k = {
      {"backend", "cpu", "cpu, cuda or auto. cuda needs a CUDA build, a device and room for the point (else the point is\n"
       "                                          skipped with the reason); auto: cuda when a device is present, else cpu",
       [](P& p, const std::string& v) { p.backend = one_of(v, {"cpu", "cuda", "auto"}); }},
      {"threads", "0", "CPU backend threads (0 = OpenMP's default: all hardware threads unless OMP_NUM_THREADS)",
       [](P& p, const std::string& v) {
         p.threads = parse_i32(v);
         IP_REQUIRE(p.threads >= 0 && p.threads <= 4096, "threads must be in 0..4096 (0: all hardware threads)");
       }},
      {"threads_per_request", "0",
       "0: a point's requests run one after another, each on all threads; N >= 1: threads / N requests at once,\n"
       "                                          each on N threads (cpu backend; the same results, stage times measured\n"
       "                                          while the other requests run)",
       [](P& p, const std::string& v) {
         p.threads_per_request = parse_i32(v);
         IP_REQUIRE(p.threads_per_request >= 0 && p.threads_per_request <= 4096,
                    "threads_per_request must be in 0..4096");
       }},
      {"workload.source", "synthetic",
       "'synthetic' (the generator below) or the path of an HDF5 file with index_keys [T,D], index_queries\n"
       "                                          [Q,H,D], head_weights [Q,H] (and optionally attn_keys, attn_queries, values)",
       [](P& p, const std::string& v) { p.source = v; }},
      {"workload.tokens", "65536", "context length T of the longest request (tokens; units Ki, Mi)",
       [](P& p, const std::string& v) { p.workload.tokens = parse_int(v); }},
      {"workload.dim", "128", "index key dimension D", [](P& p, const std::string& v) { p.workload.dim = parse_i32(v); }},
      {"workload.index_heads", "8", "indexer heads H",
       [](P& p, const std::string& v) { p.workload.index_heads = parse_i32(v); }},
      {"workload.attn_dim", "128", "attention key dimension Da (0 = no attention stage)",
       [](P& p, const std::string& v) { p.workload.attn_dim = parse_i32(v); }},
      {"workload.attn_heads", "4", "attention heads Ha sharing keys and values",
       [](P& p, const std::string& v) { p.workload.attn_heads = parse_i32(v); }},
      {"workload.value_dim", "128", "value dimension Dv",
       [](P& p, const std::string& v) { p.workload.value_dim = parse_i32(v); }},
      {"workload.steps", "16", "decode steps (queries) per request",
       [](P& p, const std::string& v) { p.workload.steps = parse_i32(v); }},
      {"workload.requests", "1", "concurrent requests B, each with its own context",
       [](P& p, const std::string& v) { p.workload.requests = parse_i32(v); }},
      {"workload.length_spread", "0", "request lengths vary uniformly in [T(1-spread), T]",
       [](P& p, const std::string& v) { p.workload.length_spread = parse_double(v); }},
      {"workload.topics", "64", "topic clusters of the text spans",
       [](P& p, const std::string& v) { p.workload.topics = parse_i32(v); }},
      {"workload.topic_run", "48", "mean run length of one topic (tokens)",
       [](P& p, const std::string& v) { p.workload.topic_run = parse_double(v); }},
      {"workload.topic_weight", "0.7", "key = w * topic centre + sqrt(1-w^2) * noise",
       [](P& p, const std::string& v) { p.workload.topic_weight = parse_double(v); }},
      {"workload.sharpness", "1.0", "query scale (on-topic logit gain ~ sharpness * topic_weight * sqrt(D))",
       [](P& p, const std::string& v) { p.workload.sharpness = parse_double(v); }},
      {"workload.head_noise", "0.5", "per-head deviation of indexer query heads",
       [](P& p, const std::string& v) { p.workload.head_noise = parse_double(v); }},
      {"workload.query_drift", "0.2", "per-step random-walk step of the query",
       [](P& p, const std::string& v) { p.workload.query_drift = parse_double(v); }},
      {"workload.jump_prob", "0.1", "probability that a step jumps to a new topic",
       [](P& p, const std::string& v) { p.workload.jump_prob = parse_double(v); }},
      {"workload.needles", "4", "planted needle tokens (each its own token after the sinks, at most workload.tokens; a "
                               "request shorter than sinks + needles plants fewer)", [](P& p, const std::string& v) { p.workload.needles = parse_i32(v); }},
      {"workload.needle_strength", "1.5", "needle key strength",
       [](P& p, const std::string& v) { p.workload.needle_strength = parse_double(v); }},
      {"workload.needle_query_prob", "0.15", "probability that a new focus is a needle",
       [](P& p, const std::string& v) { p.workload.needle_query_prob = parse_double(v); }},
      {"workload.sinks", "4", "attention-sink tokens at the start", [](P& p, const std::string& v) { p.workload.sinks = parse_i32(v); }},
      {"workload.sink_strength", "1.0", "sink key strength",
       [](P& p, const std::string& v) { p.workload.sink_strength = parse_double(v); }},
      {"workload.image_fraction", "0", "share of tokens in image-patch spans (multimodal)",
       [](P& p, const std::string& v) { p.workload.image_fraction = parse_double(v); }},
      {"workload.image_side", "32", "patches per side of an image span",
       [](P& p, const std::string& v) { p.workload.image_side = parse_i32(v); }},
      {"workload.attn_noise", "0.3", "noise between index keys and attention keys",
       [](P& p, const std::string& v) { p.workload.attn_noise = parse_double(v); }},
      {"workload.seed", "0", "generator seed", [](P& p, const std::string& v) {
         const long long s = parse_int(v);
         IP_REQUIRE(s >= 0, "seed must be >= 0");
         p.workload.seed = static_cast<std::uint64_t>(s);
       }},
      {"pool.group_size", "4", "G, keys pooled per composite (>= 1)", [](P& p, const std::string& v) {
         p.pipeline.pool.group_size = parse_i32(v);
         IP_REQUIRE(p.pipeline.pool.group_size >= 1, "group size must be >= 1");
       }},
      {"pool.weighting", "uniform", "uniform, positional, cosine, tfidf, hybrid, maxmin (Quest bounds) or exact",
       [](P& p, const std::string& v) { p.pipeline.pool.weights.scheme = parse_weighting(v); }},
      {"pool.precision", "fp32", "stored index precision: fp32, fp16, bf16, int8, fp8",
       [](P& p, const std::string& v) { p.pipeline.pool.precision = parse_precision(v); }},
      {"pool.positional_lambda", "1.0", "lambda of positional weights exp(lambda r/(G-1))",
       [](P& p, const std::string& v) { p.pipeline.pool.weights.positional_lambda = static_cast<float>(parse_double(v)); }},
      {"pool.positional_bias", "", "explicit per-slot bias b (G numbers, space-separated): w = exp(b_r)",
       [](P& p, const std::string& v) { p.pipeline.pool.weights.positional_bias = parse_floats(v); }},
      {"pool.eps", "0.001", "floor of cosine weights, additive term of tfidf weights",
       [](P& p, const std::string& v) { p.pipeline.pool.weights.eps = static_cast<float>(parse_double(v)); }},
      {"pool.cosine_power", "1", "p of cosine weights", [](P& p, const std::string& v) {
         p.pipeline.pool.weights.cosine_power = static_cast<float>(parse_double(v));
       }},
      {"pool.cosine_reference", "group_mean", "group_mean or query (EMA of past queries)",
       [](P& p, const std::string& v) { p.pipeline.pool.weights.cosine_reference = parse_cosine_reference(v); }},
      {"pool.alpha_positional", "1", "hybrid exponent of positional weights",
       [](P& p, const std::string& v) { p.pipeline.pool.weights.alpha_positional = static_cast<float>(parse_double(v)); }},
      {"pool.alpha_cosine", "1", "hybrid exponent of cosine weights",
       [](P& p, const std::string& v) { p.pipeline.pool.weights.alpha_cosine = static_cast<float>(parse_double(v)); }},
      {"pool.alpha_tfidf", "1", "hybrid exponent of tfidf weights",
       [](P& p, const std::string& v) { p.pipeline.pool.weights.alpha_tfidf = static_cast<float>(parse_double(v)); }},
      {"pool.tfidf_decay", "0.99", "gamma: per-step decay of the attention mass statistics",
       [](P& p, const std::string& v) { p.pipeline.stats_decay = static_cast<float>(parse_double(v)); }},
      {"pool.query_ema", "0.9", "EMA factor of the query reference", [](P& p, const std::string& v) {
         p.pipeline.query_ema = static_cast<float>(parse_double(v));
       }},
      {"pool.rebuild_every", "1", "steps between index rebuilds for tfidf, hybrid and query-cosine",
       [](P& p, const std::string& v) { p.pipeline.rebuild_every = parse_i32(v); }},
      {"select.topk_tokens", "2048", "token budget k (k/G groups are selected)",
       [](P& p, const std::string& v) { p.pipeline.topk_tokens = parse_int(v); }},
      {"select.fidelity", "true", "compute exact-indexer and dense-attention metrics",
       [](P& p, const std::string& v) { p.pipeline.fidelity = parse_bool(v); }},
      {"select.batched", "false",
       "backend = cuda: decode the point's requests together, one launch per stage and step for all of them "
       "(batched decoder; the cpu backend runs them one after another, same selections). Needs a scheme that "
       "does not learn (exact, uniform, positional, maxmin, cosine with group_mean), the plain sparse layer and "
       "an attention stage, and refuses output.save_tensors, cache.relevance = cosine, profile.counters and "
       "profile.kernel_records; stage times are then those of the whole batch. A batch that does not fit the "
       "device is skipped (backend = auto: runs on the cpu, saying why)",
       [](P& p, const std::string& v) { p.batched = parse_bool(v); }},
      {"cache.enabled", "true", "replay each point's selections through the cache hierarchy",
       [](P& p, const std::string& v) { p.cache.enabled = parse_bool(v); }},
      {"cache.levels", "lru:16KiB clock:256KiB semantic:8MiB",
       "space-separated POLICY:CAPACITY levels, closest first (capacity: entries, or bytes with KiB/MiB/GiB);\n"
       "                                          policies: lru clock fifo lfu sieve semantic semantic-cos opt",
       [](P& p, const std::string& v) {
         std::vector<std::string> levels;
         std::istringstream in(v);
         for (std::string l; in >> l;) levels.push_back(l);
         p.cache.levels = levels;
         CacheParams check = p.cache;
         check.enabled = true;
         validate_cache(check);
       }},
      {"cache.mode", "nine", "nine (non-inclusive non-exclusive), inclusive or exclusive",
       [](P& p, const std::string& v) { p.cache.mode = one_of(v, {"nine", "inclusive", "exclusive"}); }},
      {"cache.object", "kv", "what one access is: kv (the group's keys and values) or index (its index entry)",
       [](P& p, const std::string& v) { p.cache.object = one_of(v, {"kv", "index"}); }},
      {"cache.kv_bytes", "2", "bytes per KV element for cache.object = kv, 1..8 (2: bf16)", [](P& p, const std::string& v) {
         p.cache.kv_bytes = parse_i32(v);
         IP_REQUIRE(p.cache.kv_bytes >= 1 && p.cache.kv_bytes <= 8, "must be 1..8");
       }},
      {"cache.relevance", "mass",
       "score each access carries (semantic levels rank by it): mass (attention mass the step gave the\n"
       "                                          group) or cosine ((1 + cos(group's composite key, EMA of the queries with\n"
       "                                          factor pool.query_ema)) / 2; needed by semantic-cos levels)",
       [](P& p, const std::string& v) { p.cache.relevance = one_of(v, {"mass", "cosine"}); }},
      {"cache.opt_bound", "true",
       "also replay under Belady's OPT: the hierarchy with opt at every level (a reference), and one opt\n"
       "                                          cache of all levels' capacity (the upper bound on the overall hit rate)",
       [](P& p, const std::string& v) { p.cache.opt_bound = parse_bool(v); }},
      {"cache.mrc", "true", "store the exact LRU miss-ratio curve of each point's trace",
       [](P& p, const std::string& v) { p.cache.mrc = parse_bool(v); }},
      // ---- issue 7: hybrid layer, index updates, growing contexts, adaptive compression, limits.
      {"workload.gate_decay", "0.9", "median gate alpha of the local linear branch, in (0, 1]",
       [](P& p, const std::string& v) { p.workload.gate_decay = parse_double(v); }},
      {"workload.gate_spread", "0.5", "log-scale spread of the gates: alpha = max(decay^exp(spread*s), 2^-126), s uniform, unit variance",
       [](P& p, const std::string& v) { p.workload.gate_spread = parse_double(v); }},
      {"workload.append_per_step", "0", "growing context: tokens each decode step appends (prompt = workload.tokens)",
       [](P& p, const std::string& v) {
         p.workload.append_per_step = parse_i32(v);
         IP_REQUIRE(p.workload.append_per_step >= 0, "must be >= 0");
         p.pipeline.append_per_step = p.workload.append_per_step;
       }},
      {"hybrid.enabled", "false", "hybrid layer: local gated linear branch + the sparse branch (needs attn_dim > 0)",
       [](P& p, const std::string& v) { p.pipeline.hybrid.enabled = parse_bool(v); }},
      {"hybrid.window", "512", "tokens of the local branch (the last ones at the first decode step)",
       [](P& p, const std::string& v) {
         p.pipeline.hybrid.window = parse_int(v);
         IP_REQUIRE(p.pipeline.hybrid.window >= 1, "must be >= 1");
       }},
      {"hybrid.chunk", "64", "chunk length of the chunked linear-attention form (tokens)",
       [](P& p, const std::string& v) {
         p.pipeline.hybrid.chunk = parse_i32(v);
         IP_REQUIRE(p.pipeline.hybrid.chunk >= 1, "must be >= 1");
       }},
      {"hybrid.combine", "gate:0.5", "sum (o_sparse + o_local) or gate:G ((1-G) o_sparse + G o_local, 0 <= G <= 1)",
       [](P& p, const std::string& v) { p.pipeline.hybrid.combine = parse_combine(v); }},
      {"pool.repool_tau", "-1",
       "-1: full index rebuilds; tau >= 0: re-pool only groups whose weights moved by relative L1 > tau (0 = same bits)",
       [](P& p, const std::string& v) {
         const double t = parse_double(v);
         IP_REQUIRE(std::isfinite(t) && (t >= 0 || t == -1), "must be -1 or a number >= 0");
         p.pipeline.repool_tau = static_cast<float>(t);
       }},
      {"pool.async_updates", "false",
       "score step q with the index update started at step q-1 (double buffer; cpu: same selections, nothing overlaps)",
       [](P& p, const std::string& v) { p.pipeline.async_updates = parse_bool(v); }},
      {"adaptive.enabled", "false", "per-segment group sizes in {1,2,4,8,16} under adaptive.budget",
       [](P& p, const std::string& v) { p.pipeline.adaptive.enabled = parse_bool(v); }},
      {"adaptive.budget", "0", "index bytes per context token the adaptive sizes must fit (total <= budget * T)",
       [](P& p, const std::string& v) {
         p.pipeline.adaptive.budget_bytes_per_token = parse_double(v);
         IP_REQUIRE(p.pipeline.adaptive.budget_bytes_per_token >= 0, "must be >= 0");
       }},
      {"adaptive.segment", "256", "tokens per segment (a multiple of 16)",
       [](P& p, const std::string& v) {
         p.pipeline.adaptive.segment = parse_i32(v);
         IP_REQUIRE(p.pipeline.adaptive.segment >= 16 && p.pipeline.adaptive.segment % 16 == 0,
                    "must be a positive multiple of 16");
       }},
      {"adaptive.access_weight", "1", "weight of a segment's attention mass in its score",
       [](P& p, const std::string& v) { p.pipeline.adaptive.access_weight = static_cast<float>(parse_double(v)); }},
      {"adaptive.disagreement_weight", "1", "weight of a segment's key disagreement (mean 1 - cos to its mean)",
       [](P& p, const std::string& v) { p.pipeline.adaptive.disagreement_weight = static_cast<float>(parse_double(v)); }},
      // GPU kernel forms (core/kernel_forms.h): the cuda backend's choice per stage, for end-to-end A/B sweeps.
      {"kernels.score_math", "auto",
       "cuda scoring: fp32 (CUDA cores), split (tensor cores, query split into hi+lo parts: f16 for fp16/int8/fp8\n"
       "                                          rows, 2^-22 relative; bf16 for bf16/fp32 rows, 2^-16), bf16 (tensor cores, one bf16\n"
       "                                          product: 2^-7) or auto (split at >= 8 heads, else fp32).\n"
       "                                          split and bf16 need dim 64/128/256 and a scheme other than maxmin. The cpu backend ignores it",
       [](P& p, const std::string& v) { p.pipeline.kernels.score = parse_form<ScoreForm>(v, kScoreFormNames); }},
      {"kernels.topk", "auto",
       "cuda top-k: chain (a kernel per step), single (one launch), cluster (a thread block cluster a row,\n"
       "                                          sm_90+), block (one block a row) or auto (chain). Same ids whatever the form",
       [](P& p, const std::string& v) { p.pipeline.kernels.topk = parse_form<TopkForm>(v, kTopkFormNames); }},
      {"kernels.attention", "auto",
       "cuda attention: tiles (shared-memory tiles), lanes (a lane per token; attn_dim and value_dim\n"
       "                                          64/128/256) or auto (tiles). Outputs differ in the last bits",
       [](P& p, const std::string& v) { p.pipeline.kernels.attention = parse_form<AttentionForm>(v, kAttentionFormNames); }},
      {"kernels.linear_attention", "auto",
       "cuda hybrid-layer prefill: sequential (chunks in order), chunked (chunks in parallel, same bits)\n"
       "                                          or auto (sequential)",
       [](P& p, const std::string& v) { p.pipeline.kernels.linear = parse_form<LinearForm>(v, kLinearFormNames); }},
      {"limits.max_context", "0", "largest context a request may hold, tokens (0: no limit); checked before any work",
       [](P& p, const std::string& v) {
         p.max_context = parse_int(v);
         IP_REQUIRE(p.max_context >= 0, "must be >= 0");
       }},
      {"output.path", "", "results HDF5 file (empty: print the table only)",
       [](P& p, const std::string& v) { p.output_path = v; }},
      {"output.save_tensors", "false", "store each point's composite keys and selected group ids (adaptive points:\n"
       "                                          the last index's composite keys only)",
       [](P& p, const std::string& v) { p.save_tensors = parse_bool(v); }},
      {"output.cache_trace", "",
       "write each point's cache access trace to this file, for 'indexpool cache-sim --trace' ({index} in\n"
       "                                          the path becomes the point's 6-digit index; required when the sweep has\n"
       "                                          several points); an existing file is replaced only with --overwrite or --resume",
       [](P& p, const std::string& v) { p.cache_trace = v; }},
      {"output.cache_trace_format", "auto",
       "auto (from the name: .csv csv, .bin oracle, else txt), txt (id size score), csv (id, size, score,\n"
       "                                          request, step) or oracle (ids and sizes only: semantic levels replay with score 1)",
       [](P& p, const std::string& v) { p.cache_trace_format = one_of(v, {"auto", "txt", "csv", "oracle"}); }},
      // Profiling (experiments/profiling.h, README "Profiling").
      {"profile.counters", "off",
       "read CUPTI hardware counters per stage into point_<i>/counters (cuda backend and a GPU; each stage\n"
       "                                          call is replayed once per CUPTI pass, so stage times include the replays)",
       [](P& p, const std::string& v) { p.profile.counters = parse_bool(v); }},
      {"profile.metrics", default_metric_list(),
       "CUPTI / Nsight Compute metric names, space-separated; checked against profile.chip before any point runs",
       [](P& p, const std::string& v) {
         std::vector<std::string> m;
         std::istringstream in(v);
         for (std::string s; in >> s;) m.push_back(s);
         IP_REQUIRE(!m.empty(), "no metric names");
         p.profile.metrics = m;
       }},
      {"profile.kernel_records", "off",
       "record every kernel launch (name, duration, grid, block, registers, shared memory) into point_<i>/kernels",
       [](P& p, const std::string& v) { p.profile.kernel_records = parse_bool(v); }},
      {"profile.chip", "auto",
       "CUPTI chip the metric names are checked against (GH100: H100/H200, GA100: A100); auto: device 0's chip,\n"
       "                                          GH100 without a device",
       [](P& p, const std::string& v) { p.profile.chip = v; }},
  };
  return k;
}

const KeyInfo* find_key(const std::string& name) {
  for (const auto& k : config_keys())
    if (k.name == name) return &k;
  return nullptr;
}

std::string joined(const std::vector<std::string>& values) {
  std::string out;
  for (const auto& v : values) out += (out.empty() ? "" : ",") + v;
  return out;
}

std::string where(const Setting& s) {
  if (s.line > 0) return fmt::format("{}:{}", s.file, s.line);
  return s.line < 0 ? s.file : std::string("command line");
}

std::string slurp_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

double cgroup_memory_limit(const std::string& mountinfo, const std::string& proc_cgroup, std::string* file) {
  // The process's cgroup paths: v2 ("0::PATH") and v1's memory controller ("N:a,memory,b:PATH").
  std::string v2_path, v1_path;
  {
    std::istringstream in(proc_cgroup);
    for (std::string line; std::getline(in, line);) {
      const auto a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
      if (b == std::string::npos) continue;
      const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
      if (line.compare(0, a, "0") == 0 && controllers.empty()) v2_path = path;
      if (("," + controllers + ",").find(",memory,") != std::string::npos) v1_path = path;
    }
  }
  double lowest = 0;
  auto consider = [&](const std::string& mount_root, const std::string& mount_point, const std::string& cgroup,
                      const char* name) {
    if (cgroup.empty() || cgroup.compare(0, mount_root.size(), mount_root) != 0) return;
    std::string rel = mount_root == "/" ? cgroup : cgroup.substr(mount_root.size());  // below the mount's root
    for (;;) {
      const std::string f = mount_point + (rel == "/" ? "" : rel) + "/" + name;
      std::string text = slurp_text(f);
      while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
      double v = 0;
      if (!text.empty() && text != "max") {
        char* end = nullptr;
        v = std::strtod(text.c_str(), &end);
        if (*end != '\0' || !(v > 0) || v >= std::ldexp(1.0, 60)) v = 0;  // unparsable, or "no limit" (v1)
      }
      if (v > 0 && (lowest == 0 || v < lowest)) {
        lowest = v;
        if (file) *file = f;
      }
      if (rel.empty() || rel == "/") break;
      const auto slash = rel.find_last_of('/');
      rel = slash == 0 || slash == std::string::npos ? "/" : rel.substr(0, slash);
    }
  };
  std::istringstream in(mountinfo);
  for (std::string line; std::getline(in, line);) {
    // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS
    std::istringstream ls(line);
    std::string id, parent, dev, root, point, opts, word;
    if (!(ls >> id >> parent >> dev >> root >> point >> opts)) continue;
    while (ls >> word && word != "-") {
    }
    std::string fstype, source, superopts;
    if (!(ls >> fstype >> source >> superopts)) continue;
    if (fstype == "cgroup2") consider(root, point, v2_path, "memory.max");
    if (fstype == "cgroup" && ("," + superopts + ",").find(",memory,") != std::string::npos)
      consider(root, point, v1_path, "memory.limit_in_bytes");
  }
  return lowest;
}

UsableMemory usable_memory() {
  UsableMemory m;
  const long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
  m.bytes = pages > 0 && size > 0 ? static_cast<double>(pages) * static_cast<double>(size) : 8.0 * (1LL << 30);
  m.what = fmt::format("RAM {}", format_bytes(m.bytes));
  std::string file;
  const double cg = cgroup_memory_limit(slurp_text("/proc/self/mountinfo"), slurp_text("/proc/self/cgroup"), &file);
  if (cg > 0 && cg < m.bytes) {
    m.bytes = cg;
    m.what = fmt::format("the cgroup memory limit {}, in {}", format_bytes(cg), file);
  }
  struct rlimit as {};
  if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY && static_cast<double>(as.rlim_cur) < m.bytes) {
    m.bytes = static_cast<double>(as.rlim_cur);
    m.what = fmt::format("ulimit -v {}", format_bytes(m.bytes));
  }
  return m;
}

const std::vector<KeyInfo>& config_keys() {
  static const std::vector<KeyInfo> keys = make_keys();
  return keys;
}

std::string describe_keys() {
  std::string out =
      "Config keys (INI: top-level keys before any section, then [section] key = value; '#' or ';' starts a\n"
      "comment line, ' #' a trailing comment). On the command line: --set section.key=value.\n"
      "\n"
      "Sweeps: a comma-separated value is an axis and the points are the grid of all axes (last axis\n"
      "fastest). Items may be integers with units (64Ki, 1Mi, 2Gi), pow2:A..B (2^A .. 2^B) or\n"
      "range:A..B[:STEP]. Environment: INDEXPOOL_PRECISION overrides pool.precision (--set overrides both).\n"
      "\n"
      "  [sweep] zip          = k1 k2, k3 k4   axes of each group move together (equal lengths)\n"
      "  [sweep] memory_limit = 16Gi          skip points estimated to need more (default: 80% of\n"
      "                                        RAM, or of a lower cgroup memory limit or ulimit -v)\n\n";
  for (const auto& k : config_keys())
    out += fmt::format("  {:<26} = {:<12} {}\n", k.name, k.default_value.empty() ? "\"\"" : k.default_value, k.help);
  return out;
}

Sweep load_sweep(const std::string& path, const std::vector<std::string>& overrides) {
  Sweep sw;
  sw.config_path = path;
  std::ifstream in(path);
  IP_REQUIRE(in.good() && !std::filesystem::is_directory(path), "cannot read config file '{}'", path);
  std::stringstream buf;
  buf << in.rdbuf();
  sw.config_text = buf.str();
  if (sw.config_text.rfind("\xEF\xBB\xBF", 0) == 0) sw.config_text.erase(0, 3);  // a UTF-8 byte order mark

  std::map<std::string, std::size_t> seen;  // key -> index in settings
  std::vector<Setting> meta;                 // [sweep] keys
  auto add = [&](Setting s) {
    if (s.values.empty()) s.values = {""};
    if (s.key.rfind("sweep.", 0) == 0) {
      IP_REQUIRE(s.key == "sweep.zip" || s.key == "sweep.memory_limit",
                 "{}: unknown key '{}' (the [sweep] section has zip and memory_limit)", where(s), s.key);
      for (auto& m : meta)
        if (m.key == s.key) {
          IP_REQUIRE(s.line == 0, "{}: key '{}' is set twice (first at line {})", where(s), s.key, m.line);
          IP_REQUIRE(m.line != 0, "command line: key '{}' is set twice with --set ('{}', then '{}')", s.key,
                     joined(m.values), joined(s.values));
          m = s;
          return;
        }
      meta.push_back(std::move(s));
      return;
    }
    const KeyInfo* k = find_key(s.key);
    IP_REQUIRE(k != nullptr, "{}: unknown key '{}' (see 'indexpool run --help-config')", where(s), s.key);
    IP_REQUIRE(s.values.size() == 1 || std::none_of(s.values.begin(), s.values.end(), [](auto& v) { return v.empty(); }),
               "{}: key '{}' has an empty item in its list", where(s), s.key);
    try {
      s.values = expand_items(s.values);
    } catch (const Error& e) {
      throw Error(fmt::format("{}: key '{}': {}", where(s), s.key, e.what()));
    }
    // Every value is checked now, before any point runs.
    std::unordered_set<std::string> listed;  // (a pairwise comparison took minutes for an axis of 100k values)
    for (std::size_t i = 0; i < s.values.size(); ++i) {
      Point scratch;
      try {
        k->apply(scratch, s.values[i]);
      } catch (const Error& e) {
        throw Error(fmt::format("{}: key '{}': {}", where(s), s.key, e.what()));
      }
      IP_REQUIRE(listed.insert(s.values[i]).second, "{}: key '{}' lists the value '{}' twice", where(s), s.key,
                 s.values[i]);
    }
    IP_REQUIRE(s.values.size() == 1 || s.key.rfind("output.", 0) != 0, "{}: key '{}' cannot be a sweep axis", where(s),
               s.key);
    if (auto it = seen.find(s.key); it != seen.end()) {
      IP_REQUIRE(s.line <= 0, "{}: key '{}' is set twice (first at line {})", where(s), s.key,
                 sw.settings[it->second].line);
      IP_REQUIRE(s.line < 0 || sw.settings[it->second].line != 0,
                 "command line: key '{}' is set twice with --set ('{}', then '{}')", s.key,
                 joined(sw.settings[it->second].values), joined(s.values));
      sw.settings[it->second] = std::move(s);  // an environment or command-line override replaces the file's value
    } else {
      seen[s.key] = sw.settings.size();
      sw.settings.push_back(std::move(s));
    }
  };

  std::istringstream lines(sw.config_text);
  std::string raw, section;
  int lineno = 0;
  while (std::getline(lines, raw)) {
    ++lineno;
    std::string line = trim(raw);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    if (const auto c = line.find(" #"); c != std::string::npos) line = trim(line.substr(0, c));  // trailing comment
    if (line.front() == '[') {
      IP_REQUIRE(line.back() == ']' && line.size() > 2, "{}:{}: malformed section header '{}'", path, lineno, line);
      section = trim(line.substr(1, line.size() - 2));
      continue;
    }
    const auto eq = line.find('=');
    IP_REQUIRE(eq != std::string::npos, "{}:{}: expected 'key = value', got '{}'", path, lineno, line);
    const std::string key = trim(line.substr(0, eq));
    IP_REQUIRE(!key.empty(), "{}:{}: missing key before '='", path, lineno);
    add(Setting{section.empty() ? key : section + "." + key, split_list(trim(line.substr(eq + 1))), path, lineno});
  }
  if (const char* env = std::getenv("INDEXPOOL_PRECISION"); env && *env) {
    add(Setting{"pool.precision", split_list(env), "environment INDEXPOOL_PRECISION", -1});
    sw.config_text += fmt::format("\n# environment: INDEXPOOL_PRECISION={}\n", env);
  }
  for (const auto& o : overrides) {
    const auto eq = o.find('=');
    IP_REQUIRE(eq != std::string::npos, "command line: --set expects key=value, got '{}'", o);
    add(Setting{trim(o.substr(0, eq)), split_list(trim(o.substr(eq + 1))), "", 0});
  }

  // [sweep] keys.
  {
    const UsableMemory m = usable_memory();
    sw.memory_limit = 0.8 * m.bytes;
    sw.memory_limit_source = "default: 80% of " + m.what;
  }
  for (const auto& m : meta) {
    try {
      if (m.key == "sweep.memory_limit") {
        IP_REQUIRE(m.values.size() == 1, "one value expected");
        sw.memory_limit = static_cast<double>(parse_int(m.values[0]));
        sw.memory_limit_source.clear();
        IP_REQUIRE(sw.memory_limit > 0, "must be > 0");
      } else {
        for (const auto& g : m.values) {
          std::vector<std::string> keys;
          std::istringstream gs(g);
          for (std::string k; gs >> k;) keys.push_back(k);
          IP_REQUIRE(keys.size() >= 2, "a zip group needs at least two keys, got '{}'", g);
          sw.zips.push_back(keys);
        }
      }
    } catch (const Error& e) {
      throw Error(fmt::format("{}: key '{}': {}", where(m), m.key, e.what()));
    }
  }

  // Axes: every multi-valued setting; a zip group is one axis of several keys.
  struct Axis {
    std::vector<const Setting*> keys;
    std::size_t size() const { return keys.front()->values.size(); }
  };
  std::vector<Axis> axes;
  std::map<std::string, int> zipped;  // key -> zip group
  std::string zip_at = path;             // where sweep.zip was set: file:line, or the command line
  for (const auto& m : meta)
    if (m.key == "sweep.zip") zip_at = where(m);
  for (std::size_t z = 0; z < sw.zips.size(); ++z)
    for (const auto& k : sw.zips[z]) {
      IP_REQUIRE(!zipped.count(k), "{}: sweep.zip names '{}' twice", zip_at, k);
      zipped[k] = static_cast<int>(z);
    }
  std::vector<int> zip_axis(sw.zips.size(), -1);
  for (const auto& s : sw.settings) {
    auto z = zipped.find(s.key);
    if (z == zipped.end()) {
      if (s.values.size() > 1) axes.push_back(Axis{{&s}});
      continue;
    }
    if (zip_axis[z->second] < 0) {
      zip_axis[z->second] = static_cast<int>(axes.size());
      axes.push_back(Axis{});
    }
    Axis& a = axes[zip_axis[z->second]];
    IP_REQUIRE(a.keys.empty() || a.size() == s.values.size(),
               "{}: zipped keys '{}' ({} values) and '{}' ({} values) differ in length", where(s),
               a.keys.front()->key, a.size(), s.key, s.values.size());
    a.keys.push_back(&s);
  }
  for (std::size_t z = 0; z < sw.zips.size(); ++z)
    for (const auto& k : sw.zips[z])
      IP_REQUIRE(seen.count(k), "{}: sweep.zip names '{}', which the config does not set", zip_at, k);

  Point base;
  for (const auto& k : config_keys()) k.apply(base, k.default_value);
  for (const auto& s : sw.settings)
    if (s.values.size() == 1 && !zipped.count(s.key)) find_key(s.key)->apply(base, s.values[0]);
  for (const auto& a : axes)
    for (const auto* k : a.keys) sw.axis_keys.push_back(k->key);

  std::size_t total = 1;
  for (const auto& a : axes) total *= a.size();
  IP_REQUIRE(total <= 10'000'000, "{}: the sweep has {} points (more than 10 million)", path, total);
  for (std::size_t i = 0; i < total; ++i) {
    Point p = base;
    std::size_t rem = i;
    std::vector<std::size_t> pick(axes.size());
    for (std::size_t a = axes.size(); a-- > 0;) {
      pick[a] = rem % axes[a].size();
      rem /= axes[a].size();
    }
    for (std::size_t a = 0; a < axes.size(); ++a)
      for (const auto* k : axes[a].keys) {
        find_key(k->key)->apply(p, k->values[pick[a]]);
        p.axes.emplace_back(k->key, k->values[pick[a]]);
      }
    p.index = i;
    for (const auto& [k, v] : p.axes) p.key += (p.key.empty() ? "" : ";") + k + "=" + v;
    if (p.key.empty()) p.key = "-";
    sw.points.push_back(std::move(p));
  }
  // INDEXPOOL_CACHE_SIZE (bytes, units allowed): the capacity of the last cache level.
  if (const char* env = std::getenv("INDEXPOOL_CACHE_SIZE"); env && *env) {
    long long bytes = 0;
    try {
      bytes = parse_int(env);
      IP_REQUIRE(bytes > 0, "must be > 0");
    } catch (const Error& e) {
      throw Error(fmt::format("environment INDEXPOOL_CACHE_SIZE = '{}': {}", env, e.what()));
    }
    // In the largest binary unit that divides it, as a config would write it (analysis/load.py reads it so):
    // the cache model's own text, without the space of "1000 B" (a level list is space-separated).
    std::string size = cache::Capacity{static_cast<std::uint64_t>(bytes), true}.text();
    size.erase(std::remove(size.begin(), size.end(), ' '), size.end());
    for (auto& p : sw.points) {
      std::string& last = p.cache.levels.back();
      last = last.substr(0, last.rfind(':')) + ":" + size;
      validate_cache(p.cache);
      // cache.levels as an axis: its column, the point's name and key say the levels the point runs with.
      bool named = false;
      for (auto& [k, v] : p.axes)
        if (k == "cache.levels") {
          v.clear();
          for (const auto& l : p.cache.levels) v += (v.empty() ? "" : " ") + l;
          named = true;
        }
      if (named) {
        p.key.clear();
        for (const auto& [k, v] : p.axes) p.key += (p.key.empty() ? "" : ";") + k + "=" + v;
      }
    }
    sw.config_text += fmt::format("\n# environment: INDEXPOOL_CACHE_SIZE={}\n", env);
  }
  auto setting_at = [&](const std::string& key) {
    for (const auto& s : sw.settings)
      if (s.key == key) return where(s);
    return std::string("default");
  };
  // Whole-point checks that involve several keys, and every parameter check the run would make later
  // (nothing fails after the first point ran: --overwrite would have replaced a results file by then).
  // The message leads with where the first key it names was set, and lists where each named key was.
  for (const auto& p : sw.points) {
    try {
      validate_spec(p.workload);
      validate_cache_point(p.cache);
      validate_pipeline_params(p.pipeline);
      validate_extended_params(p.pipeline, p.source != "synthetic" || p.workload.attn_dim > 0);
    } catch (const Error& e) {
      const std::string msg = e.what();
      std::vector<std::pair<std::size_t, std::string>> named;  // (position in msg, key)
      for (const auto& k : config_keys())
        for (std::size_t at = msg.find(k.name); at != std::string::npos; at = msg.find(k.name, at + 1)) {
          auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; };
          const std::size_t end = at + k.name.size();
          if ((at > 0 && word(msg[at - 1])) || (end < msg.size() && word(msg[end]) && msg[end] != '.')) continue;
          named.emplace_back(at, k.name);
          break;
        }
      std::sort(named.begin(), named.end());
      std::string lead = path, places;
      for (const auto& [at, key] : named) {
        const std::string w = setting_at(key);
        if (lead == path && w != "default") lead = w;
        places += fmt::format("{}{} set at {}", places.empty() ? "" : ", ", key, w == "default" ? "its default" : w);
      }
      throw Error(fmt::format("{}: point {} ({}): {}{}", lead, p.index, p.key, msg,
                              named.size() > 1 || (named.size() == 1 && lead == path) ? "; " + places : ""));
    }
  }
  // limits.max_context: a synthetic context past the limit stops the run here, naming both settings
  // (imported contexts are checked when they are loaded, before any point runs: runner.cc).
  for (const auto& p : sw.points) {  // select.batched: what the batched decoder cannot do
    if (!p.batched) continue;
    const WeightParams& wp = p.pipeline.pool.weights;
    const PipelineParams& pp = p.pipeline;
    std::string why;
    const auto at = [&](const char* key) {
      const std::string w = setting_at(key);
      return w == "default" ? std::string("its default") : w;
    };
    if (uses_stats(wp.scheme) || uses_query_reference(wp))
      why = fmt::format("pool.weighting = {}{} learns from a request's history ({}), which the batched decoder does "
                        "not keep (use exact, uniform, positional, maxmin, or cosine with pool.cosine_reference = "
                        "group_mean)",
                        to_string(wp.scheme), wp.scheme == Weighting::cosine ? " with pool.cosine_reference = query" : "",
                        wp.scheme == Weighting::cosine && !uses_stats(wp.scheme)
                            ? "set at " + at("pool.weighting") + " and " + at("pool.cosine_reference")
                            : "set at " + at("pool.weighting"));
    else if (pp.extended()) {
      // The keys that are on, each with where it was set and what off is.
      std::string on;
      const auto add = [&](bool set, const char* key, const char* off) {
        if (set) on += fmt::format("{}{} (set at {}; off: {})", on.empty() ? "" : ", ", key, at(key), off);
      };
      add(pp.hybrid.enabled, "hybrid.enabled", "false");
      add(pp.adaptive.enabled, "adaptive.enabled", "false");
      add(pp.async_updates, "pool.async_updates", "false");
      add(pp.repool_tau >= 0.0f, "pool.repool_tau", "-1");
      add(pp.append_per_step > 0, "workload.append_per_step", "0");
      why = "it runs the plain sparse layer only, and " + on + " " +
            (on.find("), ") == std::string::npos ? "is" : "are") + " on";
    } else if (p.source == "synthetic" && p.workload.attn_dim <= 0)
      why = fmt::format("it needs an attention stage (workload.attn_dim = {}, set at {}; it must be > 0)",
                        p.workload.attn_dim, at("workload.attn_dim"));
    else if (p.save_tensors)
      why = fmt::format("output.save_tensors (set at {}) is not supported with it", setting_at("output.save_tensors"));
    else if (p.cache.enabled && p.cache.relevance == "cosine")
      why = fmt::format("cache.relevance = cosine (set at {}) needs the per-step similarity it does not record (use "
                        "mass)",
                        setting_at("cache.relevance"));
    else if (p.profile.counters || p.profile.kernel_records) {
      why = fmt::format("profile.counters and profile.kernel_records (set at {} and {}) measure the per-request "
                        "pipeline's backend calls, not the batched decoder: set both off (for Nsight, then run with "
                        "--profile; its steps are NVTX ranges named batch_step)",
                        at("profile.counters"), at("profile.kernel_records"));
    }
    IP_REQUIRE(why.empty(), "{}: key 'select.batched' = true: {}; point {} ({})", setting_at("select.batched"), why,
               p.index, p.key);
  }
  // adaptive.budget below the smallest index (every segment at G = 16) at some build of some request: each
  // request's length and each decode step's context (imported workloads: runner.cc preload_imports).
  for (const auto& p : sw.points) {
    const AdaptiveParams& a = p.pipeline.adaptive;
    if (!a.enabled || p.source != "synthetic") continue;
    const double row = p.workload.dim * element_bytes(p.pipeline.pool.precision) + scale_bytes(p.pipeline.pool.precision);
    for (int r = 0; r < p.workload.requests; ++r) {
      const Index64 T = adaptive_budget_short_context(a, request_tokens(p.workload, r), p.workload.append_per_step,
                                                      p.workload.steps, row);
      IP_REQUIRE(T == 0,
                 "{}: key 'adaptive.budget' = {} bytes per token is below the smallest adaptive index ({:.3f} bytes "
                 "per token, every segment at G = 16) over the {} tokens of request {}{}; point {} ({})",
                 setting_at("adaptive.budget"), a.budget_bytes_per_token,
                 adaptive_smallest_index_bytes(T, a.segment, row) / static_cast<double>(T), T, r,
                 p.workload.append_per_step > 0 ? " at a decode step" : "", p.index, p.key);
    }
  }
  // cache.object = kv sizes an access by the group's attention keys and values: with no attention stage every
  // access would be 0 bytes and a byte-sized level would never fill (imported workloads: runner.cc).
  for (const auto& p : sw.points) {
    if (!p.cache.enabled || p.cache.object != "kv" || p.source != "synthetic" || p.workload.attn_dim > 0) continue;
    const std::string obj = setting_at("cache.object"), dim = setting_at("workload.attn_dim");
    throw Error(fmt::format(
        "{}: key 'cache.object' = kv sizes each cache access by the group's attention keys and values, and the point "
        "has no attention stage (workload.attn_dim = {}, set at {}): set cache.object = index (the index entry) or "
        "cache.enabled = false; point {} ({})",
        obj != "default" ? obj : (dim != "default" ? dim : path), p.workload.attn_dim,
        dim == "default" ? "its default" : dim, p.index, p.key));
  }
  // Generator-only keys set for a sweep whose every point imports its workload would do nothing (the
  // shapes, lengths and statistics come from the file): an error, not N identical points.
  const bool any_synthetic =
      std::any_of(sw.points.begin(), sw.points.end(), [](const Point& p) { return p.source == "synthetic"; });
  if (!sw.points.empty() && !any_synthetic) {
    static const char* const kGeneratorOnly[] = {
        "workload.tokens",     "workload.dim",          "workload.index_heads",     "workload.attn_dim",
        "workload.attn_heads", "workload.value_dim",    "workload.steps",           "workload.requests",
        "workload.length_spread", "workload.topics",    "workload.topic_run",       "workload.topic_weight",
        "workload.sharpness",  "workload.head_noise",   "workload.query_drift",     "workload.jump_prob",
        "workload.needles",    "workload.needle_strength", "workload.needle_query_prob", "workload.sinks",
        "workload.sink_strength", "workload.image_fraction", "workload.image_side", "workload.attn_noise"};
    for (const auto& s : sw.settings)
      for (const char* k : kGeneratorOnly)
        IP_REQUIRE(s.key != k,
                   "{}: key '{}' only shapes the synthetic generator, and every point imports its workload "
                   "(workload.source = '{}', set at {}): the file fixes it. Remove the key",
                   where(s), s.key, sw.points.front().source, setting_at("workload.source"));
  }
  for (const auto& p : sw.points) {
    if (p.max_context <= 0 || p.source != "synthetic") continue;
    const Index64 total = p.workload.tokens + static_cast<Index64>(p.workload.steps) * p.workload.append_per_step;
    // With appended decode tokens, where the two other terms were set too (either may be what pushed it over).
    const std::string growth =
        p.workload.append_per_step > 0
            ? fmt::format(" (workload.steps = {} set at {}, workload.append_per_step = {} set at {})", p.workload.steps,
                          setting_at("workload.steps"), p.workload.append_per_step, setting_at("workload.append_per_step"))
            : "";
    IP_REQUIRE(total <= p.max_context,
               "{}: key 'workload.tokens' = {}: a context of {} tokens (workload.tokens + workload.steps x "
               "workload.append_per_step) exceeds limits.max_context = {} tokens (set at {}){}; point {} ({})",
               setting_at("workload.tokens"), p.workload.tokens, total, p.max_context,
               setting_at("limits.max_context"), growth, p.index, p.key);
  }

  // The sweep's identity: every resolved setting except output.* and a single thread count (the same sweep
  // written elsewhere, on another thread count or split into shards keeps its id). Thread counts as an axis
  // make points of their own (their keys name them), so they are part of it: threads = 1, 2 and
  // threads = 3, 4 are different sweeps, whose shards merge and --resume refuse to mix. Of output.*, only
  // output.save_tensors changes what a point holds: a sweep that saves tensors (at any point) is another
  // sweep, so merge and --resume do not mix points with and without them (unset and false: the same id).
  std::string canon;
  for (const auto& s : sw.settings) {
    if (s.key.rfind("output.", 0) == 0 ||
        ((s.key == "threads" || s.key == "threads_per_request") && s.values.size() <= 1))
      continue;  // they do not change results
    canon += s.key + "=";
    for (const auto& v : s.values) canon += v + ",";
    canon += "\n";
  }
  if (std::any_of(sw.points.begin(), sw.points.end(), [](const Point& p) { return p.save_tensors; }))
    canon += "output.save_tensors=true\n";
  if (const char* env = std::getenv("INDEXPOOL_CACHE_SIZE"); env && *env) canon += fmt::format("cache_size={}\n", env);
  // An imported workload counts by its path and its file's bytes: a file replaced under the same path makes
  // another sweep (each distinct file's size and digest).
  std::set<std::string> sources;
  for (const auto& p : sw.points)
    if (p.source != "synthetic") sources.insert(p.source);
  for (const auto& path : sources) {
    std::string line;
    try {
      const FileDigest d = file_digest(path);
      line = fmt::format("{}: {} bytes, digest {:016x}", path, d.bytes, d.hash);
    } catch (const Error& e) {
      line = path + ": unreadable";
      sw.import_errors.push_back(e.what());
    }
    sw.imports += (sw.imports.empty() ? "" : "\n") + line;
    canon += "import " + line + "\n";
  }
  for (const auto& z : sw.zips) {
    canon += "zip=";
    for (const auto& k : z) canon += k + " ";
    canon += "\n";
  }
  std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64: the same id on every machine and build
  for (unsigned char c : canon) h = (h ^ c) * 0x100000001b3ull;
  sw.sweep_id = fmt::format("{:016x}", h);
  sw.sweep_settings = std::move(canon);
  return sw;
}

std::vector<Point> shard_points(const Sweep& sweep, int index, int count) {
  IP_REQUIRE(count >= 1 && index >= 0 && index < count, "shard {}/{}: need 0 <= i < N", index, count);
  std::vector<Point> out;
  for (const auto& p : sweep.points)
    if (static_cast<int>(p.index % count) == index) out.push_back(p);
  return out;
}

std::pair<int, int> parse_shard(const std::string& spec) {
  auto num = [](const std::string& what, const std::string& v) {
    long long x = 0;
    const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
    IP_REQUIRE(ec == std::errc() && p == v.data() + v.size() && x >= 0 && x <= INT32_MAX,
               "{}: '{}' is not a non-negative integer", what, v);
    return static_cast<int>(x);
  };
  int index = 0, count = 1;
  if (!spec.empty()) {
    const auto slash = spec.find('/');
    IP_REQUIRE(slash != std::string::npos, "--shard '{}': expected i/N", spec);
    index = num("--shard", spec.substr(0, slash));
    count = num("--shard", spec.substr(slash + 1));
  } else if (const char* id = std::getenv("SLURM_ARRAY_TASK_ID")) {
    const char* cnt = std::getenv("SLURM_ARRAY_TASK_COUNT");
    IP_REQUIRE(cnt, "SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not");
    const char* mn = std::getenv("SLURM_ARRAY_TASK_MIN");
    const char* st = std::getenv("SLURM_ARRAY_TASK_STEP");
    const int step = st ? num("SLURM_ARRAY_TASK_STEP", st) : 1;
    IP_REQUIRE(step >= 1, "SLURM_ARRAY_TASK_STEP must be >= 1");
    const int first = mn ? num("SLURM_ARRAY_TASK_MIN", mn) : 0;
    const int task = num("SLURM_ARRAY_TASK_ID", id);
    IP_REQUIRE(task >= first && (task - first) % step == 0, "SLURM_ARRAY_TASK_ID {} is not MIN {} + k * STEP {}", task,
               first, step);
    index = (task - first) / step;
    count = num("SLURM_ARRAY_TASK_COUNT", cnt);
    IP_REQUIRE(count >= 1 && index < count,
               "shard {}/{} from Slurm's array variables (SLURM_ARRAY_TASK_ID {}, _MIN {}, _STEP {}, _COUNT {}): need 0 "
               "<= i < N, i = (ID - MIN) / STEP; an array whose task ids are not MIN, MIN + STEP, ... (e.g. "
               "--array=0,3) cannot give the shards: pass --shard i/N",
               index, count, task, first, step, count);
  }
  IP_REQUIRE(count >= 1 && index < count, "shard {}/{}: need 0 <= i < N", index, count);
  return {index, count};
}

double estimate_point_bytes(const Point& p) {
  const WorkloadSpec& s = p.workload;
  const double T = static_cast<double>(s.tokens + static_cast<Index64>(s.steps) * s.append_per_step), B = s.requests;
  const double per_token = 4.0 * (s.dim + s.attn_dim + (s.attn_dim > 0 ? s.value_dim : 0));
  const double workload = B * T * per_token;
  const int G = p.pipeline.pool.weights.scheme == Weighting::exact ? 1 : p.pipeline.pool.group_size;
  const double rows = std::ceil(T / G) * rows_per_group(p.pipeline.pool.weights.scheme);
  const double index = rows * (s.dim * element_bytes(p.pipeline.pool.precision) + scale_bytes(p.pipeline.pool.precision));
  // Requests under way at once: threads_per_request on the cpu runs several, each with its own arrays.
  const int threads = p.threads > 0 ? p.threads : hardware_threads();
  const double at_once = p.threads_per_request > 0 && p.backend != "cuda"
                             ? std::min(B, static_cast<double>(std::max(1, threads / p.threads_per_request)))
                             : 1.0;
  // Token scores, oracle scores, step mass, statistics (mass + count), attention logits and probabilities;
  // while a request is generated, its direction tables: one per topic (index and value space), one per needle.
  const double generator = p.source == "synthetic"
                               ? 4.0 * (static_cast<double>(s.topics) * (s.dim + (s.attn_dim > 0 ? s.value_dim : 0)) +
                                        std::max(1.0, static_cast<double>(std::min<Index64>(s.needles, s.tokens))) * s.dim)
                               : 0.0;
  const double work = at_once * (T * 4.0 * 5 + 2.0 * T * 4.0 * std::max(1, s.attn_heads) + generator);
  // output.save_tensors keeps every request's index until the point ends, and writes it dequantized
  // (float32); otherwise the runner frees each request's index when the request is done.
  const double kept = p.save_tensors ? B * index + B * rows * s.dim * 4.0 : at_once * index;
  // Per request and decode step: the queries and head weights. Per selected group and step: its id and
  // attention mass (and similarity for cache.relevance = cosine); with the cache model on, one trace
  // access (sizeof(cache::Access) = 24 B) and, for the OPT bound, its next use (8 B). Measured: 4.19M
  // selections (16 requests x 512 steps x 512 groups) take 8 + 24 + 8 B each.
  const double Q = s.steps;
  const double queries = B * Q * 4.0 * (s.index_heads * (s.dim + 1.0) + s.attn_heads * s.attn_dim);
  const double k_groups = std::ceil(static_cast<double>(p.pipeline.topk_tokens) / G);
  double per_selection = 8.0 + (p.cache.enabled && p.cache.relevance == "cosine" ? 4.0 : 0.0);
  if (p.cache.enabled) per_selection += sizeof(cache::Access) + (p.cache.opt_bound ? 8.0 : 0.0);
  // select.batched on cuda keeps each step's attention outputs for the fidelity pass (counted for auto too,
  // which may run the point on the cpu, one request after another, without them).
  const bool batched = p.batched && p.backend != "cpu";
  const double outputs = batched && p.pipeline.fidelity ? B * Q * 4.0 * s.attn_heads * s.value_dim : 0.0;
  return workload + kept + work + queries + B * Q * k_groups * per_selection + outputs;
}

std::string format_bytes(double bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (!(std::fabs(bytes) >= 1024.0)) return fmt::format("{:.0f} B", bytes);
  int u = 0;
  for (bytes /= 1024.0; std::fabs(bytes) >= 1024.0 && u < 3; ++u) bytes /= 1024.0;
  return fmt::format("{:.1f} {}", bytes, kUnits[u]);
}

double estimate_reference_bytes(const Point& p) {
  if (p.backend == "cuda" || !p.pipeline.fidelity) return 0.0;
  const WorkloadSpec& s = p.workload;
  const double T = static_cast<double>(s.tokens + static_cast<Index64>(s.steps) * s.append_per_step), B = s.requests;
  // The cap: the requests' arrays (Workload::input_bytes, as the runner counts them).
  const double queries = static_cast<double>(s.steps) * 4.0 *
                         (s.index_heads * (s.dim + 1.0) + (s.attn_dim > 0 ? s.attn_heads * s.attn_dim : 0));
  const double workload = B * (T * 4.0 * (s.dim + s.attn_dim + (s.attn_dim > 0 ? s.value_dim : 0)) + queries);
  // Per request and step: the token scores, the top-k ids (k), the oracles of the group sizes a sweep asks
  // for (k / G ids each: under 2k for distinct G), and with attention the dense probabilities [Ha, T] and
  // output [Ha, Dv].
  const int heads = s.attn_dim > 0 ? std::max(1, s.attn_heads) : 0;
  const double k = static_cast<double>(p.pipeline.topk_tokens);
  const double step = T * 4.0 + 3.0 * k * 4.0 + heads * (T + s.value_dim) * 4.0;
  return std::min(workload, B * s.steps * step);
}

}  // namespace ip::exp
