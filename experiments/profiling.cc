// Profiling in the runner: metric validation, profile mode, the measuring backend wrapper, HDF5 tables.
// See profiling.h.
#include "experiments/profiling.h"

#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "core/error.h"
#include "core/ranges.h"
#include "indexpool/build_config.h"
#if IP_HAVE_CUDA
#include "kernels/device.h"
#include "kernels/profiler_api.h"
#endif
#if IP_HAVE_CUPTI
#include "kernels/cupti_counters.h"
#include "kernels/kernel_records.h"
#endif

namespace ip::exp {
namespace {

using Kind = h5::Column::Kind;
using prof::Stage;

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

// Prints each distinct message once per process (a sweep of 1000 points says "no GPU" once).
void note_once(const std::string& what, const std::string& reason) {
  static std::mutex mu;
  static std::set<std::string> said;
  const std::lock_guard<std::mutex> lock(mu);
  if (said.insert(what + reason).second) std::fprintf(stderr, "indexpool: %s not read: %s\n", what.c_str(), reason.c_str());
}

[[maybe_unused]] bool has_device() {
#if IP_HAVE_CUDA
  return cuda::device_count() > 0;
#else
  return false;
#endif
}

}  // namespace

std::string validate_profiling(const Sweep& sweep, const std::vector<Point>& points) {
  std::map<std::pair<std::string, std::string>, bool> lists;  // (chip setting, metrics) -> seen
  for (const auto& p : points)
    if (p.profile.counters) lists[{p.profile.chip, join(p.profile.metrics)}] = true;
  if (lists.empty()) return "";
  auto where_set = [&](const std::string& key) {
    for (const auto& s : sweep.settings)
      if (s.key == key) return s.line > 0 ? fmt::format("{}:{}", s.file, s.line) : s.line < 0 ? s.file : "command line";
    return "default of " + key;
  };
  const std::string where = where_set("profile.metrics");
  std::string out;
#if IP_HAVE_CUPTI
  for (const auto& [key, seen] : lists) {
    std::string chip = key.first;
    std::string how = "profile.chip";
    if (chip == "auto") {
      try {
        chip = has_device() ? cupti::device_chip(0) : "GH100";
        how = has_device() ? "device 0" : "no device: the H100/H200 target";
      } catch (const cupti::CountersUnavailable&) {
        chip = "GH100";
        how = "device chip unknown: the H100/H200 target";
      }
    }
    std::vector<std::string> metrics;
    for (const auto& p : points)
      if (p.profile.counters && p.profile.chip == key.first && join(p.profile.metrics) == key.second) {
        metrics = p.profile.metrics;
        break;
      }
    try {
      const cupti::MetricPlan plan = cupti::plan_metrics(chip, metrics);
      out += fmt::format("profile.metrics: {} metrics valid for {} ({}), {} replay passes per stage call\n",
                         plan.metrics.size(), chip, how, plan.passes);
    } catch (const cupti::UnknownMetric& e) {
      throw Error(fmt::format("{}: key 'profile.metrics': {}", where, e.what()));
    } catch (const Error& e) {  // the chip: profile.chip's value (or, with auto, the device's)
      throw Error(fmt::format("{}: key 'profile.chip' = {}{}: {}", where_set("profile.chip"), key.first,
                              key.first == "auto" ? fmt::format(" ({})", how) : "", e.what()));
    }
  }
#else
  out = "profile.metrics: not checked (this build has no CUPTI; counters will not be read)\n";
#endif
  return out;
}

std::string apply_profile_mode(std::vector<Point>& points) {
  static const char* const why = "--profile: Nsight and in-process CUPTI cannot both read the GPU";
  bool any = false;
  for (auto& p : points) {
    any = any || p.profile.counters || p.profile.kernel_records;
    if (p.profile.counters) p.profile.counters_off = why;  // recorded in the point as unavailable, with why
    if (p.profile.kernel_records) p.profile.kernel_records_off = why;
    p.profile.counters = p.profile.kernel_records = false;
  }
  return any ? "--profile: profile.counters and profile.kernel_records are off (Nsight and in-process CUPTI "
               "cannot both read the GPU)\n"
             : "";
}

struct SweepRange {
  prof::ScopedRange range{Stage::sweep};
};

ProfileCapture::ProfileCapture(const std::vector<Point>& points)
    : range_(std::make_unique<SweepRange>()) {
  bool cuda = false;
  for (const auto& p : points) cuda = cuda || p.backend == "cuda" || p.backend == "auto";
#if IP_HAVE_CUDA
  if (cuda && has_device()) started_ = cuda::profiler_start();
#endif
  if (!started_)  // a warning, not progress: printed with --quiet too
    std::fprintf(stderr,
                 "--profile: no cudaProfilerStart (%s), so nsys --capture-range=cudaProfilerApi captures nothing;\n"
                 "  capture the NVTX range instead: nsys profile --trace=nvtx,osrt --capture-range=nvtx "
                 "--nvtx-capture='sweep@IndexPool' ...\n",
                 !cuda ? "the points run on the cpu backend; the CUDA profiler API needs backend = cuda"
                       : "no CUDA device is usable");
}

ProfileCapture::~ProfileCapture() {
#if IP_HAVE_CUDA
  if (started_) {
    try {
      cuda::profiler_stop();
    } catch (const Error& e) {
      std::fprintf(stderr, "indexpool: %s\n", e.what());
    }
  }
#endif
}

// ---------------------------------------------------------------------------------------------------
// The measuring backend.

struct PointProfiler::Impl {
  ProfileParams params;
  std::string backend = "cpu";
  ProfileResult result;
#if IP_HAVE_CUPTI
  std::unique_ptr<cupti::RangeProfiler> counters;
  std::unique_ptr<cupti::KernelRecorder> recorder;
#endif
  // Aggregation per stage: calls and per-metric sums.
  std::map<Stage, std::pair<std::int64_t, std::vector<double>>> sums;

  void counters_failed(const std::string& why) {
    result.counters_status = "unavailable";
    result.counters_reason = why;
    result.counters.clear();
    sums.clear();
#if IP_HAVE_CUPTI
    counters.reset();
#endif
    note_once("counters", why);
  }

  // Runs `call` as the pipeline asked, then (counters on) once per replay pass in a user range.
  // `save`/`restore` keep the inputs `call` changes (see profiling.h).
  void run(Stage stage, const std::function<void()>& call, const std::function<void()>& save = {},
           const std::function<void()>& restore = {}) {
    const Stage s = prof::ScopedRange::current_stage() == Stage::fidelity ? Stage::fidelity : stage;
#if IP_HAVE_CUPTI
    const std::uint64_t tag_base = (static_cast<std::uint64_t>(s) + 1) << 16;
    if (recorder) recorder->push_tag(tag_base);
    if (save && counters) save();
    call();
    if (recorder) recorder->pop_tag();
    if (!counters) return;
    bool applied = true;  // the inputs hold one application of `call`
    std::int64_t pass = 0;
    try {
      if (restore) {  // every replay pass starts from the inputs the call above saw
        restore();
        applied = false;
      }
      const std::vector<double> v = counters->measure(
          prof::stage_name(s),
          [&] {
            ++pass;
            if (recorder) recorder->push_tag(tag_base + static_cast<std::uint64_t>(pass));
            call();
            if (recorder) recorder->pop_tag();
            applied = true;
          },
          [&] {
            if (restore) restore();
            applied = !restore;
          });
      auto& [calls, acc] = sums[s];
      if (acc.empty()) acc.assign(v.size(), 0.0);
      ++calls;
      for (std::size_t i = 0; i < v.size(); ++i) acc[i] += v[i];
    } catch (const cupti::CountersUnavailable& e) {
      counters_failed(e.what());
      if (!applied) call();  // put the inputs back to one application
    }
#else
    (void)s, (void)save, (void)restore;
    call();
#endif
  }
};

namespace {

class ProfilingBackend final : public Backend {
 public:
  ProfilingBackend(std::unique_ptr<Backend> inner, PointProfiler::Impl& prof) : inner_(std::move(inner)), p_(prof) {}
  std::string name() const override { return inner_->name(); }
  std::string device() const override { return inner_->device(); }
  std::string kernel_forms() const override { return inner_->kernel_forms(); }
  void build_index(MatrixView<const float> keys, const PoolParams& pp, const AccessStats* stats,
                   const float* query_ref, PooledIndex& out) override {
    p_.run(Stage::pool, [&] { inner_->build_index(keys, pp, stats, query_ref, out); });
  }
  void score_index(const PooledIndex& index, const IndexQuery& q, float* out) override {
    p_.run(Stage::score, [&] { inner_->score_index(index, q, out); });
  }
  void score_index_for_topk(const PooledIndex& index, const IndexQuery& q, float* scores) override {
    p_.run(Stage::score, [&] { inner_->score_index_for_topk(index, q, scores); });
  }
  void score_tokens(MatrixView<const float> keys, const IndexQuery& q, float* out) override {
    p_.run(Stage::fidelity, [&] { inner_->score_tokens(keys, q, out); });
  }
  std::vector<std::int32_t> topk(const float* scores, Index64 n, Index64 k) override {
    std::vector<std::int32_t> r;
    p_.run(Stage::topk, [&] { r = inner_->topk(scores, n, k); });
    return r;
  }
  AttentionOutput attention(MatrixView<const float> keys, MatrixView<const float> values,
                            MatrixView<const float> queries, std::span<const Index64> tokens,
                            bool want_probs) override {
    AttentionOutput r;
    p_.run(Stage::attention, [&] { r = inner_->attention(keys, values, queries, tokens, want_probs); });
    return r;
  }
  void update_stats(AccessStats& stats, std::span<const float> step_mass,
                    std::span<const std::pair<Index64, Index64>> selected_ranges) override {
    // The statistics are input and output: keep a copy from before the call, put it back before each
    // replay pass (every pass then applies the same update to the same statistics).
    std::optional<AccessStats> saved;
    p_.run(
        Stage::stats, [&] { inner_->update_stats(stats, step_mass, selected_ranges); }, [&] { saved = stats; },
        [&] { stats = *saved; });
  }
  // Forwarded without counters: residency hints, key staging and warm-ups (outside the stages' clocks),
  // and the issue-7 stages (no counter ranges yet), so the wrapped backend's own implementations run,
  // not the base-class CPU defaults.
  void hold_inputs(bool hold) override { inner_->hold_inputs(hold); }
  void stage_keys(MatrixView<const float> keys, bool for_updates) override { inner_->stage_keys(keys, for_updates); }
  void warm_up_build(MatrixView<const float> keys, const PoolParams& pp, const AccessStats* stats,
                     const float* query_ref, PooledIndex& out) override {
    inner_->warm_up_build(keys, pp, stats, query_ref, out);
  }
  void warm_up_update(MatrixView<const float> keys, const PoolParams& pp, const AccessStats* stats,
                      const float* query_ref, float tau, bool async, IndexState& st) override {
    inner_->warm_up_update(keys, pp, stats, query_ref, tau, async, st);
  }
  void local_prefill(const Workload& w, Index64 begin, Index64 end, int chunk, LocalBranch& lb) override {
    inner_->local_prefill(w, begin, end, chunk, lb);
  }
  void warm_up_local_prefill(const Workload& w, Index64 begin, Index64 end, int chunk) override {
    inner_->warm_up_local_prefill(w, begin, end, chunk);
  }
  void local_append(const Workload& w, Index64 new_end, LocalBranch& lb) override {
    inner_->local_append(w, new_end, lb);
  }
  void local_readout(const LocalBranch& lb, MatrixView<const float> queries, float* out) override {
    inner_->local_readout(lb, queries, out);
  }
  RepoolCount update_index(MatrixView<const float> keys, const PoolParams& pp, const AccessStats* stats,
                           const float* query_ref, float tau, IndexState& st) override {
    return inner_->update_index(keys, pp, stats, query_ref, tau, st);
  }
  PendingUpdate begin_update_index(MatrixView<const float> keys, const PoolParams& pp, const AccessStats* stats,
                                   const float* query_ref, float tau, IndexState& st) override {
    return inner_->begin_update_index(keys, pp, stats, query_ref, tau, st);
  }
  void end_update_index(PendingUpdate& u) override { inner_->end_update_index(u); }

 private:
  std::unique_ptr<Backend> inner_;
  PointProfiler::Impl& p_;
};

}  // namespace

PointProfiler::PointProfiler(const Point& p) : impl_(std::make_unique<Impl>()) {
  impl_->params = p.profile;
  ProfileResult& r = impl_->result;
  if (!p.profile.counters_off.empty()) r.counters_status = "unavailable", r.counters_reason = p.profile.counters_off;
  if (!p.profile.kernel_records_off.empty())
    r.kernels_status = "unavailable", r.kernels_reason = p.profile.kernel_records_off;
}
PointProfiler::~PointProfiler() = default;

std::unique_ptr<Backend> PointProfiler::wrap(std::unique_ptr<Backend> inner) {
  Impl& m = *impl_;
  const ProfileParams& pp = m.params;
  m.backend = inner->name();
  if (!pp.counters && !pp.kernel_records) return inner;
  auto unavailable = [&](std::string& status, std::string& reason, const char* what, std::string why) {
    status = "unavailable";
    reason = std::move(why);
    note_once(what, reason);
  };
  const bool cuda = m.backend == "cuda";
  const std::string not_cuda = fmt::format(
      "the point ran on the {} backend; counters and kernel records come from CUDA kernels (set backend = cuda "
      "on a machine with a GPU)",
      m.backend);
#if IP_HAVE_CUPTI
  if (pp.kernel_records) {
    if (!cuda) {
      unavailable(m.result.kernels_status, m.result.kernels_reason, "kernel records", not_cuda);
    } else {
      try {
        m.recorder = std::make_unique<cupti::KernelRecorder>();
        m.result.kernels_status = "ok";
      } catch (const Error& e) {
        unavailable(m.result.kernels_status, m.result.kernels_reason, "kernel records", e.what());
      }
    }
  }
  if (pp.counters) {
    if (!cuda) {
      unavailable(m.result.counters_status, m.result.counters_reason, "counters", not_cuda);
    } else {
      try {
        m.counters = std::make_unique<cupti::RangeProfiler>(0, pp.metrics);
        m.result.counters_status = "ok";
        m.result.chip = m.counters->plan().chip;
        m.result.passes = static_cast<std::int64_t>(m.counters->passes());
      } catch (const Error& e) {
        m.counters.reset();
        unavailable(m.result.counters_status, m.result.counters_reason, "counters", e.what());
      }
    }
  }
  if (!m.counters && !m.recorder) return inner;
#else
  const std::string why = cuda ? "this build has no CUPTI (configure with the CUDA toolkit's CUPTI)" : not_cuda;
  if (pp.counters) unavailable(m.result.counters_status, m.result.counters_reason, "counters", why);
  if (pp.kernel_records) unavailable(m.result.kernels_status, m.result.kernels_reason, "kernel records", why);
  return inner;
#endif
  return std::make_unique<ProfilingBackend>(std::move(inner), m);
}

ProfileResult PointProfiler::finish() {
  Impl& m = *impl_;
#if IP_HAVE_CUPTI
  if (m.counters && m.result.counters_status == "ok") {
    const cupti::MetricPlan& plan = m.counters->plan();
    for (const auto& [stage, agg] : m.sums) {
      const auto& [calls, acc] = agg;
      for (std::size_t i = 0; i < plan.metrics.size() && i < acc.size(); ++i) {
        const auto& mi = plan.metrics[i];
        m.result.counters.push_back(StageCounter{prof::stage_name(stage), mi.name,
                                                 mi.sums ? acc[i] : acc[i] / static_cast<double>(calls), mi.unit,
                                                 calls, mi.sums ? "sum" : "mean"});
      }
    }
  }
  m.counters.reset();
  if (m.recorder) {
    try {
      std::size_t dropped = 0;
      for (auto& k : m.recorder->collect(&dropped)) {
        KernelLaunch l;
        l.name = std::move(k.name);
        const std::uint64_t stage = k.tag >> 16;
        l.stage = stage == 0 ? "" : prof::stage_name(static_cast<Stage>(stage - 1));
        l.pass = static_cast<std::int64_t>(k.tag & 0xFFFF);
        l.duration_ns = static_cast<double>(k.duration_ns);
        l.grid_x = k.grid[0], l.grid_y = k.grid[1], l.grid_z = k.grid[2];
        l.block_x = k.block[0], l.block_y = k.block[1], l.block_z = k.block[2];
        l.registers_per_thread = k.registers_per_thread;
        l.static_shared_bytes = k.static_shared_bytes;
        l.dynamic_shared_bytes = k.dynamic_shared_bytes;
        m.result.kernels.push_back(std::move(l));
      }
      if (dropped) m.result.kernels_reason = fmt::format("CUPTI dropped {} kernel records", dropped);
    } catch (const Error& e) {
      m.result.kernels_status = "unavailable";
      m.result.kernels_reason = e.what();
    }
    m.recorder.reset();
  }
#endif
  return std::move(m.result);
}

void write_profile(h5::File& f, const std::string& g, const ProfileResult& r) {
  f.set_attr(g, "counters_status", r.counters_status);
  f.set_attr(g, "counters_reason", r.counters_reason);
  f.set_attr(g, "kernels_status", r.kernels_status);
  f.set_attr(g, "kernels_reason", r.kernels_reason);
  if (r.counters_status == "ok") {
    f.set_attr(g, "counters_chip", r.chip);
    f.set_attr(g, "counters_passes", r.passes);
  }
  if (!r.counters.empty()) {
    h5::Table t;
    t.add("stage", Kind::kString);
    t.add("metric", Kind::kString);
    t.add("value", Kind::kFloat64);
    t.add("unit", Kind::kString);
    t.add("calls", Kind::kInt64);
    t.add("aggregate", Kind::kString);
    for (const auto& c : r.counters) {
      t.columns[0].strings.push_back(c.stage);
      t.columns[1].strings.push_back(c.metric);
      t.columns[2].floats.push_back(c.value);
      t.columns[3].strings.push_back(c.unit);
      t.columns[4].ints.push_back(c.calls);
      t.columns[5].strings.push_back(c.aggregate);
    }
    f.write_table(g + "/counters", t);
  }
  if (!r.kernels.empty()) {
    h5::Table t;
    t.add("name", Kind::kString);
    t.add("stage", Kind::kString);
    t.add("pass", Kind::kInt64);
    t.add("duration_ns", Kind::kFloat64);
    const char* ints[] = {"grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
                          "registers_per_thread", "static_shared_bytes", "dynamic_shared_bytes"};
    for (const char* n : ints) t.add(n, Kind::kInt64);
    for (const auto& k : r.kernels) {
      t.columns[0].strings.push_back(k.name);
      t.columns[1].strings.push_back(k.stage);
      t.columns[2].ints.push_back(k.pass);
      t.columns[3].floats.push_back(k.duration_ns);
      const std::int64_t v[] = {k.grid_x,  k.grid_y,  k.grid_z, k.block_x, k.block_y, k.block_z,
                                k.registers_per_thread, k.static_shared_bytes, k.dynamic_shared_bytes};
      for (std::size_t i = 0; i < 9; ++i) t.columns[4 + i].ints.push_back(v[i]);
    }
    f.write_table(g + "/kernels", t);
  }
}

}  // namespace ip::exp
