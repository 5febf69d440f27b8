// CPU benchmark of the IndexPool pipeline's memory-bound stages at T = 1Mi tokens, D = 128, G = 4.
//
// Every figure is printed next to a baseline measured in the same run (these machines are shared and
// noisy): pooling and compressed scoring as GB/s and as a fraction of this machine's memcpy bandwidth;
// compressed scoring as a speedup over exact scoring of the same tokens; peak resident memory of one
// full pipeline point as a multiple of its input size. Timings: median of --reps repetitions.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include <boost/program_options.hpp>
#include <fmt/format.h>

#include "bench/bench_util.h"
#include "core/attention.h"
#include "core/backend.h"
#include "core/error.h"
#include "core/parallel.h"
#include "core/pipeline.h"
#include "core/quant.h"
#include "core/topk.h"
#include "core/workload.h"

namespace po = boost::program_options;
using namespace ip;

namespace {

using Clock = std::chrono::steady_clock;

using ip::bench::median_seconds;

double gbps(double bytes, double s) { return bytes / s / 1e9; }

// Medians of `reps` runs of a() and of b(), run alternately so that both see the same machine conditions.
template <class A, class B>
std::pair<double, double> alternating_medians(int reps, A&& a, B&& b) {
  std::vector<double> ta, tb;
  for (int r = 0; r < reps; ++r) {
    ta.push_back(median_seconds(1, a));
    tb.push_back(median_seconds(1, b));
  }
  std::sort(ta.begin(), ta.end());
  std::sort(tb.begin(), tb.end());
  return {ta[ta.size() / 2], tb[tb.size() / 2]};
}

// Peak RSS of one full pipeline point (generation, index, scoring, attention, fidelity), in a child
// process so that nothing else this program allocates is counted. Returns {peak bytes, input bytes}.
std::pair<double, double> peak_memory_point(Index64 tokens, int dim, int steps, int group, Index64 topk_tokens) {
  int fd[2];
  if (pipe(fd) != 0) return {0, 0};
  const pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    WorkloadSpec s;
    s.tokens = tokens;
    s.dim = dim;
    s.steps = steps;
    double out[2] = {0, 0};
    try {
      const Workload w = generate_request(s, 0);
      auto be = make_cpu_backend(0);
      PipelineParams p;
      p.pool.group_size = group;
      p.topk_tokens = topk_tokens;
      run_request(*be, w, p);
      out[1] = static_cast<double>(w.input_bytes());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "indexpool_bench: the peak-memory point failed: %s\n", e.what());
      _exit(1);
    }
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    out[0] = static_cast<double>(ru.ru_maxrss) * 1024.0;
    if (write(fd[1], out, sizeof out) != sizeof out) _exit(1);
    _exit(0);
  }
  close(fd[1]);
  double in[2] = {0, 0};
  const ssize_t got = read(fd[0], in, sizeof in);
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (got != sizeof in || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return {0, 0};
  return {in[0], in[1]};
}

// The selection core/topk.cc made before 2026-12-06, the baseline of the top-k rows: each 64Ki-score
// chunk keeps its k best by std::nth_element over ids compared through the scores (in parallel), the
// union is selected again and sorted. Same result as ip::topk (no NaN check).
std::vector<std::int32_t> nth_element_topk(const float* s, Index64 n, Index64 k) {
  constexpr Index64 kChunk = 1 << 16;
  auto better = [s](std::int32_t a, std::int32_t b) { return s[a] > s[b] || (s[a] == s[b] && a < b); };
  std::vector<std::vector<std::int32_t>> part((n + kChunk - 1) / kChunk);
  parallel_for(n, kChunk, [&](Index64 b, Index64 e) {
    std::vector<std::int32_t> ids(e - b);
    std::iota(ids.begin(), ids.end(), static_cast<std::int32_t>(b));
    const Index64 keep = std::min(k, e - b);
    if (keep < e - b) std::nth_element(ids.begin(), ids.begin() + keep, ids.end(), better);
    ids.resize(keep);
    part[b / kChunk] = std::move(ids);
  });
  std::vector<std::int32_t> ids;
  for (auto& q : part) ids.insert(ids.end(), q.begin(), q.end());
  if (k < static_cast<Index64>(ids.size())) std::nth_element(ids.begin(), ids.begin() + k, ids.end(), better);
  ids.resize(k);
  std::sort(ids.begin(), ids.end(), better);
  return ids;
}

}  // namespace

int main(int argc, char** argv) {
  po::options_description opts("indexpool_bench [options]");
  Index64 tokens = 1 << 20;
  int dim = 128, group = 4, reps = 7;
  Index64 topk_tokens = 2048;
  std::vector<int> heads_list{1, 8, 64};
  std::vector<std::string> precision_names{"fp32", "fp16", "bf16", "int8", "fp8"};
  bool skip_memory = false;
  // clang-format off
  opts.add_options()
    ("help,h", "describe the benchmark")
    ("tokens", po::value(&tokens)->default_value(tokens), "context length T (tokens)")
    ("dim", po::value(&dim)->default_value(dim), "index key dimension D")
    ("group-size", po::value(&group)->default_value(group), "G")
    ("reps", po::value(&reps)->default_value(reps), "repetitions per measurement (median is reported)")
    ("heads", po::value(&heads_list)->multitoken(), "indexer heads H for the scoring rows (default 1 8 64)")
    ("topk", po::value(&topk_tokens)->default_value(topk_tokens),
     "tokens k the indexer selects (exact: k of T token scores; compressed: ceil(k / G) of the composites')")
    ("precisions", po::value(&precision_names)->multitoken(),
     "index precisions of the encode / decode / scoring rows (default fp32 fp16 bf16 int8 fp8; none: skip them)")
    ("skip-memory", po::bool_switch(&skip_memory), "skip the peak-memory point");
  // clang-format on
  po::variables_map vm;
  try {
    // No positional arguments: a stray one ("indexpool_bench 4096") is an error, not ignored.
    const po::positional_options_description none;
    po::store(po::command_line_parser(argc, argv).options(opts).positional(none).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::fprintf(stderr, "indexpool_bench: %s\n", e.what());
    return 2;
  }
  if (vm.count("help")) {
    std::printf("CPU benchmark: pooling and scoring throughput against same-run memcpy bandwidth, compressed vs\n"
                "exact scoring speedup, top-k against the former nth_element selection, the indexer (scoring +\n"
                "top-k) compressed vs exact, dense attention, peak memory of one pipeline point.\n\n");
    std::cout << opts;
    return 0;
  }
  if (tokens < 1 || dim < 1 || group < 1 || reps < 1) {
    std::fprintf(stderr, "indexpool_bench: --tokens, --dim, --group-size and --reps must be >= 1\n");
    return 2;
  }
  if (topk_tokens < 1 || topk_tokens > tokens) {
    std::fprintf(stderr, "indexpool_bench: --topk %lld: must be in [1, --tokens = %lld]\n",
                 static_cast<long long>(topk_tokens), static_cast<long long>(tokens));
    return 2;
  }
  if (group > topk_tokens) {
    std::fprintf(stderr, "indexpool_bench: --group-size %d exceeds --topk %lld (one group larger than the budget)\n",
                 group, static_cast<long long>(topk_tokens));
    return 2;
  }
  for (const int H : heads_list)
    if (H < 1 || H > 1024) {
      std::fprintf(stderr, "indexpool_bench: --heads %d: each must be in [1, 1024]\n", H);
      return 2;
    }
  if (heads_list.empty()) {
    std::fprintf(stderr, "indexpool_bench: --heads: give at least one head count\n");
    return 2;
  }
  // The index keys alone (T x D fp32, with H queries) must fit this machine's memory before any work starts.
  const double key_bytes_needed = static_cast<double>(tokens) * dim * 4.0;
  const double ram = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  if (tokens > (Index64{1} << 31) - 1 || key_bytes_needed > 0.5 * ram) {
    std::fprintf(stderr,
                 "indexpool_bench: --tokens %lld x --dim %d: %.1f GiB of fp32 keys, more than half of this machine's "
                 "%.1f GiB (or over 2^31 - 1 tokens)\n",
                 static_cast<long long>(tokens), dim, key_bytes_needed / (1 << 30), ram / (1 << 30));
    return 2;
  }
  std::vector<Precision> precisions;
  for (const std::string& name : precision_names) {
    if (name == "none") continue;
    try {
      precisions.push_back(parse_precision(name));
    } catch (const Error& e) {
      std::fprintf(stderr, "indexpool_bench: --precisions: %s\n", e.what());
      return 2;
    }
  }

  std::printf("%s\n", ip::bench::provenance_line("indexpool_bench").c_str());
  std::printf("IndexPool CPU benchmark: T = %lld tokens, D = %d, G = %d, fp32, median of %d reps\n\n",
              static_cast<long long>(tokens), dim, group, reps);

  // Peak memory first, in a child, before this process allocates anything large.
  if (!skip_memory) {
    std::printf("peak memory of one pipeline point (T = %lld, D = %d, G = %d, top-%lld, 8 index heads, 4 attention "
                "heads, 4 steps):\n",
                static_cast<long long>(tokens), dim, group, static_cast<long long>(topk_tokens));
    std::fflush(stdout);
    const auto [peak, input] = peak_memory_point(tokens, dim, 4, group, topk_tokens);
    if (peak <= 0) {
      std::printf("  measurement failed (the child process did not report; see stderr)\n");
      return 1;
    }
    // The target is about long contexts (the default 1Mi tokens): below, fixed costs dominate the ratio.
    std::printf("  input %.1f MiB, peak RSS %.1f MiB = %.2fx input (target < 3x%s)\n\n", input / (1 << 20),
                peak / (1 << 20), peak / input, tokens < (1 << 20) ? ": not judged below 1Mi tokens" : "");
  }

  WorkloadSpec s;
  s.tokens = tokens;
  s.dim = dim;
  s.steps = 1;
  s.attn_dim = 0;
  s.index_heads = *std::max_element(heads_list.begin(), heads_list.end());
  const Workload w = generate_request(s, 0);
  const MatrixView<const float> keys = w.index_keys.mat();
  const double key_bytes = static_cast<double>(w.index_keys.bytes());

  for (int threads : {1, 0}) {
    set_num_threads(threads);
    const int nt = num_threads();
    std::printf("== %d thread%s ==\n", nt, nt == 1 ? "" : "s");

    // Baseline: memcpy of the key array into a pre-touched buffer (read + write bytes).
    std::vector<float> dst(static_cast<std::size_t>(w.index_keys.size()), 1.0f);
    const double copy_s = median_seconds(reps, [&] {
      parallel_for(w.index_keys.size(), 1 << 20, [&](Index64 b, Index64 e) {
        std::memcpy(dst.data() + b, w.index_keys.data() + b, static_cast<std::size_t>(e - b) * sizeof(float));
      });
    });
    const double copy_bw = gbps(2.0 * key_bytes, copy_s);
    std::printf("  %-34s %8.2f GB/s  (read + write, %.0f MiB)\n", "memcpy baseline", copy_bw, key_bytes / (1 << 20));

    // Pooling: reads T*D floats, writes ceil(T/G)*D floats.
    for (Weighting scheme : {Weighting::uniform, Weighting::positional, Weighting::cosine}) {
      PoolParams pp;
      pp.group_size = group;
      pp.weights.scheme = scheme;
      PooledIndex idx = build_index(keys, pp, nullptr, nullptr);  // warm-up
      const double t = median_seconds(reps, [&] { build_index(keys, pp, nullptr, nullptr, idx); });
      const double bytes = key_bytes + static_cast<double>(idx.bytes());
      std::printf("  %-34s %8.2f GB/s  = %5.1f%% of memcpy  (%.2f ms, %.1f M tokens/s)\n",
                  fmt::format("pool {} G={}", to_string(scheme), group).c_str(), gbps(bytes, t),
                  100.0 * gbps(bytes, t) / copy_bw, t * 1e3, static_cast<double>(tokens) / t / 1e6);
    }

    // Scoring: compressed (ceil(T/G) composites) vs exact (T keys), same query.
    PoolParams pp;
    pp.group_size = group;
    const PooledIndex idx = build_index(keys, pp, nullptr, nullptr);
    std::vector<float> out(static_cast<std::size_t>(tokens));
    for (int H : heads_list) {
      const IndexQuery q{w.index_queries.slice(0).rows_range(0, H), w.head_weights.data()};
      score_index(idx, q, out.data());
      score_tokens(keys, q, out.data());
      // Compressed and exact runs alternate, so both see the same machine conditions.
      const auto [tc, te] = alternating_medians(
          reps, [&] { score_index(idx, q, out.data()); }, [&] { score_tokens(keys, q, out.data()); });
      const double bc = static_cast<double>(idx.bytes()), be = key_bytes;
      std::printf("  %-34s %8.2f GB/s  = %5.1f%% of memcpy  (%.2f ms, %.1f GFLOP/s)\n",
                  fmt::format("score compressed H={}", H).c_str(), gbps(bc, tc), 100.0 * gbps(bc, tc) / copy_bw,
                  tc * 1e3, 2.0 * static_cast<double>(idx.rows.rows) * H * dim / tc / 1e9);
      std::printf("  %-34s %8.2f GB/s  = %5.1f%% of memcpy  (%.2f ms, %.1f GFLOP/s)\n",
                  fmt::format("score exact H={}", H).c_str(), gbps(be, te), 100.0 * gbps(be, te) / copy_bw,
                  te * 1e3, 2.0 * static_cast<double>(tokens) * H * dim / te / 1e9);
      std::printf("  %-34s %8.2fx  (byte ratio %.2fx)\n", fmt::format("compressed vs exact speedup H={}", H).c_str(),
                  te / tc, be / bc);

      // The indexer's selection over these scores: k of the T token scores (exact), ceil(k / G) of the
      // composites' (compressed); ip::topk against the former selection, alternating, same result checked.
      std::vector<float> exact_scores(static_cast<std::size_t>(tokens)), comp_scores(idx.rows.rows);
      score_tokens(keys, q, exact_scores.data());
      score_index(idx, q, comp_scores.data());
      const Index64 kc = groups_for_budget(topk_tokens, group);
      double t_select[2] = {0, 0};
      for (int side = 0; side < 2; ++side) {
        const std::vector<float>& sc = side == 0 ? comp_scores : exact_scores;
        const Index64 n = static_cast<Index64>(sc.size()), k = side == 0 ? kc : topk_tokens;
        if (topk(sc.data(), n, k) != nth_element_topk(sc.data(), n, k)) {
          std::fprintf(stderr, "indexpool_bench: top-k and the nth_element selection differ (H = %d, n = %lld)\n", H,
                       static_cast<long long>(n));
          return 1;
        }
        const auto [tt, tb] = alternating_medians(
            reps, [&] { topk(sc.data(), n, k); }, [&] { nth_element_topk(sc.data(), n, k); });
        t_select[side] = tt;
        std::printf("  %-34s %8.3f ms    = %5.2fx %s than nth_element (%.3f ms; %.0f M scores/s)\n",
                    fmt::format("top-{} of {} {} H={}", k, n, side == 0 ? "compressed" : "exact", H).c_str(), tt * 1e3,
                    tb >= tt ? tb / tt : tt / tb, tb >= tt ? "faster" : "slower", tb * 1e3,
                    static_cast<double>(n) / tt / 1e6);
      }
      std::printf("  %-34s %8.2fx  (%.2f ms -> %.2f ms a query)\n",
                  fmt::format("indexer compressed vs exact H={}", H).c_str(), (te + t_select[1]) / (tc + t_select[0]),
                  (te + t_select[1]) * 1e3, (tc + t_select[0]) * 1e3);
    }

    // Dense attention over the T tokens (the fidelity reference of every step), Ha = 4 heads, the keys
    // serving as keys and values (D = Dv): reads 2 T D floats, writes the T Ha probabilities.
    {
      const Index64 Ha = std::min<Index64>(4, w.index_queries.dim(1));
      const MatrixView<const float> qa = w.index_queries.slice(0).rows_range(0, Ha);
      attention(keys, keys, qa, {}, true);  // warm-up
      const double t = median_seconds(reps, [&] { attention(keys, keys, qa, {}, true); });
      const double bytes = 2.0 * key_bytes + 4.0 * static_cast<double>(tokens * Ha);
      std::printf("  %-34s %8.2f GB/s  = %5.1f%% of memcpy  (%.2f ms)\n",
                  fmt::format("attention dense Ha={}", Ha).c_str(), gbps(bytes, t), 100.0 * gbps(bytes, t) / copy_bw,
                  t * 1e3);
    }

    // Index precisions: encoding the T keys (quantize_row: reads 4 B, writes the element and the row's
    // scale), decoding them (dequantize_row: the reverse), and compressed scoring of a uniform index
    // stored at that precision (it decodes blocks of rows before the dot products), at the largest H,
    // against the fp32 index scored in the same run.
    const int Hmax = *std::max_element(heads_list.begin(), heads_list.end());
    const IndexQuery qmax{w.index_queries.slice(0).rows_range(0, Hmax), w.head_weights.data()};
    for (Precision p : precisions) {
      QuantizedMatrix q;
      resize(q, p, tokens, dim);
      auto encode = [&] {
        parallel_for(tokens, 4096, [&](Index64 b, Index64 e) {
          for (Index64 r = b; r < e; ++r) quantize_row(keys.row(r), r, q);
        });
      };
      encode();  // warm-up, touches the pages
      const double te = median_seconds(reps, encode);
      const double td = median_seconds(reps, [&] {
        parallel_for(tokens, 4096, [&](Index64 b, Index64 e) {
          for (Index64 r = b; r < e; ++r) dequantize_row(q, r, dst.data() + r * dim);
        });
      });
      const double moved = key_bytes + static_cast<double>(q.bytes());
      for (const auto& [what, t] : {std::pair{"encode", te}, std::pair{"decode", td}})
        std::printf("  %-34s %8.2f GB/s  = %5.1f%% of memcpy  (%.2f ms)\n",
                    fmt::format("{} keys {}", what, to_string(p)).c_str(), gbps(moved, t),
                    100.0 * gbps(moved, t) / copy_bw, t * 1e3);
      PoolParams pq;
      pq.group_size = group;
      pq.precision = p;
      const PooledIndex idx_p = build_index(keys, pq, nullptr, nullptr);
      score_index(idx_p, qmax, out.data());
      const auto [score_fp32, ts] = alternating_medians(
          reps, [&] { score_index(idx, qmax, out.data()); }, [&] { score_index(idx_p, qmax, out.data()); });
      std::printf("  %-34s %8.2f ms    = %5.2fx the fp32 index's time (%.2f ms)\n",
                  fmt::format("score compressed H={} {}", Hmax, to_string(p)).c_str(), ts * 1e3, ts / score_fp32,
                  score_fp32 * 1e3);
    }
    std::printf("\n");
  }
  std::printf("GB/s = 1e9 bytes per second; pooling counts keys read + composites written, scoring counts the\n"
              "index bytes read, memcpy counts bytes read + written, encode and decode count fp32 keys plus the\n"
              "stored bytes (elements and scales), dense attention its keys and values read (the keys serve as\n"
              "both) and its probabilities written. Targets (issue 2): pooling and compressed scoring >= 50%% of\n"
              "memcpy on one core; compressed scoring >= 3.5x faster than exact at G = 4.\n"
              "Top-k rows: median time of ip::topk and of the former per-chunk nth_element selection, run\n"
              "alternately on the same scores (the H row's); the indexer row adds each side's scoring and top-k\n"
              "medians (the article's 12 ms -> 3 ms at 1M tokens is this figure's claim, on a GPU).\n");
  return 0;
}
