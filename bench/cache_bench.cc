// Benchmark of the cache simulator (cache_sim/) on a trace already in memory, one thread.
//
// The trace: approximately Zipf(alpha) object ranks (continuous inversion of the power law, then
// rounded), scrambled into 64-bit ids, 512-byte objects, relevance scores in [0, 1). Reported:
// accesses per second per core for single-level LRU and Clock at 10^5 and 10^6 entries (and the other
// policies at 10^5 for reference), the default three-level hierarchy (L1 16KiB lru, L2 256KiB clock,
// L3 8MiB semantic), the exact LRU miss-ratio curve and SHARDS; bytes of simulator metadata per
// resident entry; peak resident memory. Each figure is from --reps runs (each on a fresh hierarchy):
// the best (the run least disturbed by other work on a shared machine) and the median.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <boost/program_options.hpp>
#include <fmt/format.h>

#include "cache_sim/detail/hash.h"
#include "cache_sim/hierarchy.h"
#include "bench/bench_util.h"
#include "cache_sim/mrc.h"

namespace po = boost::program_options;
using namespace ip::cache;

namespace {

using ip::bench::Timing;
using ip::bench::time_runs;

std::vector<Access> zipf_trace(std::size_t n, std::uint64_t ids, double alpha, std::uint32_t size, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  std::vector<Access> t(n);
  const double a1 = 1.0 - alpha, top = std::pow(static_cast<double>(ids) + 1.0, a1);
  for (auto& a : t) {
    // Inverse CDF of the density x^-alpha on [1, ids + 1).
    const double x = std::pow(1.0 + (top - 1.0) * u01(rng), 1.0 / a1);
    const auto rank = std::min<std::uint64_t>(static_cast<std::uint64_t>(x) - 1, ids - 1);
    a.id = detail::mix64(rank + 1);
    a.size = size;
    a.score = static_cast<float>(u01(rng));
  }
  return t;
}

double peak_rss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

struct Row {
  Timing time;
  double hit_rate = 0, meta_per_entry = 0;
};

Row run_levels(const std::vector<std::string>& levels, const Trace& trace, const std::vector<std::int64_t>* next,
               int reps) {
  Row row;
  std::vector<LevelSpec> specs;
  for (const auto& l : levels) specs.push_back(parse_level_spec(l));
  row.time = time_runs(reps, [&] {
    Hierarchy h(specs);
    h.run(trace, next);
    row.hit_rate = static_cast<double>(h.hits()) / static_cast<double>(h.accesses());
    std::size_t meta = 0, entries = 0;
    for (std::size_t i = 0; i < h.levels(); ++i) meta += h.level(i).metadata_bytes(), entries += h.level(i).entries();
    row.meta_per_entry = static_cast<double>(meta) / static_cast<double>(std::max<std::size_t>(entries, 1));
  });
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t accesses = 10'000'000;
  std::uint64_t ids = 10'000'000;
  double alpha = 0.9;
  int reps = 5;
  bool all_policies = true;
  po::options_description opts("cache_bench [options]");
  // clang-format off
  opts.add_options()
    ("help,h", "describe the options")
    ("accesses", po::value(&accesses)->default_value(accesses), "trace length")
    ("ids", po::value(&ids)->default_value(ids), "distinct objects the trace draws from")
    ("alpha", po::value(&alpha)->default_value(alpha), "Zipf exponent (not 1)")
    ("reps", po::value(&reps)->default_value(reps), "repetitions per measurement (median is reported)")
    ("all-policies", po::value(&all_policies)->default_value(all_policies), "also time fifo, lfu, sieve, semantic, opt");
  // clang-format on
  po::variables_map vm;
  po::store(po::parse_command_line(argc, argv, opts), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::cout << opts;
    return 0;
  }
  if (alpha == 1.0) alpha = 0.999999;

  Trace trace;
  trace.accesses = zipf_trace(accesses, ids, alpha, 512, 1);
  const auto next = next_uses(trace.accesses);
  const double n = static_cast<double>(accesses);
  fmt::print("cache_bench: {} accesses, Zipf({}) over {} ids, 512-byte objects; one thread; {} runs each\n",
             accesses, alpha, ids, reps);
  fmt::print("{:<44} {:>9} {:>24} {:>18}\n", "configuration", "hit rate", "M accesses/s best (med)", "metadata B/entry");
  const auto rate = [&](const Timing& t) { return fmt::format("{:.2f} ({:.2f})", n / t.best / 1e6, n / t.median / 1e6); };
  const auto print = [&](const std::string& name, const Row& r) {
    fmt::print("{:<44} {:>9.4f} {:>24} {:>18.1f}\n", name, r.hit_rate, rate(r.time), r.meta_per_entry);
    std::fflush(stdout);
  };
  for (const char* cap : {"100000", "1000000"})
    for (const char* p : {"lru", "clock"}) print(fmt::format("{}:{}", p, cap), run_levels({fmt::format("{}:{}", p, cap)}, trace, &next, reps));
  if (all_policies)
    for (const char* p : {"fifo", "sieve", "lfu", "semantic", "opt"}) {
      const std::string spec = fmt::format("{}:100000", p);
      print(spec, run_levels({spec}, trace, &next, reps));
    }
  print("lru:16KiB clock:256KiB semantic:8MiB (nine)",
        run_levels({"lru:16KiB", "clock:256KiB", "semantic:8MiB"}, trace, &next, reps));

  LruCurve curve;
  const Timing t_mrc = time_runs(reps, [&] { curve = exact_lru_curve(trace.accesses); });
  fmt::print("{:<44} {:>9} {:>24}   ({} distinct ids; LRU miss ratio at 10^5 entries {:.4f})\n",
             "exact LRU curve (Mattson, every capacity)", "-", rate(t_mrc), curve.cold, curve.miss_ratio(100000));
  ShardsCurve sh;
  const Timing t_sh = time_runs(reps, [&] { sh = shards_lru_curve(trace.accesses, 0.01); });
  const CurveError e = compare(curve, sh);
  fmt::print("{:<44} {:>9} {:>24}   (mean |error| {:.4f}, max {:.4f} at {} entries)\n", "SHARDS LRU curve, R = 0.01",
             "-", rate(t_sh), e.mean_abs, e.max_abs, e.max_at);
  fmt::print("peak resident memory: {:.0f} MiB (trace in memory: {:.0f} MiB + next uses {:.0f} MiB)\n", peak_rss_mib(),
             n * sizeof(Access) / 1048576.0, n * sizeof(std::int64_t) / 1048576.0);
  return 0;
}
