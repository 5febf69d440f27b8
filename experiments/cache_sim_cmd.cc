#include "experiments/cache_sim_cmd.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>
#include <fmt/format.h>

#include "core/error.h"
#include "core/json_text.h"
#include "cache_sim/capacity.h"
#include "cache_sim/hierarchy.h"
#include "cache_sim/mrc.h"
#include "cache_sim/registry.h"
#include "cache_sim/trace.h"

namespace po = boost::program_options;

namespace ip::exp {

namespace {

using namespace ip::cache;

constexpr int kSchemaVersion = 1;
const std::vector<std::string> kDefaultLevels = {"lru:16KiB", "clock:256KiB", "semantic:8MiB"};

// A semantic level ranks by the accesses' scores; a trace without them (oracleGeneral has no score field; a
// txt or csv trace may leave it out) gives every access score 1. Said on stderr, even with --quiet and --json:
// the numbers then are not those of the run that wrote the trace with its scores.
void note_scoreless(const std::vector<LevelSpec>& levels, const std::string& trace, const char* why) {
  std::string semantic;
  for (const auto& l : levels)
    if (l.policy.rfind("semantic", 0) == 0) semantic += (semantic.empty() ? "" : ", ") + l.policy;
  if (semantic.empty()) return;
  std::fprintf(stderr,
               "cache-sim: note: %s: %s, so the semantic level(s) (%s) see score 1 for every access; a run's trace "
               "keeps its scores as .csv or .txt (output.cache_trace)\n",
               trace.c_str(), why, semantic.c_str());
}

std::string json_stats(const LevelStats& s) {
  return fmt::format(
      "\"accesses\": {}, \"hits\": {}, \"misses\": {}, \"evictions\": {}, \"invalidations\": {}, \"bypasses\": {}, "
      "\"bytes_from_below\": {}, \"hit_rate\": {}",
      s.accesses, s.hits, s.misses, s.evictions, s.invalidations, s.bypasses, s.bytes_from_below, s.hit_rate());
}

std::string json_groups(const char* key, const std::vector<GroupStats>& groups) {
  std::string out;
  for (const auto& g : groups) {
    std::string levels;
    for (const auto& l : g.levels) levels += fmt::format("{}{{{}}}", levels.empty() ? "" : ", ", json_stats(l));
    out += fmt::format("{}{{\"{}\": {}, \"levels\": [{}]}}", out.empty() ? "" : ",\n    ", key, g.key, levels);
  }
  return out;
}

// The exact curve as (capacity, misses) at every capacity where it changes, then the last capacity.
std::vector<std::pair<std::uint64_t, std::uint64_t>> curve_points(const LruCurve& c) {
  const auto m = c.misses_by_capacity();
  std::vector<std::pair<std::uint64_t, std::uint64_t>> pts;
  for (std::uint64_t cap = 1; cap < m.size(); ++cap)
    if (cap == 1 || m[cap] != m[cap - 1] || cap + 1 == m.size()) pts.emplace_back(cap, m[cap]);
  return pts;
}

// Capacities where the SHARDS estimate changes: ceil(k / rate).
std::vector<std::uint64_t> shards_capacities(const ShardsCurve& s, std::uint64_t distinct) {
  std::vector<std::uint64_t> caps{1};
  for (std::size_t k = 1; k < s.hist.size(); ++k) {
    const auto c = static_cast<std::uint64_t>(std::ceil(static_cast<double>(k) / s.rate));
    if (c > caps.back() && c <= std::max<std::uint64_t>(distinct, 1)) caps.push_back(c);
  }
  return caps;
}

struct Options {
  std::string trace;
  TraceFormat format;
  std::vector<std::string> level_texts;
  std::vector<LevelSpec> levels;
  Mode mode = Mode::nine;
  bool json = false, mrc = false;
  double shards = 0;
  bool quiet = false, progress = false;  // --quiet, --progress
  bool stream = false;                   // --stream
};

// Progress lines on stderr: on a terminal, or for traces of at least kTalkAbove accesses (batch jobs'
// logs), unless --quiet; --progress forces them. On a terminal the running line is rewritten in place.
constexpr std::size_t kTalkAbove = std::size_t{1} << 24;

class Talk {
 public:
  Talk(bool on, bool tty) : on_(on), tty_(tty), t0_(std::chrono::steady_clock::now()) {}
  bool on() const { return on_; }
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }
  void restart() { t0_ = std::chrono::steady_clock::now(); }
  void line(const std::string& text) const {
    if (on_) fmt::print(stderr, "{}cache-sim: {}\n", tty_ ? "\r\033[K" : "", text);
  }
  void running(const std::string& text) const {
    if (!on_) return;
    if (tty_) fmt::print(stderr, "\r\033[Kcache-sim: {}", text);
    else fmt::print(stderr, "cache-sim: {}\n", text);
    std::fflush(stderr);
  }

 private:
  bool on_, tty_;
  std::chrono::steady_clock::time_point t0_;
};

// What a replay produced, whichever way the trace was read.
struct Outcome {
  bool has_request = false, has_step = false;
  LruCurve curve;              // with --mrc
  ShardsCurve shards;          // with --shards
  CurveError err;              // SHARDS against the exact curve (--shards with --mrc)
  std::size_t replicas = 0;    // --stream --shards without --mrc: independent samples behind `spread`
  SpreadEstimate spread_est;
};

std::string shards_points_json(const ShardsCurve& s, std::uint64_t distinct) {
  std::string sp;
  for (const auto c : shards_capacities(s, distinct))
    sp += fmt::format("{}[{}, {}]", sp.empty() ? "" : ", ", c, s.miss_ratio(c));
  return sp;
}

int report(const Options& o, const Hierarchy& h, const Outcome& r) {
  const double overall = static_cast<double>(h.hits()) / static_cast<double>(h.accesses());
  const auto estimated_distinct = [&] {
    return static_cast<std::uint64_t>(std::llround(static_cast<double>(r.shards.cold) / r.shards.rate));
  };
  if (o.json) {
    std::string levels;
    for (std::size_t i = 0; i < h.levels(); ++i) {
      const Capacity& cap = h.level(i).capacity();
      levels += fmt::format("{}    {{\"policy\": {}, \"capacity\": {}, \"capacity_unit\": \"{}\", {}}}",
                            i ? ",\n" : "", json_string(h.level(i).policy_name()), cap.value,
                            cap.bytes ? "bytes" : "entries", json_stats(h.stats(i)));
    }
    std::string out = fmt::format(
        "{{\n  \"schema_version\": {},\n  \"trace\": {},\n  \"format\": \"{}\",\n  \"mode\": \"{}\",\n"
        "  \"streamed\": {},\n  \"accesses\": {},\n  \"hits\": {},\n  \"hit_rate\": {},\n  \"levels\": [\n{}\n  ]",
        kSchemaVersion, json_string(o.trace), trace_format_name(o.format), mode_name(o.mode), o.stream ? "true" : "false",
        h.accesses(), h.hits(), overall, levels);
    if (r.has_request) out += fmt::format(",\n  \"requests\": [\n    {}\n  ]", json_groups("request", h.per_request()));
    if (r.has_step) out += fmt::format(",\n  \"steps\": [\n    {}\n  ]", json_groups("step", h.per_step()));
    if (o.mrc) {
      std::string pts;
      for (const auto& [c, m] : curve_points(r.curve)) pts += fmt::format("{}[{}, {}]", pts.empty() ? "" : ", ", c, m);
      out += fmt::format(",\n  \"mrc\": {{\"policy\": \"lru\", \"unit\": \"entries\", \"accesses\": {}, \"distinct\": {}, "
                         "\"columns\": [\"capacity_entries\", \"misses\"], \"points\": [{}]",
                         r.curve.accesses, r.curve.cold, pts);
      if (o.shards > 0)
        out += fmt::format(",\n    \"shards\": {{\"rate\": {}, \"sampled\": {}, \"mean_abs_error\": {}, "
                           "\"max_abs_error\": {}, \"max_error_at\": {}, \"columns\": [\"capacity_entries\", "
                           "\"miss_ratio\"], \"points\": [{}]}}",
                           r.shards.rate, r.shards.sampled, r.err.mean_abs, r.err.max_abs, r.err.max_at,
                           shards_points_json(r.shards, r.curve.cold));
      out += "}";
    } else if (o.shards > 0) {
      // SHARDS alone (streamed trace): its error estimated from independent samples.
      out += fmt::format(",\n  \"shards\": {{\"policy\": \"lru\", \"unit\": \"entries\", \"rate\": {}, \"accesses\": {}, "
                         "\"sampled\": {}, \"estimated_distinct\": {}, \"estimated_error\": {{\"replicas\": {}, "
                         "\"mean_sd\": {}, \"max_sd\": {}, \"max_sd_at\": {}}}, \"columns\": [\"capacity_entries\", "
                         "\"miss_ratio\"], \"points\": [{}]}}",
                         r.shards.rate, r.shards.accesses, r.shards.sampled, estimated_distinct(), r.replicas,
                         r.spread_est.mean_sd, r.spread_est.max_sd, r.spread_est.max_at,
                         shards_points_json(r.shards, estimated_distinct()));
    }
    std::cout << out << "\n}\n";
    std::cout.flush();
    return 0;
  }

  std::cout << fmt::format("trace {} ({}{}): {} accesses; mode {}\n", o.trace, trace_format_name(o.format),
                           o.stream ? ", streamed" : "", h.accesses(), mode_name(o.mode));
  std::cout << fmt::format("{:<5} {:<22} {:>14} {:>12} {:>12} {:>12} {:>8} {:>12} {:>12} {:>9} {:>16}\n", "level",
                           "policy", "capacity", "accesses", "hits", "misses", "hit_rate", "evictions",
                           "invalidated", "bypasses", "bytes_from_below");
  for (std::size_t i = 0; i < h.levels(); ++i) {
    const auto& s = h.stats(i);
    std::cout << fmt::format("L{:<4} {:<22} {:>14} {:>12} {:>12} {:>12} {:>8.4f} {:>12} {:>12} {:>9} {:>16}\n", i + 1,
                             h.level(i).policy_name(), h.level(i).capacity().text(), s.accesses, s.hits, s.misses,
                             s.hit_rate(), s.evictions, s.invalidations, s.bypasses, s.bytes_from_below);
  }
  std::cout << fmt::format("overall: {} hits of {} accesses ({:.4f})\n", h.hits(), h.accesses(), overall);
  if (r.has_request || r.has_step)
    std::cout << "per-request and per-step statistics: see --json\n";
  if (o.mrc) {
    std::cout << fmt::format("# exact LRU miss-ratio curve: {} accesses, {} distinct ids; misses at capacity C "
                             "(entries), unchanged until the next C\n# capacity misses miss_ratio\n",
                             r.curve.accesses, r.curve.cold);
    for (const auto& [c, m] : curve_points(r.curve))
      std::cout << fmt::format("{} {} {:.6f}\n", c, m, static_cast<double>(m) / static_cast<double>(r.curve.accesses));
    if (o.shards > 0)
      std::cout << fmt::format("# SHARDS rate {:.6g} ({} of {} accesses sampled): mean |error| {:.6f}, max |error| {:.6f} "
                               "at capacity {}\n",
                               r.shards.rate, r.shards.sampled, r.shards.accesses, r.err.mean_abs, r.err.max_abs,
                               r.err.max_at);
  } else if (o.shards > 0) {
    std::cout << fmt::format("# SHARDS LRU miss-ratio curve, rate {:.6g}: {} of {} accesses sampled, about {} distinct "
                             "ids; miss ratio from capacity C (entries) until the next C\n# capacity miss_ratio\n",
                             r.shards.rate, r.shards.sampled, r.shards.accesses, estimated_distinct());
    for (const auto c : shards_capacities(r.shards, estimated_distinct()))
      std::cout << fmt::format("{} {:.6f}\n", c, r.shards.miss_ratio(c));
    std::cout << fmt::format("# estimated sampling error (standard deviation of the miss ratio over {} independent "
                             "samples at this rate): mean {:.6f}, max {:.6f} at capacity {}\n",
                             r.replicas, r.spread_est.mean_sd, r.spread_est.max_sd, r.spread_est.max_at);
  }
  std::cout.flush();
  return 0;
}

int run(const Options& o) {
  // Everything that can fail on bad input has happened before this point.
  const bool tty = isatty(fileno(stderr)) != 0;
  const auto t_read = std::chrono::steady_clock::now();
  const Trace trace = read_trace(o.trace, o.format);
  IP_REQUIRE(!trace.accesses.empty(), "trace '{}' holds no accesses", o.trace);
  const std::size_t n = trace.accesses.size();
  if (o.format == TraceFormat::oracle)
    note_scoreless(o.levels, o.trace, "an oracleGeneral trace has no scores");
  else if (std::all_of(trace.accesses.begin(), trace.accesses.end(), [](const Access& a) { return a.score == 1.0f; }))
    note_scoreless(o.levels, o.trace, "every access of this trace has score 1 (none given)");
  Talk talk(!o.quiet && (o.progress || tty || n >= kTalkAbove), tty);
  talk.line(fmt::format("read {} accesses from {} in {:.1f} s", n, o.trace,
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - t_read).count()));
  HierarchyOptions ho;
  ho.mode = o.mode;
  ho.per_request = trace.has_request;
  ho.per_step = trace.has_step;
  talk.restart();
  if (talk.on())
    ho.progress = [&](std::uint64_t done, std::uint64_t all) {
      if (done < all)
        talk.running(fmt::format("simulated {} of {} accesses ({:.0f}%), {:.1f} s", done, all,
                                 100.0 * static_cast<double>(done) / static_cast<double>(all), talk.seconds()));
    };
  Hierarchy h(o.levels, ho);
  h.run(trace);
  const double sim_s = talk.seconds();
  talk.line(fmt::format("simulated {} accesses through {} level{} in {:.1f} s ({:.1f} M accesses/s)", n, h.levels(),
                        h.levels() == 1 ? "" : "s", sim_s, static_cast<double>(n) / std::max(sim_s, 1e-9) / 1e6));

  Outcome r;
  r.has_request = trace.has_request;
  r.has_step = trace.has_step;
  if (o.mrc) {
    talk.restart();
    r.curve = exact_lru_curve(trace.accesses);
    talk.line(fmt::format("exact LRU curve in {:.1f} s", talk.seconds()));
  }
  if (o.shards > 0) {
    talk.restart();
    r.shards = shards_lru_curve(trace.accesses, o.shards);
    r.err = compare(r.curve, r.shards);
    talk.line(fmt::format("SHARDS curve (rate {}) in {:.1f} s", o.shards, talk.seconds()));
  }
  return report(o, h, r);
}

// --stream: the trace is read in chunks and never kept: the levels see it access by access, the
// curves are built as it passes. A csv trace may name requests and steps (its header is read before
// any access), so for csv the hierarchy keeps per-request and per-step rows from the start; they are
// reported when the header named those columns. Without --mrc, SHARDS runs kStreamReplicas independent
// samples (salts 0 .. kStreamReplicas - 1; salt 0 is the curve reported, the sample the in-memory
// mode takes) and reports their spread as its estimated error.
constexpr std::size_t kStreamReplicas = 4;

int run_stream(const Options& o) {
  const bool tty = isatty(fileno(stderr)) != 0;
  Talk talk(!o.quiet, tty);
  if (o.format == TraceFormat::oracle) note_scoreless(o.levels, o.trace, "an oracleGeneral trace has no scores");
  HierarchyOptions ho;
  ho.mode = o.mode;
  ho.per_request = ho.per_step = o.format == TraceFormat::csv;
  Hierarchy h(o.levels, ho);
  std::optional<LruCurveBuilder> exact;
  if (o.mrc) exact.emplace();
  std::vector<ShardsBuilder> samples;
  if (o.shards > 0)
    for (std::size_t k = 0; k < (o.mrc ? 1 : kStreamReplicas); ++k) samples.emplace_back(o.shards, k);
  std::uint64_t n = 0, next_talk = std::uint64_t{1} << 24;
  const Trace header = stream_trace(o.trace, o.format, [&](const Access* a, std::size_t m) {
    for (std::size_t i = 0; i < m; ++i) h.access(a[i]);
    if (exact) exact->add(a, m);
    for (auto& s : samples) s.add(a, m);
    n += m;
    if (n >= next_talk || tty) {
      talk.running(fmt::format("streamed {} accesses, {:.1f} s ({:.1f} M accesses/s)", n, talk.seconds(),
                               static_cast<double>(n) / std::max(talk.seconds(), 1e-9) / 1e6));
      while (next_talk <= n) next_talk *= 2;
    }
  });
  IP_REQUIRE(n > 0, "trace '{}' holds no accesses", o.trace);
  // As in memory: a summary line on a terminal, with --progress, or for a trace of kTalkAbove accesses or more.
  if (o.progress || tty || n >= kTalkAbove)
    talk.line(fmt::format("streamed {} accesses from {} through {} level{} in {:.1f} s", n, o.trace, h.levels(),
                          h.levels() == 1 ? "" : "s", talk.seconds()));
  Outcome r;
  r.has_request = header.has_request;
  r.has_step = header.has_step;
  if (exact) r.curve = exact->finish();
  if (!samples.empty()) {
    std::vector<ShardsCurve> curves;
    for (auto& s : samples) curves.push_back(s.finish());
    r.shards = curves[0];
    if (o.mrc) r.err = compare(r.curve, r.shards);
    else r.replicas = curves.size(), r.spread_est = spread(curves);
  }
  return report(o, h, r);
}

}  // namespace

int cmd_cache_sim(const std::vector<std::string>& args) {
  po::options_description opts("indexpool cache-sim --trace FILE [options]");
  // clang-format off
  opts.add_options()
    ("help,h", "describe this command")
    ("trace", po::value<std::string>(), "the trace file (txt: 'id [size [score]]' a line, a missing size is 1 "
     "byte, a missing score 1)")
    ("format", po::value<std::string>(), "txt | csv | oracle (default: from the file name: .csv, .bin/.oracleGeneral, else txt)")
    ("level", po::value<std::vector<std::string>>()->composing(),
     "POLICY:CAPACITY, repeated from the top level down; capacity in entries (1000) or bytes (16KiB, 8MiB); "
     "default: lru:16KiB clock:256KiB semantic:8MiB")
    ("mode", po::value<std::string>()->default_value("nine"), "nine | inclusive | exclusive")
    ("json", "print one JSON object on stdout")
    ("mrc", "also compute the exact LRU miss-ratio curve (entries)")
    ("shards", po::value<double>(), "also estimate the curve by SHARDS at this sampling rate (0, 1] and report "
                                    "its error against the exact curve (implies --mrc, except with --stream)")
    ("stream", "read the trace in chunks and never keep it whole (traces larger than memory): the same counts, "
               "per request and step too (csv), but no policy that needs the future (opt); --shards alone then "
               "estimates its error "
               "from 4 independent samples, --mrc streams the exact curve (memory grows with distinct ids)")
    ("progress", "progress lines on stderr even for a short trace and off a terminal (default: on a terminal, "
                 "or for traces of 2^24 accesses or more)")
    ("quiet,q", "no progress lines");
  // clang-format on
  try {
    po::variables_map vm;
    po::store(po::command_line_parser(args).options(opts).run(), vm);
    po::notify(vm);
    if (vm.count("help")) {
      std::cout << "Replays a trace of object accesses through a cache hierarchy and prints, per level, accesses,\n"
                   "hits, misses, evictions and bytes read from the level below.\n\n"
                << opts << "\npolicies:\n";
      for (const auto& p : policy_table()) std::cout << fmt::format("  {:<13} {}\n", p.name, p.summary);
      std::cout << "\nexample:\n  indexpool cache-sim --trace t.bin --level lru:128MiB --level clock:1GiB --json\n";
      return 0;
    }
    Options o;
    IP_REQUIRE(vm.count("trace"), "--trace FILE is required");
    o.trace = vm["trace"].as<std::string>();
    o.format = vm.count("format") ? parse_trace_format(vm["format"].as<std::string>()) : guess_trace_format(o.trace);
    o.level_texts = vm.count("level") ? vm["level"].as<std::vector<std::string>>() : kDefaultLevels;
    for (const auto& t : o.level_texts) {
      try {
        o.levels.push_back(parse_level_spec(t));
      } catch (const Error& e) {
        throw Error(fmt::format("--{}", e.what()));
      }
    }
    o.mode = parse_mode(vm["mode"].as<std::string>());
    o.json = vm.count("json") > 0;
    o.stream = vm.count("stream") > 0;
    o.mrc = vm.count("mrc") > 0 || (vm.count("shards") > 0 && !o.stream);
    o.quiet = vm.count("quiet") > 0;
    o.progress = vm.count("progress") > 0;
    IP_REQUIRE(!(o.quiet && o.progress), "--quiet and --progress exclude each other");
    if (vm.count("shards")) {
      o.shards = vm["shards"].as<double>();
      IP_REQUIRE(o.shards > 0 && o.shards <= 1 && o.shards * (1 << 24) >= 0.5, "--shards {}: the rate must be in (0, 1]",
                 o.shards);
    }
    if (o.stream) {
      cache::require_trace_file(o.trace);
      for (std::size_t i = 0; i < o.levels.size(); ++i)
        IP_REQUIRE(!make_level(o.levels[i])->needs_future(),
                   "--level '{}': {} needs the whole trace (next uses) and cannot run with --stream", o.level_texts[i],
                   o.levels[i].policy);
      return run_stream(o);
    }
    return run(o);
  } catch (const po::error& e) {
    std::cerr << "indexpool cache-sim: error: " << e.what() << " (try 'indexpool cache-sim --help')\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "indexpool cache-sim: error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace ip::exp
