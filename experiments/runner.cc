#include "experiments/runner.h"

#include <fcntl.h>
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <thread>
#include <map>
#include <optional>
#include <memory>
#include <mutex>
#include <string_view>

#include "core/adaptive.h"
#include "core/backend.h"
#include "core/cpu_isa.h"
#include "core/parallel.h"
#include "core/provenance.h"
#include "experiments/batched_run.h"
#include "experiments/device_plan.h"
#include "experiments/h5.h"
#include "experiments/import.h"
#include "experiments/profiling.h"
#include "core/ranges.h"
#include "indexpool/build_config.h"
#include "indexpool/git_revision.h"
#if IP_HAVE_CUDA
#include "kernels/cuda_backend.h"
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
         fmt::format(" {}", s.seed) + fmt::format(" {} {} {}", s.gate_decay, s.gate_spread, s.append_per_step);
}

std::string source_key(const Point& p) {
  return p.source == "synthetic" ? "synthetic " + spec_key(p.workload) : "file " + p.source;
}

}  // namespace

double CachedSource::input_bytes() const {
  double b = 0;
  for (const auto& w : requests) b += static_cast<double>(w.input_bytes());
  return b;
}

double CachedSource::reference_bytes() const {
  double b = 0;
  for (const auto& r : references) b += static_cast<double>(r.bytes());
  return b;
}

std::string cache_trace_path(const Point& p) {
  std::string path = p.cache_trace;
  const auto at = path.find("{index}");
  if (at != std::string::npos) path.replace(at, 7, fmt::format("{:06d}", p.index));
  return path;
}

cache::TraceFormat cache_trace_format(const Point& p) {
  return p.cache_trace_format == "auto" ? cache::guess_trace_format(cache_trace_path(p))
                                        : cache::parse_trace_format(p.cache_trace_format);
}

void check_cache_traces(const std::vector<Point>& points, bool overwrite, bool resume, const ResultsFile* results) {
  namespace fs = std::filesystem;
  const bool resumed = results != nullptr && results->resumed();
  std::set<std::string> seen;
  std::map<fs::path, std::set<fs::path>> trace_names;  // by folder: the traces' file names
  for (const auto& p : points) {
    if (p.cache_trace.empty()) continue;
    IP_REQUIRE(p.cache.enabled, "output.cache_trace is set but cache.enabled = false (point {}: {})", p.index, p.key);
    const std::string path = cache_trace_path(p);
    IP_REQUIRE(seen.insert(path).second,
               "output.cache_trace '{}': several points would write '{}'; put {{index}} in the path (it becomes the "
               "point's 6-digit index)",
               p.cache_trace, path);
    const fs::path f(path);
    std::error_code ec;
    if (f.has_parent_path()) fs::create_directories(f.parent_path(), ec);
    IP_REQUIRE(!ec, "output.cache_trace '{}': cannot create its folder: {}", path, ec.message());
    IP_REQUIRE(!fs::is_directory(f), "output.cache_trace '{}' is a folder, not a file", path);
    std::error_code e1, e2;
    IP_REQUIRE(p.output_path.empty() || (path != p.output_path && fs::weakly_canonical(f, e1) !=
                                                                      fs::weakly_canonical(p.output_path, e2)),
               "output.cache_trace '{}' is the results file (output.path = '{}'): the trace would be lost; give it "
               "another name",
               path, p.output_path);
    // Replaced by a rename like the results file: only a regular file (or nothing) may be there.
    const fs::file_status st = fs::symlink_status(f, ec);
    IP_REQUIRE(!fs::exists(st) || fs::is_regular_file(st),
               "output.cache_trace '{}' exists and is not a regular file ({}); indexpool replaces only regular "
               "files: give it another name",
               path,
               fs::is_symlink(st) ? "a symbolic link, which would be replaced, not written through" : "a special file");
    ec.clear();
    // An existing trace: --overwrite replaces it; --resume only when the point will run (the file does not
    // hold it) and the trace was written since the resumed sweep began (a stopped run wrote it before the
    // point reached the file); a point the file holds is not run, and its trace is left as it is.
    if (!overwrite && fs::exists(f) && !(resumed && results->has(p.key))) {
      IP_REQUIRE(resume,
                 "output.cache_trace '{}' already exists; pass --overwrite to replace it (or --resume to continue the "
                 "sweep that wrote it)",
                 path);
      struct stat info {};
      const std::time_t began = resumed ? results->sweep_began() : -1;
      IP_REQUIRE(began >= 0 && ::stat(path.c_str(), &info) == 0 && info.st_mtime >= began,
                 "output.cache_trace '{}' already exists and {}: --resume replaces only the traces of the sweep it "
                 "continues. Move the file or give output.cache_trace another path{}",
                 path,
                 !resumed ? fmt::format("there is no results file '{}' to resume", p.output_path)
                 : began < 0
                     ? fmt::format("the results file '{}' does not say when its sweep began", p.output_path)
                     : fmt::format("was last written before the sweep in '{}' began ({})", p.output_path,
                                   format_utc(began)),
                 !resumed ? " (a run of this sweep stopped before its first point reached the results file leaves "
                            "traces like this one: then --overwrite replaces them, with nothing else to replace)"
                          : "; --overwrite would replace the results file too");
    }
    require_writable_beside("output.cache_trace", path);
    if (results != nullptr) trace_names[f.has_parent_path() ? f.parent_path() : fs::path(".")].insert(f.filename());
  }
  // A trace's temporary (`<trace>.tmp-<pid>`) left by a run that was killed (or stopped by a file-size limit)
  // while writing it: only under the results file's lock, which every run writing these traces holds. Each
  // folder is listed once (once a point made a sweep of many points wait minutes on a crowded folder).
  for (const auto& [dir, names] : trace_names) {
    std::error_code ec;
    std::vector<fs::path> stale;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      for (std::size_t at = name.find(".tmp-"); at != std::string::npos; at = name.find(".tmp-", at + 1))
        if (names.count(name.substr(0, at))) {
          stale.push_back(e.path());
          break;
        }
    }
    for (const auto& path : stale) fs::remove(path, ec);
  }
}

void require_writable_beside(const std::string& key, const std::string& path) {
  const std::string probe = fmt::format("{}.probe-{}", path, ::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  const int err = errno;
  IP_REQUIRE(fd >= 0 || err == EEXIST, "{} '{}' is not writable: cannot create '{}': {}", key, path, probe,
             std::strerror(err));
  if (fd >= 0) {
    ::close(fd);
    ::unlink(probe.c_str());
  }
}

void write_cache_trace(const Point& p, const cache::Trace& trace) {
  // A complete file beside the target, then renamed over it: never a half-written trace under its name,
  // and no temporary left behind when writing fails.
  const std::string path = cache_trace_path(p), tmp = path + fmt::format(".tmp-{}", ::getpid());
  std::error_code ec;
  errno = 0;
  try {
    cache::write_trace(tmp, cache_trace_format(p), trace);
  } catch (const Error& e) {
    const int err = errno;  // the failed write's (the trace writer does not name it)
    std::filesystem::remove(tmp, ec);
    throw Error(fmt::format("output.cache_trace '{}': {}{}{}", path, e.what(), err ? ": " : "",
                            err ? std::strerror(err) : ""));
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
  }
  IP_REQUIRE(!ec, "output.cache_trace '{}': cannot rename '{}' over it: {}", path, tmp, ec.message());
}

void PointProgress::reset() {
  stage = "";
  requests_done = 0;
  requests = 0;
  steps_done = 0;
  steps = 0;
  batched = false;
}

std::string point_label(const Point& p, std::size_t sweep_points) {
  return p.key.empty() || p.key == "-" ? fmt::format("point {} of {}", p.index + 1, sweep_points) : p.key;
}

double progress_interval_from_env() {
  const char* v = std::getenv("INDEXPOOL_PROGRESS_INTERVAL");
  if (!v || !*v) return 0;
  char* end = nullptr;
  errno = 0;
  const double s = std::strtod(v, &end);
  IP_REQUIRE(end && *end == '\0' && errno == 0 && std::isfinite(s) && s > 0 && s <= 3600,
             "INDEXPOOL_PROGRESS_INTERVAL = '{}': expected the seconds between progress lines, a number > 0 and "
             "<= 3600 (e.g. 0.5)",
             v);
  return s;
}

double stop_grace_from_env() {
  const char* v = std::getenv("INDEXPOOL_STOP_GRACE");
  if (!v || !*v) return 20;
  char* end = nullptr;
  errno = 0;
  const double s = std::strtod(v, &end);
  IP_REQUIRE(end && *end == '\0' && errno == 0 && std::isfinite(s) && s >= 0 && s <= 86400,
             "INDEXPOOL_STOP_GRACE = '{}': expected the seconds a point under way has to finish after SIGTERM or "
             "SIGHUP, a number >= 0 and <= 86400 (e.g. 20; 0 abandons it at once)",
             v);
  return s;
}

void block_stop_signals(sigset_t* set) {
  sigemptyset(set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2}) sigaddset(set, sig);
}

PointRecord run_point(const Point& p, double memory_limit, WorkloadCache& cache, const ProgressFn& on_request,
                      PointProgress* tracker, std::string_view limit_source) {
  const auto stage = [&](const char* what) {
    if (tracker) tracker->stage.store(what, std::memory_order_relaxed);
  };
  PointRecord rec;
  rec.index = p.index;
  rec.key = p.key;
  rec.axes = p.axes;
  PointSummary& out = rec.summary;
  auto skip = [&](std::string why) {
    out.status = "skipped";
    out.reason = std::move(why);
    clear_metrics(out);
    return rec;
  };
  const auto t0 = std::chrono::steady_clock::now();
  // The backend: cpu, or cuda when the build, a device, the GPU top-k's k limit and the device-memory
  // estimate allow (cuda skips the point otherwise; auto runs it on the CPU, with a note when a device
  // is present). Decided before any request is made.
  out.backend = p.backend;
  BackendPlan plan{"cpu", "", ""};
  if (p.backend != "cpu") {
    DeviceShape shape;
    if (p.source == "synthetic") {
      shape = device_shape(p.workload);
    } else {
      for (const auto& w : cache[source_key(p)].requests)
        if (static_cast<double>(w.tokens()) >= shape.tokens) shape = device_shape(w);
    }
    plan = plan_backend(p.backend, shape, p.pipeline, query_device());
    out.backend = plan.backend;
    if (!plan.skip_reason.empty()) return skip(plan.skip_reason);
    out.reason = plan.note;  // auto on the CPU although a device is present: why (kept with the point)
  }
  const double need = estimate_point_bytes(sized_point(p, cache));
  if (need > memory_limit)
    return skip(fmt::format("estimated memory {} exceeds the limit {} (sweep.memory_limit{}{})", format_bytes(need),
                            format_bytes(memory_limit), limit_source.empty() ? "" : "; ", limit_source));
  const std::string wkey = source_key(p);
  CachedSource& src = cache[wkey];
  auto& reqs = src.requests;
  if (reqs.empty()) {
    IP_RANGE(workload);
    IP_REQUIRE(p.source == "synthetic", "workload '{}' was not preloaded", p.source);
    // Generated workloads kept for later points (with their fidelity references) are dropped when, with
    // them, this point would exceed the memory limit; a later point makes its workload again, bit for bit,
    // from the same spec.
    double kept = 0;
    for (const auto& [k, s] : cache) kept += s.input_bytes() + s.reference_bytes();
    if (kept + need > memory_limit)
      for (auto it = cache.begin(); it != cache.end();)
        it = it->first != wkey && it->first.rfind("synthetic ", 0) == 0 ? cache.erase(it) : std::next(it);
    // The point's threads make the requests; several at once when there are several (each request is
    // the same bits whatever the thread count).
    set_num_threads(p.threads);
    stage("generating the workload");
    const int B = p.workload.requests;
    reqs.resize(static_cast<std::size_t>(B));
    parallel_tasks(B, std::max(1, num_threads() / B), [&](std::int64_t b) {
      reqs[static_cast<std::size_t>(b)] = generate_request(p.workload, static_cast<int>(b));
    });
  }
  // An imported workload has no gates of its own: the point's workload.gate_decay, gate_spread and seed
  // give them (set per point, since points share the import).
  if (p.source != "synthetic")
    for (std::size_t b = 0; b < reqs.size(); ++b) reqs[b].gates = gate_params(p.workload, static_cast<int>(b));
  // The budget against each request's context at its first decode step (a growing context,
  // workload.append_per_step, appends before every step; core/decode.cc checks the same).
  const Index64 append = p.pipeline.append_per_step;
  for (const auto& w : reqs)
    if (const Index64 first = w.tokens() - (w.steps() - 1) * append; p.pipeline.topk_tokens > first)
      return skip(fmt::format("{}{} exceeds a request's context of {} tokens{}", kSkipBudgetOverContext,
                              p.pipeline.topk_tokens, first, append > 0 ? " at its first decode step" : ""));
  // select.batched puts the whole batch on the device at once: auto runs it on the cpu when it cannot.
  if (p.batched && plan.backend == "cuda") {
    const std::string why = batched_skip_reason(reqs, p.pipeline);
    if (!why.empty()) {
      if (p.backend != "auto") return skip("backend = cuda: " + why);
      plan.backend = out.backend = "cpu";
      out.reason = "backend = auto: " + why + "; running on the CPU";
    }
  }
  std::unique_ptr<Backend> backend;
  if (plan.backend == "cuda") {
#if IP_HAVE_CUDA
    try {
      backend = ip::cuda::make_cuda_backend(0, p.pipeline.kernels);
    } catch (const Error& e) {
      return skip(fmt::format("backend = {}: the CUDA backend could not start: {}", p.backend, e.what()));
    }
#else
    return skip("backend = cuda: this build has no CUDA");  // plan_backend already says so; kept for safety
#endif
  } else {
    backend = make_cpu_backend(p.threads);
  }
  out.device = backend->device();
  PointProfiler profiler(p);  // counters / kernel records (profile.*): wraps the backend when on
  const Backend* unwrapped = backend.get();
  backend = profiler.wrap(std::move(backend));
  // Fidelity references shared with the workload's other points: on the cpu (the same bits every time),
  // not when a profiler records each backend call of the point.
  const bool reuse = plan.backend == "cpu" && backend.get() == unwrapped && p.pipeline.fidelity;
  if (reuse) {
    src.references.resize(reqs.size());
    double others = 0;  // everything the cache holds but these references
    for (const auto& [k, s] : cache) others += s.input_bytes() + (k == wkey ? 0.0 : s.reference_bytes());
    // At most the workload's own size (a sweep of many steps would otherwise keep several times it).
    const double room = std::min(src.input_bytes(), std::max(0.0, memory_limit - need - others));
    for (auto& r : src.references) r.max_bytes = room / static_cast<double>(reqs.size());
    // Computed before the timed loop: the first point on a workload would otherwise compute them between
    // its timed stages (the exact indexer and dense attention evict the caches the next step starts from),
    // and its stage times would be slower than its followers' (1.6-2.5x score_ms measured at 4Ki tokens).
    stage("fidelity references");
    IP_RANGE(fidelity);
    for (std::size_t b = 0; b < reqs.size(); ++b) prepare_references(*backend, reqs[b], p.pipeline, src.references[b]);
  }
  if (tracker) {
    std::int64_t steps = 0;
    for (const auto& w : reqs) steps += w.steps();
    tracker->steps = steps;
    tracker->requests = static_cast<std::int64_t>(reqs.size());
    tracker->batched = p.batched && plan.backend == "cuda";
  }
  stage("decoding");
  PipelineParams pipeline = p.pipeline;
  pipeline.record_similarity = p.cache.enabled && p.cache.relevance == "cosine";
  std::vector<RequestResult> results;
  std::string batched_forms;  // the batched decoder's kernel forms (select.batched on cuda)
  try {
    if (p.batched && plan.backend == "cuda") {  // select.batched: the B requests decode together
      std::string why;
      const auto on_step = [&](std::size_t done, std::size_t total) {
        if (tracker) {
          tracker->requests.store(static_cast<std::int64_t>(total), std::memory_order_relaxed);
          tracker->requests_done.store(static_cast<std::int64_t>(done), std::memory_order_relaxed);
        }
        if (on_request) on_request(done, total, "batched step");
      };
      results = run_batched(reqs, pipeline, *backend, why, on_step, &batched_forms);
      if (!why.empty()) return skip(why);
    } else {
      // threads_per_request: several requests at once on the cpu (the backend holds no state of its own;
      // not under a profiler's wrapper, which records one call at a time).
      const int per_request = plan.backend == "cpu" && backend.get() == unwrapped ? p.threads_per_request : 0;
      results.resize(reqs.size());
      std::mutex progress;
      std::size_t done = 0;
      const auto run_one = [&](std::int64_t i) {
        const std::size_t b = static_cast<std::size_t>(i);
        RequestResult r = run_request(*backend, reqs[b], pipeline, reuse ? &src.references[b] : nullptr,
                                      tracker ? &tracker->steps_done : nullptr);
        // Only output.save_tensors reads a finished request's index rows: without it they go now, so the
        // requests under way hold one index each (estimate_point_bytes counts on it).
        if (!p.save_tensors) {
          std::vector<std::uint8_t>().swap(r.index.rows.payload);
          std::vector<float>().swap(r.index.rows.scales);
        }
        results[b] = std::move(r);
        const std::lock_guard<std::mutex> lock(progress);
        ++done;
        if (tracker) tracker->requests_done.store(static_cast<std::int64_t>(done), std::memory_order_relaxed);
        if (on_request) on_request(done, reqs.size(), "request");
      };
      if (per_request > 0)
        parallel_tasks(static_cast<std::int64_t>(reqs.size()), per_request, run_one);
      else
        for (std::size_t b = 0; b < reqs.size(); ++b) run_one(static_cast<std::int64_t>(b));
    }
  } catch (const Error& e) {
    // A device allocation that fails despite the estimate skips the point; any other error stops the run.
    if (plan.backend != "cuda" || std::string_view(e.what()).find("cudaErrorMemoryAllocation") == std::string_view::npos)
      throw;
    return skip(fmt::format("backend = {}: out of device memory despite the estimate: {}", p.backend, e.what()));
  }
  // The kernel forms the point ran (the batched decoder's, then the fidelity and other calls' on the backend).
  out.kernels = batched_forms.empty() ? "" : "batched decoder: " + batched_forms;
  if (const std::string more = backend->kernel_forms(); !more.empty())
    out.kernels += (out.kernels.empty() ? "" : "; ") + more;
  if (plan.backend == "cpu" && !p.pipeline.kernels.all_automatic()) {
    const std::string note = "the kernels.* forms apply to the cuda backend only; this point ran on the cpu";
    out.reason += (out.reason.empty() ? "" : "; ") + note;
  }
  std::vector<double> tr, br, mr, oe, pool, score, topk, attn;
  std::vector<double> layer, local, prefill, lerr, lmass, ltok, repooled, hidden;  // issue 7
  double per_group = 0;
  bool variable_groups = false;
  double bytes = 0, ebytes = 0, macs = 0, emacs = 0, tokens = 0;
  for (const auto& r : results) {
    for (const auto& s : r.steps) {
      tr.push_back(s.token_recall);
      br.push_back(s.block_recall);
      mr.push_back(s.mass_recall);
      oe.push_back(s.output_error);
      if (s.pool_ms > 0) pool.push_back(s.pool_ms);
      score.push_back(s.score_ms);
      topk.push_back(s.topk_ms);
      attn.push_back(s.attention_ms);
      layer.push_back(s.layer_ms);
      local.push_back(s.local_ms);
      lerr.push_back(s.layer_output_error);
      lmass.push_back(s.layer_mass_recall);
      ltok.push_back(s.layer_tokens);
      if (&s != &r.steps.front()) repooled.push_back(s.repooled_fraction);
      if (s.pool_async) hidden.push_back(s.pool_hidden_ms);  // 0 (nothing hidden) counts too
    }
    prefill.push_back(r.local_prefill_ms);
    per_group += r.tokens_per_group;
    variable_groups = variable_groups || r.variable_groups;
    bytes += r.index_bytes;
    ebytes += r.exact_index_bytes;
    macs += r.macs_per_query;
    emacs += r.exact_macs_per_query;
    tokens += static_cast<double>(r.tokens);
  }
  // The cache model replays what the requests selected, interleaved step by step.
  if (p.cache.enabled && !variable_groups) {  // adaptive groups: a variable number per step (cache model off)
    IP_RANGE(cache_model);
    stage("simulating the caches");
    std::vector<RequestSelections> sel;
    for (std::size_t b = 0; b < results.size(); ++b) {
      const RequestResult& r = results[b];
      const Workload& w = reqs[b];
      const Index64 Da = w.has_attention() ? w.attn_keys.dim(1) : 0, Dv = w.has_attention() ? w.values.dim(1) : 0;
      sel.push_back(RequestSelections{&r.selected, &r.selected_mass, &r.selected_similarity, r.k_groups,
                                      static_cast<Index64>(r.steps.size()), cache_object_bytes(p.cache, r.index, Da, Dv)});
    }
    const ip::cache::Trace trace = cache_trace(p.cache, sel);
    rec.cache = simulate_cache(p.cache, trace);
    if (!p.cache_trace.empty()) write_cache_trace(p, trace);
    double* level_rates[] = {&out.cache_l1_hit_rate, &out.cache_l2_hit_rate, &out.cache_l3_hit_rate};
    for (std::size_t i = 0; i < std::min<std::size_t>(3, rec.cache.levels.size()); ++i)
      *level_rates[i] = rec.cache.levels[i].hit_rate;
    out.cache_hit_rate = rec.cache.hit_rate;
    out.cache_opt_hit_rate = rec.cache.opt_hit_rate;
    out.cache_opt_single_hit_rate = rec.cache.opt_single_hit_rate;
  }
  stage("summarizing");
  rec.profile = profiler.finish();
  for (auto& r : results) {
    RequestDetail d;
    d.steps = std::move(r.steps);
    d.k_groups = r.k_groups;
    if (p.save_tensors) {
      d.composite_keys = dequantize(r.index.rows);
      if (!r.variable_groups) d.selected = std::move(r.selected);
    }
    rec.requests.push_back(std::move(d));
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
  out.layer_ms = median(layer);
  out.local_ms = median(local);
  out.local_prefill_ms = median(prefill);
  out.layer_output_error = mean_finite(lerr);
  out.layer_mass_recall = mean_finite(lmass);
  out.layer_tokens_per_step = mean_finite(ltok);
  out.repooled_fraction_mean = mean_finite(repooled);
  // A NaN entry (not measured on this backend) makes the column NaN.
  const bool unmeasured = std::any_of(hidden.begin(), hidden.end(), [](double x) { return std::isnan(x); });
  out.pool_hidden_ms = hidden.empty() || unmeasured ? kNoValue : median(hidden);
  out.tokens_per_group = per_group / B;
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rec;
}

namespace {

std::string axis_value(const PointRecord& p, const std::string& key) {
  for (const auto& [k, v] : p.axes)
    if (k == key) return v;
  return "";
}

// The first row of x whose squared norm (in double) is nonzero and outside float32's normal range
// [FLT_MIN, FLT_MAX], and that squared norm; row -1 when there is none.
std::pair<Index64, double> first_norm_outside_float(MatrixView<const float> x) {
  for (Index64 r = 0; r < x.rows; ++r) {
    double n2 = 0.0;
    for (Index64 d = 0; d < x.cols; ++d) n2 += static_cast<double>(x(r, d)) * x(r, d);
    if (n2 != 0.0 && (n2 < std::numeric_limits<float>::min() || n2 > std::numeric_limits<float>::max())) return {r, n2};
  }
  return {-1, 0.0};
}

std::string fmt_duration(double s) {
  if (s < 120) return fmt::format("{:.1f} s", s);
  if (s < 7200) return fmt::format("{:.1f} min", s / 60);
  return fmt::format("{:.1f} h", s / 3600);
}

}  // namespace

std::string host_name() {
  char buf[256] = {0};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

std::string version_string() {
  // The CPU code's target: results from builds for different ones may differ in the last bits (README,
  // Determinism).
  return fmt::format("indexpool {} (git {}; CUDA build: {}; NVTX: {}; CUPTI: {}; CPU code: {})", IP_VERSION,
                     IP_GIT_REVISION, IP_HAVE_CUDA ? "yes" : "no", IP_HAVE_NVTX ? "yes" : "no",
                     IP_HAVE_CUPTI ? "yes" : "no", ip::isa_level(ip::kBuildIsa));
}

std::string devices_string() {
#if IP_HAVE_CUDA
  return ip::cuda::describe_devices();
#else
  return "CUDA not built";
#endif
}

void preload_imports(const std::vector<Point>& points, WorkloadCache& cache) {
  for (const auto& p : points) {
    if (p.source == "synthetic") continue;
    auto& reqs = cache[source_key(p)].requests;
    if (!reqs.empty()) continue;
    try {
      reqs.push_back(import_workload(p.source));
    } catch (const Error& e) {
      throw Error(fmt::format("workload.source: {}", e.what()));
    }
    IP_REQUIRE(p.max_context <= 0 || reqs.back().tokens() <= p.max_context,
               "workload.source '{}': the imported context has {} tokens, more than limits.max_context = {} tokens",
               p.source, reqs.back().tokens(), p.max_context);
  }
  // What the file must hold for each point's settings, checked here so that no point fails after others ran
  // (the config checks the same for synthetic workloads when it is read).
  std::map<std::string, std::pair<Index64, Index64>> largest;  // by file: (token, dim) of its largest |index key|
  std::map<std::string, std::pair<Index64, double>> key_norms, query_norms;  // by file: first_norm_outside_float
  for (const auto& p : points) {
    if (p.source == "synthetic") continue;
    const Workload& w = cache[source_key(p)].requests.front();
    // A growing context over an import: the file holds the prompt and every step's appended tokens.
    const Index64 append = p.pipeline.append_per_step;
    IP_REQUIRE(append == 0 || w.tokens() > w.steps() * append,
               "workload.append_per_step = {}: the imported context '{}' has {} tokens, not more than its {} steps x "
               "{} (point {}: {})",
               append, p.source, w.tokens(), w.steps(), append, p.index, p.key);
    IP_REQUIRE(!p.pipeline.hybrid.enabled || w.has_attention(),
               "hybrid.enabled = true: the imported workload '{}' has no attention keys, values and queries "
               "(attn_keys, values, attn_queries), which the hybrid layer needs (point {}: {})",
               p.source, p.index, p.key);
    IP_REQUIRE(!p.cache.enabled || p.cache.object != "kv" || w.has_attention(),
               "cache.object = kv sizes each cache access by the group's attention keys and values, and the imported "
               "workload '{}' has none (attn_keys, values, attn_queries): set cache.object = index (the index entry) "
               "or cache.enabled = false (point {}: {})",
               p.source, p.index, p.key);
    // fp16 rows: a composite is a convex combination of its group's keys (maxmin: their extremes), so it
    // overflows fp16 exactly when some key is beyond fp16's largest finite value; it would be stored as an
    // infinity and every score against it would be too.
    if (p.pipeline.pool.precision == Precision::fp16) {
      auto [it, fresh] = largest.try_emplace(p.source, std::pair<Index64, Index64>{0, 0});
      const MatrixView<const float> k = w.index_keys.mat();
      if (fresh)  // the first element of largest magnitude, once a file
        for (Index64 t = 0; t < k.rows; ++t)
          for (Index64 d = 0; d < k.cols; ++d)
            if (std::fabs(k(t, d)) > std::fabs(k(it->second.first, it->second.second))) it->second = {t, d};
      const auto [t, d] = it->second;
      IP_REQUIRE(std::fabs(k(t, d)) <= 65504.0f,
                 "pool.precision = fp16: the imported index key of token {} has the value {} (dimension {}), beyond "
                 "fp16's largest finite value 65504, so its index would hold infinities; use bf16 or fp32, or scale "
                 "the keys (point {}: {})",
                 t, k(t, d), d, p.index, p.key);
    }
    // Cosine weights divide k.m by |k| |m|, each from a float32 sum of squares: a key (or, against past queries, a
    // query) whose squared norm overflows float32 or falls below its smallest normal value would get the floor
    // eps, or an inexact cosine, without a word. So every nonzero one must lie in [FLT_MIN, FLT_MAX].
    const WeightParams& wp = p.pipeline.pool.weights;
    if (wp.scheme == Weighting::cosine || (wp.scheme == Weighting::hybrid && wp.alpha_cosine != 0.0f)) {
      const auto refuse = [&](const std::string& what, double norm2) {
        const bool big = norm2 > std::numeric_limits<float>::max();
        throw Error(fmt::format(
            "pool.weighting = {}: the imported {} has a squared norm of {:.3g}, {} float32's {} {:.3g}, so its cosine "
            "similarity cannot be computed in float32; scale the keys and queries of '{}' (point {}: {})",
            to_string(wp.scheme), what, norm2, big ? "beyond" : "below",
            big ? "largest finite value" : "smallest normal value",
            big ? double{std::numeric_limits<float>::max()} : double{std::numeric_limits<float>::min()}, p.source,
            p.index, p.key));
      };
      auto [k, fresh] = key_norms.try_emplace(p.source);
      if (fresh) k->second = first_norm_outside_float(w.index_keys.mat());
      if (k->second.first >= 0) refuse(fmt::format("index key of token {}", k->second.first), k->second.second);
      if (wp.cosine_reference == CosineReference::query) {
        const Index64 H = w.index_heads();
        auto [q, fresh_q] = query_norms.try_emplace(p.source);
        if (fresh_q)
          q->second = first_norm_outside_float(
              MatrixView<const float>{w.index_queries.data(), w.steps() * H, w.dim(), w.dim()});
        if (q->second.first >= 0)
          refuse(fmt::format("index query of step {} (head {})", q->second.first / H, q->second.first % H),
                 q->second.second);
      }
    }
    const AdaptiveParams& a = p.pipeline.adaptive;
    if (a.enabled) {
      const double row = static_cast<double>(w.dim() * element_bytes(p.pipeline.pool.precision) +
                                             scale_bytes(p.pipeline.pool.precision));
      const Index64 T = adaptive_budget_short_context(a, w.tokens() - w.steps() * append, append, w.steps(), row);
      IP_REQUIRE(T == 0,
                 "adaptive.budget = {} bytes per token is below the smallest adaptive index ({:.3f} bytes per token, "
                 "every segment at G = 16) over {} tokens of the imported context '{}' (point {}: {})",
                 a.budget_bytes_per_token, adaptive_smallest_index_bytes(T, a.segment, row) / static_cast<double>(T),
                 T, p.source, p.index, p.key);
    }
  }
}

ImportShape import_shape(const Workload& w) {
  ImportShape s;
  s.tokens = w.tokens();
  s.steps = w.steps();
  s.dim = static_cast<int>(w.dim());
  s.index_heads = static_cast<int>(w.index_heads());
  s.attn_dim = w.attn_keys.empty() ? 0 : static_cast<int>(w.attn_keys.dim(1));
  s.attn_heads = w.attn_queries.empty() ? 0 : static_cast<int>(w.attn_queries.dim(1));
  s.value_dim = w.values.empty() ? 0 : static_cast<int>(w.values.dim(1));
  return s;
}

Point sized_point(const Point& p, const ImportShape& shape) {
  if (p.source == "synthetic") return p;
  Point q = p;
  WorkloadSpec& s = q.workload;
  // The file holds the whole context, tokens appended over the steps included (pipeline.append_per_step).
  s.append_per_step = p.pipeline.append_per_step;
  s.tokens = shape.tokens - shape.steps * s.append_per_step;
  s.requests = 1;
  s.length_spread = 0;
  s.dim = shape.dim;
  s.index_heads = shape.index_heads;
  s.steps = static_cast<int>(shape.steps);
  s.attn_dim = shape.attn_dim;
  s.attn_heads = shape.attn_heads;
  s.value_dim = shape.value_dim;
  return q;
}

Point sized_point(const Point& p, const WorkloadCache& cache) {
  if (p.source == "synthetic") return p;
  const auto it = cache.find(source_key(p));
  IP_REQUIRE(it != cache.end() && !it->second.requests.empty(), "workload '{}' was not preloaded", p.source);
  return sized_point(p, import_shape(it->second.requests.front()));
}

namespace {

// The progress lines of `run_points`: the main thread prints a line as each point starts (and its notes),
// and a thread of its own, while a point has run longer than the interval, a line of what it is doing
// (PointProgress) every interval: on a terminal it rewrites the line in place, otherwise it appends one.
// The two print under one mutex, so lines never mix.
class ProgressLines {
 public:
  ProgressLines(bool tty, double interval_s) : tty_(tty), interval_(interval_s) {
    // The thread takes none of the stop signals: their handler runs on another thread.
    sigset_t block, old;
    block_stop_signals(&block);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    thread_ = std::thread([this] { loop(); });
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }
  ~ProgressLines() {
    {
      const std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  ProgressLines(const ProgressLines&) = delete;
  ProgressLines& operator=(const ProgressLines&) = delete;

  PointProgress& progress() { return progress_; }
  // `prefix`: "[i/n] label"; `sweep_t0`: when the sweep started (for its elapsed time).
  void begin_point(std::string prefix, std::chrono::steady_clock::time_point sweep_t0) {
    const std::lock_guard<std::mutex> lock(mu_);
    progress_.reset();
    prefix_ = std::move(prefix);
    sweep_t0_ = sweep_t0;
    point_t0_ = last_ = std::chrono::steady_clock::now();
    in_point_ = true;
  }
  void end_point() {
    const std::lock_guard<std::mutex> lock(mu_);
    in_point_ = false;
  }
  // A line from the main thread (`rewrite`: the self-updating line on a terminal).
  void print(const std::string& line, bool rewrite) {
    const std::lock_guard<std::mutex> lock(mu_);
    emit(line, rewrite);
  }

 private:
  void emit(const std::string& line, bool rewrite) {
    if (tty_ && rewrite)
      std::fprintf(stderr, "\r\033[K%s", line.c_str());
    else
      std::fprintf(stderr, "%s%s\n", tty_ ? "\r\033[K" : "", line.c_str());
    std::fflush(stderr);
  }

  std::string describe() const {
    const char* st = progress_.stage.load(std::memory_order_relaxed);
    std::string what = *st ? st : "starting";
    if (std::string_view(st) == "decoding") {
      const std::int64_t rd = progress_.requests_done.load(std::memory_order_relaxed),
                         r = progress_.requests.load(std::memory_order_relaxed),
                         sd = progress_.steps_done.load(std::memory_order_relaxed),
                         sn = progress_.steps.load(std::memory_order_relaxed);
      if (progress_.batched.load(std::memory_order_relaxed))
        what += rd == 0 ? std::string(": the batch's first decode step") : fmt::format(": {} of {} batched decode steps done", rd, r);
      else if (r > 1)
        what += fmt::format(": {} of {} requests, {} of {} decode steps done", rd, r, sd, sn);
      else
        what += fmt::format(": {} of {} decode steps done", sd, sn);
    }
    return what;
  }

  void loop() {
    const auto interval = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(interval_));
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      cv_.wait_for(lock, interval);
      if (stopping_ || !in_point_) continue;
      const auto now = std::chrono::steady_clock::now();
      if (now - last_ < interval || now - point_t0_ < interval) continue;
      last_ = now;
      const double in_point = std::chrono::duration<double>(now - point_t0_).count(),
                   el = std::chrono::duration<double>(now - sweep_t0_).count();
      emit(fmt::format("{} | {} | {} in this point | elapsed {}", prefix_, describe(), fmt_duration(in_point),
                       fmt_duration(el)),
           true);
    }
  }

  const bool tty_;
  const double interval_;
  PointProgress progress_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false, in_point_ = false;
  std::string prefix_;
  std::chrono::steady_clock::time_point sweep_t0_, point_t0_, last_;
  std::thread thread_;
};

}  // namespace

std::vector<PointRecord> run_points(const Sweep& sweep, const std::vector<Point>& points, const RunOptions& opt,
                                    WorkloadCache& cache, ResultsFile* out) {
  std::vector<PointRecord> rows;
  std::vector<const Point*> todo;
  std::unique_lock<std::mutex> out_lock;  // held while `out` is read or written (RunOptions::out_mutex)
  if (opt.out_mutex) out_lock = std::unique_lock<std::mutex>(*opt.out_mutex);
  for (const auto& p : points)
    if (!out || !out->has(p.key)) todo.push_back(&p);
  const bool tty = isatty(fileno(stderr));
  if (!opt.quiet && out && (todo.size() < points.size() || out->retried() > 0))
    std::fprintf(stderr, "resuming: %zu of %zu points already in the results file%s\n", points.size() - todo.size(),
                 points.size(),
                 out->retried() > 0
                     ? fmt::format("; {} recorded as skipped run again", out->retried()).c_str()
                     : "");
  if (!opt.quiet && out && !out->completes_shards().empty())
    std::fprintf(stderr, "resuming: the file held shards %s; it will hold the whole sweep (shard 0/1)\n",
                 out->completes_shards().c_str());
  if (out_lock) out_lock.unlock();
  const auto t0 = std::chrono::steady_clock::now();
  const std::size_t n = todo.size();
  // A workload stays in `cache` until the last point that uses it has run (points that share a workload
  // reuse it; a sweep over seeds or context lengths does not keep every workload it made).
  std::map<std::string, std::size_t> uses;
  for (const Point* p : todo) ++uses[source_key(*p)];
  std::optional<ProfileCapture> capture;  // --profile: the measured region for Nsight
  if (opt.profile) capture.emplace(points);
  std::optional<ProgressLines> lines;
  if (!opt.quiet && n > 0) lines.emplace(tty, opt.progress_interval_s > 0 ? opt.progress_interval_s : tty ? 1.0 : 30.0);
  for (std::size_t i = 0; i < n && !(opt.stop && *opt.stop); ++i) {
    const Point& p = *todo[i];
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string prefix = fmt::format("[{}/{}] {}", i + 1, n, point_label(p, sweep.points.size()));
    if (lines) {
      const std::string eta = i ? fmt_duration(el / static_cast<double>(i) * static_cast<double>(n - i)) : "?";
      lines->print(fmt::format("{} | elapsed {} | ETA {}", prefix, fmt_duration(el), eta), true);
      lines->begin_point(prefix, t0);
    }
    PointProgress* progress = lines ? &lines->progress() : nullptr;
    {
      IP_RANGE_MESSAGE(fmt::format("point {}: {}", p.index, p.key));  // one NVTX range per point
      rows.push_back(run_point(p, sweep.memory_limit, cache, {}, progress, sweep.memory_limit_source));
      if (--uses[source_key(p)] == 0) cache.erase(source_key(p));
      if (out) {
        IP_RANGE(output);
        if (progress) progress->stage = "writing the results file";
        if (opt.out_mutex) out_lock.lock();
        out->append(rows.back());
        if (out_lock) out_lock.unlock();
        // The per-request details (step tables, saved tensors) are in the file now; keep the summary.
        std::vector<RequestDetail>().swap(rows.back().requests);
      }
    }
    // The point's buffers are free now, but glibc keeps freed heap memory (its mmap threshold grows after the
    // first large free, so later large buffers come from the heap): give it back between points, or a sweep
    // of many points grew to several times one point's footprint (40 points of 16Ki tokens: 290 MB, not 50).
    malloc_trim(0);
    if (lines) {
      lines->end_point();
      if (rows.back().summary.status != "ok")  // (on a terminal this was printed as a "note")
        lines->print(fmt::format("[{}/{}] skipped: {}", i + 1, n, rows.back().summary.reason), false);
      else if (!rows.back().summary.reason.empty())  // a point that ran, with a note
        lines->print(fmt::format("[{}/{}] note: {}", i + 1, n, rows.back().summary.reason), false);
    }
  }
  if (out) {
    IP_RANGE(output);
    if (opt.out_mutex) out_lock.lock();
    out->flush();
    if (out_lock) out_lock.unlock();
  }
  lines.reset();
  if (!opt.quiet) {
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "%s%zu points in %s\n", tty && n ? "\r\033[K" : "", rows.size(), fmt_duration(el).c_str());
  }
  return rows;
}

std::string summary_table(const std::vector<std::string>& axis_keys, const std::vector<PointRecord>& rows) {
  std::string out;
  std::string head;
  for (const auto& k : axis_keys) head += fmt::format("{:>18} ", k.substr(k.find('.') + 1));
  head += fmt::format("{:>10} {:>7} {:>10} {:>7} {:>7} {:>7} {:>8} {:>9} {:>9} {:>8} {:>6} {:>6} {:>6}", "idx B/tok", "ratio",
                      "MMAC/q", "tokRec", "blkRec", "massRec", "outErr", "score ms", "topk ms", "pool ms", "cache",
                      "OPT-h", "bound");
  head += fmt::format(" {:>9} {:>8} {:>8} {:>7}", "layer ms", "lyrErr", "lyrMass", "repool");
  out += head + "\n" + std::string(head.size(), '-') + "\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::string line;
    for (const auto& k : axis_keys) line += fmt::format("{:>18} ", axis_value(rows[i], k));
    const auto& r = rows[i].summary;
    if (r.status != "ok") {
      out += line + "skipped: " + r.reason + "\n";
      continue;
    }
    line += fmt::format("{:>10.2f} {:>6.2f}x {:>10.2f} {:>7.4f} {:>7.4f} {:>7.4f} {:>8.4f} {:>9.3f} {:>9.3f} {:>8.3f}",
                        r.index_bytes_per_token, r.exact_bytes_per_token / r.index_bytes_per_token,
                        r.macs_per_query / 1e6, r.token_recall, r.block_recall, r.mass_recall, r.output_error,
                        r.score_ms, r.topk_ms, r.pool_ms);
    line += fmt::format(" {:>6.3f} {:>6.3f} {:>6.3f}", r.cache_hit_rate, r.cache_opt_hit_rate, r.cache_opt_single_hit_rate);
    line += fmt::format(" {:>9.3f} {:>8.4f} {:>8.4f} {:>7.3f}", r.layer_ms, r.layer_output_error, r.layer_mass_recall,
                        r.repooled_fraction_mean);
    out += line + "\n";
  }
  out += "\nidx B/tok: stored index bytes per context token; ratio: uncompressed keys (same precision) / index;\n"
         "MMAC/q: scoring multiply-adds per query (millions); tokRec, blkRec, massRec: token, block and\n"
         "attention-mass recall (fractions); outErr: relative L2 error of the attention output; times: median\n"
         "milliseconds per step (pool: per index build) on the point's backend (run_backend in the results file);\n"
         "cache: fraction of the selected groups' accesses that hit some cache level; OPT-h: the same hierarchy with\n"
         "Belady's OPT at every level (a reference, not a bound); bound: Belady's OPT on one cache of all levels'\n"
         "capacity, an upper bound on the cache column for any policies (nan: objects of different sizes);\n"
         "layer ms: median per-step time of the attention layer (sparse branch, plus the local branch when hybrid);\n"
         "lyrErr, lyrMass: its output error and the dense mass on the tokens it covers; repool: mean fraction of\n"
         "groups re-pooled per step after the first.\n";
  return out;
}

}  // namespace ip::exp
