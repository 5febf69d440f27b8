#include "experiments/runner.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "core/backend.h"
#include "core/parallel.h"
#include "experiments/import.h"
#include "indexpool/build_config.h"
#if IP_HAVE_CUDA
#include "kernels/device.h"
#endif

namespace ip::exp {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Mean of the finite values (NaN: not measured).
double mean_finite(const std::vector<double>& v) {
  double s = 0;
  int n = 0;
  for (double x : v)
    if (std::isfinite(x)) s += x, ++n;
  return n ? s / n : std::nan("");
}

std::string spec_key(const WorkloadSpec& s) {
  return fmt::format("{} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}", s.tokens, s.dim,
                     s.index_heads, s.attn_dim, s.attn_heads, s.value_dim, s.steps, s.requests, s.length_spread,
                     s.topics, s.topic_run, s.topic_weight, s.sharpness, s.head_noise, s.query_drift, s.jump_prob,
                     s.needles, s.needle_strength, s.needle_query_prob, s.sinks, s.sink_strength, s.image_fraction,
                     s.image_side, s.attn_noise) +
         fmt::format(" {}", s.seed);
}

std::string point_label(const Point& p) {
  std::string s;
  for (const auto& [k, v] : p.axes) s += (s.empty() ? "" : " ") + k + "=" + v;
  return s.empty() ? "(single point)" : s;
}

std::string source_key(const Point& p) {
  return p.source == "synthetic" ? "synthetic " + spec_key(p.workload) : "file " + p.source;
}

PointSummary run_point(const Point& p, WorkloadCache& cache) {
  PointSummary out;
  const auto t0 = std::chrono::steady_clock::now();
  if (p.backend == "cuda") {
    out.status = "skipped";
    out.reason = "backend 'cuda' is not available in this build (the CUDA backend is not implemented yet)";
    return out;
  }
  auto backend = make_cpu_backend(p.threads);  // 'auto' resolves to the CPU until a CUDA backend exists
  auto& reqs = cache[source_key(p)];
  if (reqs.empty()) {
    IP_REQUIRE(p.source == "synthetic", "workload '{}' was not preloaded", p.source);
    for (int b = 0; b < p.workload.requests; ++b) reqs.push_back(generate_request(p.workload, b));
  }
  std::vector<double> tr, br, mr, oe, pool, score, topk, attn;
  double bytes = 0, ebytes = 0, macs = 0, emacs = 0, tokens = 0;
  for (const auto& w : reqs) {
    if (p.pipeline.topk_tokens > w.tokens()) {
      out.status = "skipped";
      out.reason = fmt::format("select.topk_tokens = {} exceeds a request's context of {} tokens",
                               p.pipeline.topk_tokens, w.tokens());
      return out;
    }
  }
  for (const auto& w : reqs) {
    const RequestResult r = run_request(*backend, w, p.pipeline);
    for (const auto& s : r.steps) {
      tr.push_back(s.token_recall);
      br.push_back(s.block_recall);
      mr.push_back(s.mass_recall);
      oe.push_back(s.output_error);
      if (s.pool_ms > 0) pool.push_back(s.pool_ms);
      score.push_back(s.score_ms);
      topk.push_back(s.topk_ms);
      attn.push_back(s.attention_ms);
    }
    bytes += r.index_bytes;
    ebytes += r.exact_index_bytes;
    macs += r.macs_per_query;
    emacs += r.exact_macs_per_query;
    tokens += static_cast<double>(r.tokens);
  }
  const double B = static_cast<double>(reqs.size());
  out.tokens = tokens / B;
  out.index_bytes_per_token = bytes / tokens;
  out.exact_bytes_per_token = ebytes / tokens;
  out.macs_per_query = macs / B;
  out.exact_macs_per_query = emacs / B;
  out.token_recall = mean_finite(tr);
  out.block_recall = mean_finite(br);
  out.mass_recall = mean_finite(mr);
  out.output_error = mean_finite(oe);
  out.pool_ms = median(pool);
  out.score_ms = median(score);
  out.topk_ms = median(topk);
  out.attention_ms = median(attn);
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string host_name() {
  char buf[256] = {0};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

std::string axis_value(const Point& p, const std::string& key) {
  for (const auto& [k, v] : p.axes)
    if (k == key) return v;
  return "";
}

}  // namespace

std::string version_string() {
  return fmt::format("indexpool {} (git {}; CUDA build: {}; NVTX: {}; CUPTI: {})", IP_VERSION, IP_GIT_REVISION,
                     IP_HAVE_CUDA ? "yes" : "no", IP_HAVE_NVTX ? "yes" : "no", IP_HAVE_CUPTI ? "yes" : "no");
}

std::string devices_string() {
#if IP_HAVE_CUDA
  return ip::cuda::describe_devices();
#else
  return "CUDA not built";
#endif
}

void preload_imports(const Sweep& sweep, WorkloadCache& cache) {
  for (const auto& p : sweep.points) {
    if (p.source == "synthetic") continue;
    auto& reqs = cache[source_key(p)];
    if (!reqs.empty()) continue;
    try {
      reqs.push_back(import_workload(p.source));
    } catch (const Error& e) {
      throw Error(fmt::format("workload.source: {}", e.what()));
    }
  }
}

std::vector<PointSummary> run_sweep(const Sweep& sweep, const RunOptions& opt, WorkloadCache& cache) {
  std::vector<PointSummary> rows;
  const auto t0 = std::chrono::steady_clock::now();
  const std::size_t n = sweep.points.size();
  for (std::size_t i = 0; i < n; ++i) {
    const Point& p = sweep.points[i];
    if (!opt.quiet) std::fprintf(stderr, "[%zu/%zu] %s ...\n", i + 1, n, point_label(p).c_str());
    rows.push_back(run_point(p, cache));
    if (!opt.quiet) {
      const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double eta = el / static_cast<double>(i + 1) * static_cast<double>(n - i - 1);
      const auto& r = rows.back();
      if (r.status == "ok")
        std::fprintf(stderr, "[%zu/%zu] done in %.2f s (elapsed %.1f s, ETA %.1f s)\n", i + 1, n, r.wall_s, el, eta);
      else
        std::fprintf(stderr, "[%zu/%zu] skipped: %s\n", i + 1, n, r.reason.c_str());
    }
  }
  return rows;
}

std::string summary_table(const Sweep& sweep, const std::vector<PointSummary>& rows) {
  std::vector<std::string> axis_keys;
  if (!sweep.points.empty())
    for (const auto& [k, v] : sweep.points[0].axes) axis_keys.push_back(k);
  std::string out;
  std::string head;
  for (const auto& k : axis_keys) head += fmt::format("{:>18} ", k.substr(k.find('.') + 1));
  head += fmt::format("{:>10} {:>7} {:>10} {:>7} {:>7} {:>7} {:>8} {:>9} {:>9} {:>8}", "idx B/tok", "ratio",
                      "MMAC/q", "tokRec", "blkRec", "massRec", "outErr", "score ms", "topk ms", "pool ms");
  out += head + "\n" + std::string(head.size(), '-') + "\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::string line;
    for (const auto& k : axis_keys) line += fmt::format("{:>18} ", axis_value(sweep.points[i], k));
    const auto& r = rows[i];
    if (r.status != "ok") {
      out += line + "skipped: " + r.reason + "\n";
      continue;
    }
    line += fmt::format("{:>10.2f} {:>6.2f}x {:>10.2f} {:>7.4f} {:>7.4f} {:>7.4f} {:>8.4f} {:>9.3f} {:>9.3f} {:>8.3f}",
                        r.index_bytes_per_token, r.exact_bytes_per_token / r.index_bytes_per_token,
                        r.macs_per_query / 1e6, r.token_recall, r.block_recall, r.mass_recall, r.output_error,
                        r.score_ms, r.topk_ms, r.pool_ms);
    out += line + "\n";
  }
  out += "\nidx B/tok: stored index bytes per context token; ratio: uncompressed keys (same precision) / index;\n"
         "MMAC/q: scoring multiply-adds per query (millions); tokRec, blkRec, massRec: token, block and\n"
         "attention-mass recall (fractions); outErr: relative L2 error of the attention output; times: median\n"
         "milliseconds per step (pool: per index build) on this machine's CPU.\n";
  return out;
}

void write_csv(const std::string& path, const Sweep& sweep, const std::vector<PointSummary>& rows,
               const std::string& argv_line) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  if (target.has_parent_path()) fs::create_directories(target.parent_path());
  const fs::path tmp = target.string() + ".tmp";
  {
    std::ofstream f(tmp);
    IP_REQUIRE(f.good(), "cannot write results file '{}'", tmp.string());
    f << "# " << version_string() << "\n";
    f << "# made " << now_utc() << " on host " << host_name() << ", backend cpu\n";
    f << "# command: " << argv_line << "\n";
    f << "# config: " << sweep.config_path << "\n";
    f << "# units: bytes per token, multiply-adds per query, milliseconds (median per step), seconds (wall)\n";
    for (const auto& [k, v] : sweep.points.empty() ? decltype(sweep.points[0].axes){} : sweep.points[0].axes) f << k << ",";
    f << "status,reason,tokens,index_bytes_per_token,exact_bytes_per_token,macs_per_query,exact_macs_per_query,"
         "token_recall,block_recall,mass_recall,output_error,pool_ms,score_ms,topk_ms,attention_ms,wall_s\n";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      for (const auto& [k, v] : sweep.points[i].axes) f << v << ",";
      const auto& r = rows[i];
      f << fmt::format("{},\"{}\",{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", r.status, r.reason, r.tokens,
                       r.index_bytes_per_token, r.exact_bytes_per_token, r.macs_per_query, r.exact_macs_per_query,
                       r.token_recall, r.block_recall, r.mass_recall, r.output_error, r.pool_ms, r.score_ms,
                       r.topk_ms, r.attention_ms, r.wall_s);
    }
    IP_REQUIRE(f.good(), "error writing results file '{}'", tmp.string());
  }
  fs::rename(tmp, target);
}

}  // namespace ip::exp
