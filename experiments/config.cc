#include "experiments/config.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

#include "core/error.h"

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

std::vector<float> parse_floats(const std::string& v) {
  std::vector<float> out;
  std::istringstream in(v);
  std::string tok;
  while (in >> tok) out.push_back(static_cast<float>(parse_double(tok)));
  return out;
}

std::vector<KeyInfo> make_keys() {
  using P = Point;
  std::vector<KeyInfo> k = {
      {"backend", "cpu", "cpu, cuda or auto (cuda needs a CUDA build and a device)",
       [](P& p, const std::string& v) { p.backend = one_of(v, {"cpu", "cuda", "auto"}); }},
      {"threads", "0", "CPU backend threads (0 = all hardware threads)",
       [](P& p, const std::string& v) {
         p.threads = parse_i32(v);
         IP_REQUIRE(p.threads >= 0, "threads must be >= 0");
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
      {"workload.needles", "4", "planted needle tokens", [](P& p, const std::string& v) { p.workload.needles = parse_i32(v); }},
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
      {"output.path", "", "results CSV file (empty: print the table only)",
       [](P& p, const std::string& v) { p.output_path = v; }},
  };
  return k;
}

const KeyInfo* find_key(const std::string& name) {
  for (const auto& k : config_keys())
    if (k.name == name) return &k;
  return nullptr;
}

std::string where(const Setting& s) {
  return s.line > 0 ? fmt::format("{}:{}", s.file, s.line) : std::string("command line");
}

}  // namespace

const std::vector<KeyInfo>& config_keys() {
  static const std::vector<KeyInfo> keys = make_keys();
  return keys;
}

std::string describe_keys() {
  std::string out = "Config keys (INI: top-level keys before any section, then [section] key = value).\n"
                    "A comma-separated value is a sweep axis; the points are the grid of all axes.\n\n";
  for (const auto& k : config_keys())
    out += fmt::format("  {:<26} = {:<12} {}\n", k.name, k.default_value.empty() ? "\"\"" : k.default_value, k.help);
  return out;
}

Sweep load_sweep(const std::string& path, const std::vector<std::string>& overrides) {
  Sweep sw;
  sw.config_path = path;
  std::ifstream in(path);
  IP_REQUIRE(in.good(), "cannot read config file '{}'", path);
  std::stringstream buf;
  buf << in.rdbuf();
  sw.config_text = buf.str();

  std::map<std::string, std::size_t> seen;  // key -> index in settings
  auto add = [&](Setting s) {
    const KeyInfo* k = find_key(s.key);
    IP_REQUIRE(k != nullptr, "{}: unknown key '{}' (see 'indexpool run --help-config')", where(s), s.key);
    if (s.values.empty()) s.values = {""};
    IP_REQUIRE(s.values.size() == 1 || std::none_of(s.values.begin(), s.values.end(), [](auto& v) { return v.empty(); }),
               "{}: key '{}' has an empty item in its list", where(s), s.key);
    // Every value is checked now, before any point runs.
    for (const auto& v : s.values) {
      Point scratch;
      try {
        k->apply(scratch, v);
      } catch (const Error& e) {
        throw Error(fmt::format("{}: key '{}': {}", where(s), s.key, e.what()));
      }
    }
    if (auto it = seen.find(s.key); it != seen.end()) {
      IP_REQUIRE(s.line == 0, "{}: key '{}' is set twice (first at line {})", where(s), s.key,
                 sw.settings[it->second].line);
      sw.settings[it->second] = std::move(s);  // a command-line override replaces the file's value
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
    std::string line = raw;
    if (const auto c = line.find_first_of("#;"); c != std::string::npos) line = line.substr(0, c);
    line = trim(line);
    if (line.empty()) continue;
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
  for (const auto& o : overrides) {
    const auto eq = o.find('=');
    IP_REQUIRE(eq != std::string::npos, "command line: --set expects key=value, got '{}'", o);
    add(Setting{trim(o.substr(0, eq)), split_list(trim(o.substr(eq + 1))), "", 0});
  }

  // Grid expansion: the last axis varies fastest.
  Point base;
  for (const auto& k : config_keys()) k.apply(base, k.default_value);
  std::vector<const Setting*> axes;
  for (const auto& s : sw.settings) {
    if (s.values.size() == 1) find_key(s.key)->apply(base, s.values[0]);
    else axes.push_back(&s);
  }
  std::size_t total = 1;
  for (const auto* a : axes) total *= a->values.size();
  for (std::size_t i = 0; i < total; ++i) {
    Point p = base;
    std::size_t rem = i;
    std::vector<std::size_t> pick(axes.size());
    for (std::size_t a = axes.size(); a-- > 0;) {
      pick[a] = rem % axes[a]->values.size();
      rem /= axes[a]->values.size();
    }
    for (std::size_t a = 0; a < axes.size(); ++a) {
      find_key(axes[a]->key)->apply(p, axes[a]->values[pick[a]]);
      p.axes.emplace_back(axes[a]->key, axes[a]->values[pick[a]]);
    }
    sw.points.push_back(std::move(p));
  }
  // Whole-point checks that involve several keys.
  for (const auto& p : sw.points) {
    try {
      validate_spec(p.workload);
    } catch (const Error& e) {
      throw Error(fmt::format("{}: {}", path, e.what()));
    }
  }
  return sw;
}

}  // namespace ip::exp
