// Config reader: grid expansion, overrides, defaults, and bad input naming the file, line and key.
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include <cstdlib>
#include <unistd.h>

#include <gtest/gtest.h>

#include "core/error.h"
#include "experiments/config.h"

namespace {

using ip::exp::load_sweep;

class ConfigTest : public ::testing::Test {
 protected:
  // Every file a test writes goes into one folder of this process, removed after the test.
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir(), ec);
  }
  static std::filesystem::path dir() {
    return std::filesystem::temp_directory_path() / ("ip_config_test_" + std::to_string(::getpid()));
  }
  std::string write(const std::string& text) {
    std::filesystem::create_directories(dir());
    const auto path = dir() / (std::to_string(n_++) + ".ini");
    std::ofstream(path) << text;
    return path.string();
  }
  std::string error_of(const std::string& path, std::vector<std::string> sets = {}) {
    try {
      load_sweep(path, sets);
    } catch (const ip::Error& e) {
      return e.what();
    }
    return "(no error)";
  }
  int n_ = 0;
};

TEST_F(ConfigTest, GridIsTheProductOfAxesLastAxisFastest) {
  const auto path = write("[pool]\nweighting = uniform, cosine, tfidf\ngroup_size = 2, 4\n");
  const auto sw = load_sweep(path);
  ASSERT_EQ(sw.points.size(), 6u);  // 3 x 2
  EXPECT_EQ(sw.points[0].pipeline.pool.weights.scheme, ip::Weighting::uniform);
  EXPECT_EQ(sw.points[0].pipeline.pool.group_size, 2);
  EXPECT_EQ(sw.points[1].pipeline.pool.group_size, 4);
  EXPECT_EQ(sw.points[2].pipeline.pool.weights.scheme, ip::Weighting::cosine);
  EXPECT_EQ(sw.points[5].pipeline.pool.weights.scheme, ip::Weighting::tfidf);
  EXPECT_EQ(sw.points[5].pipeline.pool.group_size, 4);
  ASSERT_EQ(sw.points[3].axes.size(), 2u);
  EXPECT_EQ(sw.points[3].axes[0].second, "cosine");
  EXPECT_EQ(sw.points[3].axes[1].second, "4");
}

TEST_F(ConfigTest, UnitsAndTopLevelKeys) {
  const auto sw = load_sweep(write("backend = cpu\nthreads = 2\n[workload]\ntokens = 64Ki\n[select]\ntopk_tokens = 1Ki\n"));
  ASSERT_EQ(sw.points.size(), 1u);
  EXPECT_EQ(sw.points[0].workload.tokens, 65536);
  EXPECT_EQ(sw.points[0].pipeline.topk_tokens, 1024);
  EXPECT_EQ(sw.points[0].threads, 2);
}

TEST_F(ConfigTest, CommandLineOverridesReplaceOrAddAxes) {
  const auto path = write("[pool]\nweighting = uniform, cosine\n");
  const auto sw = load_sweep(path, {"pool.weighting=tfidf", "pool.group_size=1,2,8"});
  ASSERT_EQ(sw.points.size(), 3u);
  for (const auto& p : sw.points) EXPECT_EQ(p.pipeline.pool.weights.scheme, ip::Weighting::tfidf);
  EXPECT_EQ(sw.points[2].pipeline.pool.group_size, 8);
}

// Every key of the table: the field(s) it sets, compared between two Points, and a value other than
// the default (a valid one) that must change them, so that a comparison reading the wrong field shows.
struct KeyField {
  const char* name;
  const char* other_value;
  std::function<bool(const ip::exp::Point&, const ip::exp::Point&)> same;
};

#define IP_FIELD(key, other, expr) \
  KeyField { key, other, [](const ip::exp::Point& a, const ip::exp::Point& b) { return a.expr == b.expr; } }

const std::vector<KeyField>& key_fields() {
  static const std::vector<KeyField> f = {
      IP_FIELD("backend", "cuda", backend),
      IP_FIELD("threads", "3", threads),
      IP_FIELD("threads_per_request", "2", threads_per_request),
      IP_FIELD("workload.source", "x.h5", source),
      IP_FIELD("workload.tokens", "1024", workload.tokens),
      IP_FIELD("workload.dim", "64", workload.dim),
      IP_FIELD("workload.index_heads", "2", workload.index_heads),
      IP_FIELD("workload.attn_dim", "0", workload.attn_dim),
      IP_FIELD("workload.attn_heads", "2", workload.attn_heads),
      IP_FIELD("workload.value_dim", "64", workload.value_dim),
      IP_FIELD("workload.steps", "3", workload.steps),
      IP_FIELD("workload.requests", "2", workload.requests),
      IP_FIELD("workload.length_spread", "0.5", workload.length_spread),
      IP_FIELD("workload.topics", "3", workload.topics),
      IP_FIELD("workload.topic_run", "7", workload.topic_run),
      IP_FIELD("workload.topic_weight", "0.5", workload.topic_weight),
      IP_FIELD("workload.sharpness", "2", workload.sharpness),
      IP_FIELD("workload.head_noise", "0.1", workload.head_noise),
      IP_FIELD("workload.query_drift", "0.3", workload.query_drift),
      IP_FIELD("workload.jump_prob", "0.2", workload.jump_prob),
      IP_FIELD("workload.needles", "1", workload.needles),
      IP_FIELD("workload.needle_strength", "2", workload.needle_strength),
      IP_FIELD("workload.needle_query_prob", "0.2", workload.needle_query_prob),
      IP_FIELD("workload.sinks", "1", workload.sinks),
      IP_FIELD("workload.sink_strength", "2", workload.sink_strength),
      IP_FIELD("workload.image_fraction", "0.5", workload.image_fraction),
      IP_FIELD("workload.image_side", "8", workload.image_side),
      IP_FIELD("workload.attn_noise", "0.1", workload.attn_noise),
      IP_FIELD("workload.seed", "5", workload.seed),
      IP_FIELD("pool.group_size", "8", pipeline.pool.group_size),
      IP_FIELD("pool.weighting", "cosine", pipeline.pool.weights.scheme),
      IP_FIELD("pool.precision", "fp16", pipeline.pool.precision),
      IP_FIELD("pool.positional_lambda", "2", pipeline.pool.weights.positional_lambda),
      IP_FIELD("pool.positional_bias", "0 1 2 3", pipeline.pool.weights.positional_bias),
      IP_FIELD("pool.eps", "0.01", pipeline.pool.weights.eps),
      IP_FIELD("pool.cosine_power", "2", pipeline.pool.weights.cosine_power),
      IP_FIELD("pool.cosine_reference", "query", pipeline.pool.weights.cosine_reference),
      IP_FIELD("pool.alpha_positional", "2", pipeline.pool.weights.alpha_positional),
      IP_FIELD("pool.alpha_cosine", "2", pipeline.pool.weights.alpha_cosine),
      IP_FIELD("pool.alpha_tfidf", "2", pipeline.pool.weights.alpha_tfidf),
      IP_FIELD("pool.tfidf_decay", "0.9", pipeline.stats_decay),
      IP_FIELD("pool.query_ema", "0.5", pipeline.query_ema),
      IP_FIELD("pool.rebuild_every", "2", pipeline.rebuild_every),
      IP_FIELD("select.topk_tokens", "512", pipeline.topk_tokens),
      IP_FIELD("select.fidelity", "false", pipeline.fidelity),
      IP_FIELD("select.batched", "true", batched),
      IP_FIELD("cache.enabled", "false", cache.enabled),
      IP_FIELD("cache.levels", "lru:4", cache.levels),
      IP_FIELD("cache.mode", "inclusive", cache.mode),
      IP_FIELD("cache.object", "index", cache.object),
      IP_FIELD("cache.kv_bytes", "3", cache.kv_bytes),
      IP_FIELD("cache.relevance", "cosine", cache.relevance),
      IP_FIELD("cache.opt_bound", "false", cache.opt_bound),
      IP_FIELD("cache.mrc", "false", cache.mrc),
      IP_FIELD("workload.gate_decay", "0.7", workload.gate_decay),
      IP_FIELD("workload.gate_spread", "0.1", workload.gate_spread),
      KeyField{"workload.append_per_step", "2",
               [](const ip::exp::Point& a, const ip::exp::Point& b) {
                 // The key sets the workload's and the pipeline's copy: both must agree with the defaults.
                 return a.workload.append_per_step == b.workload.append_per_step &&
                        a.pipeline.append_per_step == b.pipeline.append_per_step;
               }},
      IP_FIELD("hybrid.enabled", "true", pipeline.hybrid.enabled),
      IP_FIELD("hybrid.window", "100", pipeline.hybrid.window),
      IP_FIELD("hybrid.chunk", "32", pipeline.hybrid.chunk),
      KeyField{"hybrid.combine", "sum",
               [](const ip::exp::Point& a, const ip::exp::Point& b) {
                 return a.pipeline.hybrid.combine.kind == b.pipeline.hybrid.combine.kind &&
                        a.pipeline.hybrid.combine.g == b.pipeline.hybrid.combine.g;
               }},
      IP_FIELD("pool.repool_tau", "0", pipeline.repool_tau),
      IP_FIELD("pool.async_updates", "true", pipeline.async_updates),
      IP_FIELD("adaptive.enabled", "true", pipeline.adaptive.enabled),
      IP_FIELD("adaptive.budget", "1", pipeline.adaptive.budget_bytes_per_token),
      IP_FIELD("adaptive.segment", "32", pipeline.adaptive.segment),
      IP_FIELD("adaptive.access_weight", "2", pipeline.adaptive.access_weight),
      IP_FIELD("adaptive.disagreement_weight", "2", pipeline.adaptive.disagreement_weight),
      IP_FIELD("kernels.score_math", "fp32", pipeline.kernels.score),
      IP_FIELD("kernels.topk", "single", pipeline.kernels.topk),
      IP_FIELD("kernels.attention", "lanes", pipeline.kernels.attention),
      IP_FIELD("kernels.linear_attention", "chunked", pipeline.kernels.linear),
      IP_FIELD("limits.max_context", "100", max_context),
      IP_FIELD("output.path", "x.h5", output_path),
      IP_FIELD("output.save_tensors", "true", save_tensors),
      IP_FIELD("output.cache_trace", "t.txt", cache_trace),
      IP_FIELD("output.cache_trace_format", "csv", cache_trace_format),
      IP_FIELD("profile.counters", "on", profile.counters),
      IP_FIELD("profile.metrics", "dram__bytes_read.sum", profile.metrics),
      IP_FIELD("profile.kernel_records", "on", profile.kernel_records),
      IP_FIELD("profile.chip", "GA100", profile.chip),
  };
  return f;
}
#undef IP_FIELD

TEST_F(ConfigTest, TableDefaultsEqualStructDefaults) {
  // The key table's defaults, applied to a Point, must give the same values as the structs' own defaults,
  // key by key. Every key of config_keys() must be listed in key_fields() (a new key cannot be forgotten),
  // and every listed comparison must see its key's field (a non-default value changes it).
  std::map<std::string, const KeyField*> by_name;
  for (const auto& f : key_fields()) EXPECT_TRUE(by_name.emplace(f.name, &f).second) << "listed twice: " << f.name;
  ip::exp::Point table;
  for (const auto& k : ip::exp::config_keys()) k.apply(table, k.default_value);
  const ip::exp::Point plain;
  std::size_t compared = 0;
  for (const auto& k : ip::exp::config_keys()) {
    const auto it = by_name.find(k.name);
    if (it == by_name.end()) {
      ADD_FAILURE() << "key '" << k.name << "' (default '" << k.default_value
                    << "') is not compared with its struct default: add it to key_fields()";
      continue;
    }
    const KeyField& f = *it->second;
    ++compared;
    EXPECT_TRUE(f.same(table, plain)) << k.name << ": the table's default '" << k.default_value
                                      << "' differs from the struct's default";
    if (k.default_value == f.other_value) {
      ADD_FAILURE() << k.name << ": the default is now '" << k.default_value << "', key_fields()'s other value";
      continue;
    }
    ip::exp::Point other;
    k.apply(other, f.other_value);
    EXPECT_FALSE(f.same(other, plain)) << k.name << ": setting it to '" << f.other_value
                                       << "' does not change the field the comparison reads";
  }
  EXPECT_EQ(compared, key_fields().size()) << "key_fields() lists a name that is not a config key";
  EXPECT_EQ(compared, ip::exp::config_keys().size());
  EXPECT_FALSE(table.pipeline.record_similarity);
}

// The defaults that DESIGN.md and README.md state in words, pinned as values (a change to both the table and
// the struct would pass the test above).
TEST_F(ConfigTest, DocumentedDefaults) {
  ip::exp::Point p;
  for (const auto& k : ip::exp::config_keys()) k.apply(p, k.default_value);
  // DESIGN.md "Default definitions": G = 4, positional lambda 1.0, cosine eps 1e-3 and p = 1, tfidf decay
  // gamma 0.99, hybrid exponents alpha 1.
  EXPECT_EQ(p.pipeline.pool.group_size, 4);
  EXPECT_EQ(p.pipeline.pool.weights.positional_lambda, 1.0f);
  EXPECT_EQ(p.pipeline.pool.weights.eps, 1e-3f);
  EXPECT_EQ(p.pipeline.pool.weights.cosine_power, 1.0f);
  EXPECT_EQ(p.pipeline.stats_decay, 0.99f);
  EXPECT_EQ(p.pipeline.pool.weights.alpha_positional, 1.0f);
  EXPECT_EQ(p.pipeline.pool.weights.alpha_cosine, 1.0f);
  EXPECT_EQ(p.pipeline.pool.weights.alpha_tfidf, 1.0f);
  // README "The cache model": the article's three tiers in nine mode, relevance mass, opt_bound true, and
  // the default cache access is a group's keys and values (cache.object = kv).
  EXPECT_TRUE(p.cache.enabled);
  EXPECT_EQ(p.cache.levels, (std::vector<std::string>{"lru:16KiB", "clock:256KiB", "semantic:8MiB"}));
  EXPECT_EQ(p.cache.mode, "nine");
  EXPECT_EQ(p.cache.object, "kv");
  EXPECT_EQ(p.cache.relevance, "mass");
  EXPECT_TRUE(p.cache.opt_bound);
  // cache.kv_bytes: README, "1 to 8, default 2" (the key's help: "1..8 (2: bf16)").
  EXPECT_EQ(p.cache.kv_bytes, 2);
  // README issue 7: "with every key below at its default, run_request runs the original loop unchanged";
  // tau = -1 (default): full rebuilds.
  EXPECT_FALSE(p.pipeline.extended());
  EXPECT_EQ(p.pipeline.repool_tau, -1.0f);
  EXPECT_FALSE(p.pipeline.hybrid.enabled);
  EXPECT_FALSE(p.pipeline.async_updates);
  EXPECT_EQ(p.pipeline.append_per_step, 0);
  EXPECT_EQ(p.workload.append_per_step, 0);
  EXPECT_FALSE(p.pipeline.adaptive.enabled);
  // README "Profiling": the default metrics, and profile.chip defaulting to the device's chip (auto).
  EXPECT_EQ(p.profile.metrics,
            (std::vector<std::string>{"dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_sector_hit_rate.pct",
                                      "sm__throughput.avg.pct_of_peak_sustained_elapsed",
                                      "sm__warps_active.avg.pct_of_peak_sustained_active"}));
  EXPECT_EQ(p.profile.chip, "auto");
  EXPECT_FALSE(p.profile.counters);
  EXPECT_FALSE(p.profile.kernel_records);
  // The key help of the issue-7 keys (not in README): gate_decay 0.9, gate_spread 0.5, hybrid window 512,
  // chunk 64, combine gate:0.5, adaptive segment 256, weights 1.
  EXPECT_EQ(p.workload.gate_decay, 0.9);
  EXPECT_EQ(p.workload.gate_spread, 0.5);
  EXPECT_EQ(p.pipeline.hybrid.window, 512);
  EXPECT_EQ(p.pipeline.hybrid.chunk, 64);
  EXPECT_EQ(p.pipeline.hybrid.combine.kind, ip::CombineRule::Kind::gate);
  EXPECT_EQ(p.pipeline.hybrid.combine.g, 0.5f);
  EXPECT_EQ(p.pipeline.adaptive.segment, 256);
  EXPECT_EQ(p.pipeline.adaptive.budget_bytes_per_token, 0.0);
  EXPECT_EQ(p.pipeline.adaptive.access_weight, 1.0f);
  EXPECT_EQ(p.pipeline.adaptive.disagreement_weight, 1.0f);
}

TEST_F(ConfigTest, UnknownKeyNamesFileLineAndKey) {
  const auto path = write("[workload]\ntokens = 1024\n\n[pool]\nweigthing = uniform\n");
  const std::string e = error_of(path);
  EXPECT_NE(e.find(path + ":5"), std::string::npos) << e;
  EXPECT_NE(e.find("pool.weigthing"), std::string::npos) << e;
}

TEST_F(ConfigTest, BadValuesNameKeyAndLine) {
  auto p1 = write("[pool]\ngroup_size = four\n");
  EXPECT_NE(error_of(p1).find(p1 + ":2: key 'pool.group_size'"), std::string::npos) << error_of(p1);
  auto p2 = write("[pool]\nweighting = uniform, bogus\n");
  EXPECT_NE(error_of(p2).find("bogus"), std::string::npos);
  EXPECT_NE(error_of(p2).find(":2:"), std::string::npos);
  auto p3 = write("[workload]\ntokens = 12Qi\n");
  EXPECT_NE(error_of(p3).find("workload.tokens"), std::string::npos);
  auto p4 = write("[pool]\ngroup_size = 0\n");
  EXPECT_NE(error_of(p4).find("group size"), std::string::npos);
  auto p5 = write("[pool]\nprecision = fp7\n");
  EXPECT_NE(error_of(p5).find("fp7"), std::string::npos);
  // cache.kv_bytes: zero-byte accesses would never fill a byte-sized level; 1..8.
  for (const char* bad : {"0", "-1", "9"}) {
    auto p6 = write(std::string("[cache]\nkv_bytes = ") + bad + "\n");
    EXPECT_NE(error_of(p6).find(p6 + ":2: key 'cache.kv_bytes'"), std::string::npos) << bad << ": " << error_of(p6);
  }
  EXPECT_NE(error_of(write("[pool]\ngroup_size = 4\n"), {"cache.kv_bytes=0"}).find("cache.kv_bytes"), std::string::npos);
  EXPECT_EQ(load_sweep(write("[cache]\nkv_bytes = 1\n")).points.at(0).cache.kv_bytes, 1);
  EXPECT_EQ(load_sweep(write("[cache]\nkv_bytes = 8\n")).points.at(0).cache.kv_bytes, 8);
}

// [kernels]: the cuda backend's kernel forms, sweepable; a value not among a key's forms names it.
TEST_F(ConfigTest, KernelFormKeysSweepAndRefuseUnknownForms) {
  const auto path = write("[kernels]\ntopk = chain, single, cluster, block\nattention = lanes\nscore_math = split\n"
                          "linear_attention = chunked\n");
  const auto sw = load_sweep(path);
  ASSERT_EQ(sw.points.size(), 4u);
  const ip::TopkForm want[] = {ip::TopkForm::chain, ip::TopkForm::single, ip::TopkForm::cluster, ip::TopkForm::block};
  for (std::size_t i = 0; i < 4; ++i) {
    const ip::KernelForms& f = sw.points[i].pipeline.kernels;
    EXPECT_EQ(f.topk, want[i]);
    EXPECT_EQ(f.attention, ip::AttentionForm::lanes);
    EXPECT_EQ(f.score, ip::ScoreForm::split);
    EXPECT_EQ(f.linear, ip::LinearForm::chunked);
    EXPECT_FALSE(f.all_automatic());
  }
  EXPECT_EQ(sw.points[2].key, "kernels.topk=cluster");
  const auto auto_path = write("[kernels]\nscore_math = auto, fp32, bf16\n");
  const auto sa = load_sweep(auto_path);
  ASSERT_EQ(sa.points.size(), 3u);
  EXPECT_EQ(sa.points[0].pipeline.kernels.score, ip::ScoreForm::automatic);
  EXPECT_EQ(sa.points[1].pipeline.kernels.score, ip::ScoreForm::fp32);
  EXPECT_EQ(sa.points[2].pipeline.kernels.score, ip::ScoreForm::bf16);
  const auto bad = write("[workload]\ntokens = 4Ki\n[kernels]\ntopk = radix\n");
  EXPECT_NE(error_of(bad).find(bad + ":4: key 'kernels.topk': 'radix' is not one of: auto, chain, single, cluster, "
                               "block"),
            std::string::npos)
      << error_of(bad);
  const auto bad2 = write("[kernels]\nattention = tiles, flash\n");
  EXPECT_NE(error_of(bad2).find(":2: key 'kernels.attention': 'flash' is not one of: auto, tiles, lanes"),
            std::string::npos)
      << error_of(bad2);
  EXPECT_NE(error_of(auto_path, {"kernels.score_math=tf32"}).find("'tf32' is not one of: auto, fp32, split, bf16"),
            std::string::npos);
  EXPECT_NE(ip::exp::describe_keys().find("kernels.linear_attention"), std::string::npos);
}

TEST_F(ConfigTest, EmptyAxisItemAndEmptyValueAreErrors) {
  auto p1 = write("[pool]\nweighting = uniform,,cosine\n");
  EXPECT_NE(error_of(p1).find("empty item"), std::string::npos) << error_of(p1);
  auto p2 = write("[workload]\ntokens =\n");
  EXPECT_NE(error_of(p2).find("workload.tokens"), std::string::npos) << error_of(p2);
}

TEST_F(ConfigTest, MalformedLinesDuplicatesAndMissingFile) {
  auto p1 = write("[pool\n");
  EXPECT_NE(error_of(p1).find("malformed section"), std::string::npos);
  auto p2 = write("[pool]\ngroup_size\n");
  EXPECT_NE(error_of(p2).find(p2 + ":2"), std::string::npos);
  auto p3 = write("[pool]\ngroup_size = 2\ngroup_size = 4\n");
  EXPECT_NE(error_of(p3).find("set twice"), std::string::npos);
  EXPECT_NE(error_of("/nonexistent/dir/x.ini").find("cannot read config file '/nonexistent/dir/x.ini'"),
            std::string::npos);
  auto p4 = write("");
  EXPECT_NE(error_of(p4, {"pool.nope=1"}).find("command line: unknown key 'pool.nope'"), std::string::npos);
}

TEST_F(ConfigTest, CrossKeyChecksRunBeforeAnyPoint) {
  auto p = write("[workload]\ntopic_weight = 1.5\n");
  EXPECT_NE(error_of(p).find("topic_weight"), std::string::npos) << error_of(p);
}

// A generator-only key with every point importing its workload names the key, its file and line, and
// the source; with a synthetic point in the sweep, or keys that apply to imports too, the load goes on.
TEST_F(ConfigTest, GeneratorKeysWithOnlyImportedWorkloadsAreRejected) {
  auto p = write("[workload]\nsource = /data/dump.h5\nseed = 3\ngate_decay = 0.5\ntokens = 64Ki\n");
  const std::string e = error_of(p);
  EXPECT_NE(e.find(p + ":5: key 'workload.tokens' only shapes the synthetic generator"), std::string::npos) << e;
  EXPECT_NE(e.find("'/data/dump.h5', set at " + p + ":2"), std::string::npos) << e;
  EXPECT_NE(error_of(p, {"workload.source=synthetic, /data/dump.h5"}).find("(no error)"), std::string::npos);
  auto q = write("[workload]\nsource = /data/dump.h5\nseed = 3\ngate_decay = 0.5\nappend_per_step = 0\n");
  EXPECT_NE(error_of(q).find("(no error)"), std::string::npos) << error_of(q);
  EXPECT_NE(error_of(q, {"workload.steps=4"}).find("command line: key 'workload.steps' only shapes"), std::string::npos)
      << error_of(q, {"workload.steps=4"});
}

TEST_F(ConfigTest, ShippedConfigsLoad) {
  const std::string dir = std::string(IP_SOURCE_DIR) + "/configs/";
  EXPECT_EQ(load_sweep(dir + "quickstart.ini").points.size(), 21u);          // 7 weightings x 3 group sizes
  EXPECT_EQ(load_sweep(dir + "ablation_weighting.ini").points.size(), 56u);  // 2 seeds x 7 x 4
  EXPECT_EQ(load_sweep(dir + "context_scaling.ini").points.size(), 18u);     // 6 lengths x 3
  EXPECT_EQ(load_sweep(dir + "precision.ini").points.size(), 15u);           // 3 x 5
  EXPECT_EQ(load_sweep(dir + "zip_example.ini").points.size(), 6u);          // 3 zipped x 2
  EXPECT_EQ(load_sweep(dir + "import_trace.ini").points.size(), 5u);
  const auto claims = load_sweep(dir + "claims_1m.ini");  // exact, hybrid, tfidf at 1Mi tokens, 64 heads, fp8
  ASSERT_EQ(claims.points.size(), 3u);
  EXPECT_EQ(claims.points[0].workload.tokens, 1ll << 20);
  EXPECT_EQ(claims.points[1].pipeline.pool.precision, ip::Precision::fp8);
  const auto forms = load_sweep(dir + "kernel_forms.ini");  // 2 weightings x 4 top-k forms x 2 scoring forms
  ASSERT_EQ(forms.points.size(), 16u);
  EXPECT_EQ(forms.points[5].key, "pool.weighting=exact;kernels.topk=cluster;kernels.score_math=bf16");
  EXPECT_EQ(forms.points[5].pipeline.kernels.topk, ip::TopkForm::cluster);
  EXPECT_EQ(forms.points[5].pipeline.kernels.score, ip::ScoreForm::bf16);
}

TEST_F(ConfigTest, Pow2AndRangeItems) {
  const auto sw = load_sweep(write("[workload]\ntokens = pow2:10..12, 5000\n[pool]\ngroup_size = range:2..6:2\n"));
  ASSERT_EQ(sw.points.size(), 12u);  // {1024, 2048, 4096, 5000} x {2, 4, 6}
  EXPECT_EQ(sw.points[0].workload.tokens, 1024);
  EXPECT_EQ(sw.points[3].workload.tokens, 2048);
  EXPECT_EQ(sw.points[9].workload.tokens, 5000);
  EXPECT_EQ(sw.points[2].pipeline.pool.group_size, 6);
  EXPECT_NE(error_of(write("[workload]\ntokens = pow2:12..10\n")).find("empty range"), std::string::npos);
  EXPECT_NE(error_of(write("[pool]\ngroup_size = range:1..4:0\n")).find("step must be > 0"), std::string::npos);
  EXPECT_NE(error_of(write("[pool]\ngroup_size = 2, 4, 2\n")).find("lists the value '2' twice"), std::string::npos);
}

TEST_F(ConfigTest, ZipMovesAxesTogether) {
  const auto sw = load_sweep(write("[workload]\ntokens = 1Ki, 2Ki, 4Ki\n[select]\ntopk_tokens = 64, 128, 256\n"
                                   "[pool]\nweighting = uniform, tfidf\n[sweep]\nzip = workload.tokens select.topk_tokens\n"));
  ASSERT_EQ(sw.points.size(), 6u);  // 3 zipped values x 2 weightings
  EXPECT_EQ(sw.points[0].workload.tokens, 1024);
  EXPECT_EQ(sw.points[0].pipeline.topk_tokens, 64);
  EXPECT_EQ(sw.points[5].workload.tokens, 4096);
  EXPECT_EQ(sw.points[5].pipeline.topk_tokens, 256);
  EXPECT_EQ(sw.points[5].key, "workload.tokens=4Ki;select.topk_tokens=256;pool.weighting=tfidf");
  EXPECT_NE(error_of(write("[workload]\ntokens = 1Ki, 2Ki\n[select]\ntopk_tokens = 64, 128, 256\n"
                           "[sweep]\nzip = workload.tokens select.topk_tokens\n"))
                .find("differ in length"),
            std::string::npos);
  // The error names where sweep.zip was set: the file's line, or the command line.
  const std::string unset = error_of(write("[workload]\ntokens = 1Ki, 2Ki\n[sweep]\nzip = workload.tokens select.topk_tokens\n"));
  EXPECT_NE(unset.find(".ini:4: sweep.zip names 'select.topk_tokens', which the config does not set"), std::string::npos)
      << unset;
  try {
    load_sweep(write("[workload]\ntokens = 1Ki, 2Ki\n"), {"sweep.zip=workload.tokens select.topk_tokens"});
    ADD_FAILURE() << "no error";
  } catch (const ip::Error& e) {
    EXPECT_NE(std::string(e.what()).find("command line: sweep.zip names 'select.topk_tokens'"), std::string::npos)
        << e.what();
  }
  EXPECT_NE(error_of(write("[sweep]\nzipp = a b\n")).find("unknown key 'sweep.zipp'"), std::string::npos);
}

TEST_F(ConfigTest, EnvironmentPrecisionOverridesFileAndCommandLineOverridesBoth) {
  const auto path = write("[pool]\nprecision = fp32\n");
  ::setenv("INDEXPOOL_PRECISION", "int8", 1);
  const auto from_env = load_sweep(path);
  const auto from_cli = load_sweep(path, {"pool.precision=fp8"});
  ::setenv("INDEXPOOL_PRECISION", "fp7", 1);
  const std::string bad = error_of(path);
  ::unsetenv("INDEXPOOL_PRECISION");
  EXPECT_EQ(from_env.points[0].pipeline.pool.precision, ip::Precision::int8);
  EXPECT_EQ(from_cli.points[0].pipeline.pool.precision, ip::Precision::fp8);
  EXPECT_NE(bad.find("INDEXPOOL_PRECISION"), std::string::npos) << bad;
}

TEST_F(ConfigTest, ShardsPartitionThePoints) {
  const auto sw = load_sweep(write("[pool]\nweighting = uniform, cosine, tfidf\ngroup_size = 1, 2, 4, 8, 16\n"));
  ASSERT_EQ(sw.points.size(), 15u);
  for (int n = 1; n <= 8; ++n) {
    std::vector<int> seen(15, 0);
    for (int i = 0; i < n; ++i)
      for (const auto& p : ip::exp::shard_points(sw, i, n)) ++seen[p.index];
    for (int c : seen) EXPECT_EQ(c, 1) << "N = " << n;  // every point exactly once
  }
  EXPECT_THROW(ip::exp::shard_points(sw, 3, 3), ip::Error);
}

TEST_F(ConfigTest, ShardSpecAndSlurmVariables) {
  EXPECT_EQ(ip::exp::parse_shard("2/5"), (std::pair<int, int>{2, 5}));
  EXPECT_THROW(ip::exp::parse_shard("5/5"), ip::Error);
  EXPECT_THROW(ip::exp::parse_shard("x/2"), ip::Error);
  EXPECT_THROW(ip::exp::parse_shard("3"), ip::Error);
  EXPECT_EQ(ip::exp::parse_shard(""), (std::pair<int, int>{0, 1}));  // no Slurm variables in the test
  ::setenv("SLURM_ARRAY_TASK_ID", "7", 1);
  ::setenv("SLURM_ARRAY_TASK_COUNT", "4", 1);
  ::setenv("SLURM_ARRAY_TASK_MIN", "1", 1);
  ::setenv("SLURM_ARRAY_TASK_STEP", "2", 1);
  const auto slurm = ip::exp::parse_shard("");  // tasks 1, 3, 5, 7: task 7 is shard (7 - 1) / 2 = 3 of 4
  // --array=0,3 (two tasks, ids not MIN + k STEP): task 3 would be shard 3 of 2; the message says where from.
  ::setenv("SLURM_ARRAY_TASK_ID", "3", 1);
  ::setenv("SLURM_ARRAY_TASK_COUNT", "2", 1);
  ::setenv("SLURM_ARRAY_TASK_MIN", "0", 1);
  ::setenv("SLURM_ARRAY_TASK_STEP", "1", 1);
  std::string why;
  try {
    ip::exp::parse_shard("");
  } catch (const ip::Error& e) {
    why = e.what();
  }
  EXPECT_NE(why.find("shard 3/2 from Slurm's array variables (SLURM_ARRAY_TASK_ID 3, _MIN 0, _STEP 1, _COUNT 2)"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("pass --shard i/N"), std::string::npos) << why;
  ::unsetenv("SLURM_ARRAY_TASK_ID");
  ::unsetenv("SLURM_ARRAY_TASK_COUNT");
  ::unsetenv("SLURM_ARRAY_TASK_MIN");
  ::unsetenv("SLURM_ARRAY_TASK_STEP");
  EXPECT_EQ(slurm, (std::pair<int, int>{3, 4}));
}

TEST_F(ConfigTest, SweepIdIgnoresOutputAndThreadsOnly) {  // and output.save_tensors = false
  const auto a = load_sweep(write("[pool]\ngroup_size = 2, 4\n[output]\npath = a.h5\n"));
  const auto b = load_sweep(write("threads = 3\n[pool]\ngroup_size = 2, 4\n[output]\npath = b.h5\n"));
  const auto c = load_sweep(write("[pool]\ngroup_size = 2, 8\n"));
  const auto d = load_sweep(write("threads_per_request = 1\n[pool]\ngroup_size = 2, 4\n"));
  EXPECT_EQ(a.sweep_id, b.sweep_id);
  EXPECT_EQ(a.sweep_id, d.sweep_id);
  EXPECT_EQ(d.points[0].threads_per_request, 1);
  const std::string bad = error_of(write("threads_per_request = -1\n"));
  EXPECT_NE(bad.find("threads_per_request"), std::string::npos) << bad;
  EXPECT_NE(bad.find(":1:"), std::string::npos) << bad;
  EXPECT_NE(a.sweep_id, c.sweep_id);
  EXPECT_EQ(a.sweep_id.size(), 16u);
  // Thread counts as an axis are points of their own: two different axes are two sweeps.
  const auto t12 = load_sweep(write("threads = 1, 2\n[pool]\ngroup_size = 2, 4\n"));
  const auto t34 = load_sweep(write("threads = 3, 4\n[pool]\ngroup_size = 2, 4\n"));
  const auto r12 = load_sweep(write("threads_per_request = 1, 2\n[pool]\ngroup_size = 2, 4\n"));
  EXPECT_NE(t12.sweep_id, t34.sweep_id);
  EXPECT_NE(t12.sweep_id, a.sweep_id);
  EXPECT_NE(r12.sweep_id, a.sweep_id);
  // Of output.*, save_tensors changes what a point holds: on, another sweep (unset and false: the same).
  const auto st = load_sweep(write("[pool]\ngroup_size = 2, 4\n[output]\nsave_tensors = true\n"));
  const auto sf = load_sweep(write("[pool]\ngroup_size = 2, 4\n[output]\nsave_tensors = false\n"));
  EXPECT_NE(st.sweep_id, a.sweep_id);
  EXPECT_EQ(sf.sweep_id, a.sweep_id);
  // Thread counts past any machine are refused, naming the key and line.
  const std::string many = error_of(write("threads = 100000\n"));
  EXPECT_NE(many.find("threads must be in 0..4096"), std::string::npos) << many;
}

// The default sweep.memory_limit is 80% of what this process may use: RAM, or a lower cgroup limit (a Slurm
// job's --mem, a container) along the process's cgroup and its ancestors, v2 (memory.max) or v1
// (memory.limit_in_bytes), below each mount's root; "max" and v1's 2^63-ish values are no limit. A point over a
// job's limit would be killed by the kernel (the whole run, status 137) instead of being skipped.
TEST_F(ConfigTest, DefaultMemoryLimitFollowsTheLowestCgroupLimit) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("ip_cgroup_test_" + std::to_string(::getpid()));
  fs::remove_all(root);
  auto put = [&](const std::string& rel, const std::string& text) {
    fs::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << text;
  };
  // v2: the job's cgroup says max, its parent 8 GiB, the slice above 16 GiB.
  put("v2/slice/job/memory.max", "max\n");
  put("v2/slice/memory.max", "8589934592\n");
  put("v2/memory.max", "17179869184\n");
  const std::string v2 = "30 25 0:26 / " + (root / "v2").string() + " rw,nosuid - cgroup2 cgroup2 rw\n";
  std::string file;
  EXPECT_EQ(ip::exp::cgroup_memory_limit(v2, "0::/slice/job\n", &file), 8589934592.0);
  EXPECT_EQ(file, (root / "v2/slice/memory.max").string());
  // A container: the mount's root is the container's cgroup, which /proc/self/cgroup names in full.
  const std::string inner = "30 25 0:26 /slice " + (root / "v2").string() + " rw - cgroup2 cgroup2 rw\n";
  put("v2/job/memory.max", "1073741824\n");
  EXPECT_EQ(ip::exp::cgroup_memory_limit(inner, "0::/slice/job\n", &file), 1073741824.0);
  EXPECT_EQ(file, (root / "v2/job/memory.max").string());
  // v1: only a mount with the memory controller counts; 9223372036854771712 is no limit.
  put("v1/memory/a/b/memory.limit_in_bytes", "9223372036854771712\n");
  put("v1/memory/a/memory.limit_in_bytes", "2147483648\n");
  put("v1/cpu/a/b/memory.limit_in_bytes", "1024\n");
  const std::string v1 = "40 25 0:30 / " + (root / "v1/memory").string() + " rw - cgroup cgroup rw,memory\n" +
                         "41 25 0:31 / " + (root / "v1/cpu").string() + " rw - cgroup cgroup rw,cpu,cpuacct\n";
  EXPECT_EQ(ip::exp::cgroup_memory_limit(v1, "5:cpu,cpuacct:/a/b\n4:memory:/a/b\n0::/\n", &file), 2147483648.0);
  EXPECT_EQ(file, (root / "v1/memory/a/memory.limit_in_bytes").string());
  // Both kinds: the lower wins. None at all (no limit files, "max" only, no mounts): 0.
  EXPECT_EQ(ip::exp::cgroup_memory_limit(v1 + v2, "4:memory:/a/b\n0::/slice/job\n", &file), 2147483648.0);
  put("v2b/x/memory.max", "max\n");
  EXPECT_EQ(ip::exp::cgroup_memory_limit("30 25 0:26 / " + (root / "v2b").string() + " rw - cgroup2 cgroup2 rw\n",
                                         "0::/x\n", &file),
            0.0);
  EXPECT_EQ(ip::exp::cgroup_memory_limit("", "0::/x\n", &file), 0.0);
  fs::remove_all(root);
  // The default says where it came from; a set limit says nothing.
  const auto def = load_sweep(write("[workload]\ntokens = 4Ki\n"));
  EXPECT_EQ(def.memory_limit_source.rfind("default: 80% of ", 0), 0u) << def.memory_limit_source;
  EXPECT_EQ(def.memory_limit, 0.8 * ip::exp::usable_memory().bytes);
  EXPECT_EQ(load_sweep(write("[sweep]\nmemory_limit = 1Gi\n")).memory_limit_source, "");
}

TEST_F(ConfigTest, MemoryLimitAndEstimate) {
  const auto sw = load_sweep(write("[workload]\ntokens = 1Mi\n[sweep]\nmemory_limit = 1Gi\n"));
  EXPECT_EQ(sw.memory_limit, 1073741824.0);
  // Keys, attention keys and values of 1Mi tokens alone: 1Mi * (128 + 128 + 128) * 4 B = 1.5 GiB.
  EXPECT_GT(ip::exp::estimate_point_bytes(sw.points[0]), 1.5 * 1073741824.0);
  EXPECT_NE(error_of(write("[sweep]\nmemory_limit = lots\n")).find("sweep.memory_limit"), std::string::npos);
  // B requests hold one index at a time, unless output.save_tensors keeps each (and its float32 copy):
  // 4 requests of 64Ki tokens at G = 4, fp32, D = 128 -> 3 more indexes of 16Ki x 128 x 4 B = 8 MiB,
  // plus 4 float32 copies.
  const std::string b = write("[workload]\ntokens = 64Ki\nrequests = 4\nsteps = 1\n[pool]\nweighting = uniform\n"
                              "group_size = 4\n");
  const auto off = load_sweep(b), on = load_sweep(b, {"output.save_tensors=true"});
  const double index = 16384.0 * 128 * 4;
  EXPECT_DOUBLE_EQ(ip::exp::estimate_point_bytes(on.points[0]) - ip::exp::estimate_point_bytes(off.points[0]),
                   3 * index + 4 * index);
  // The cache model's trace: one 24-byte access and an 8-byte next use (OPT bound) per selected group,
  // request and step: 4 requests x 1 step x (2048 / 4) groups by default.
  const auto cache_off = load_sweep(b, {"cache.enabled=false"}), no_opt = load_sweep(b, {"cache.opt_bound=false"});
  EXPECT_DOUBLE_EQ(ip::exp::estimate_point_bytes(off.points[0]) - ip::exp::estimate_point_bytes(cache_off.points[0]),
                   4 * 512 * (24 + 8));
  EXPECT_DOUBLE_EQ(ip::exp::estimate_point_bytes(off.points[0]) - ip::exp::estimate_point_bytes(no_opt.points[0]),
                   4 * 512 * 8);
  // select.batched on cuda keeps each step's attention output of every request for the fidelity pass
  // (4 requests x 1 step x 4 heads x 128 values x 4 B), and nothing else: each request is copied to the
  // device from where it lies. Without fidelity, or on the cpu, nothing more.
  const auto cuda = load_sweep(b, {"backend=cuda"}), batched = load_sweep(b, {"backend=cuda", "select.batched=true"});
  EXPECT_DOUBLE_EQ(ip::exp::estimate_point_bytes(batched.points[0]) - ip::exp::estimate_point_bytes(cuda.points[0]),
                   4 * 1 * 4 * 128 * 4);
  const auto no_fid = load_sweep(b, {"backend=cuda", "select.fidelity=false"}),
             batched_no_fid = load_sweep(b, {"backend=cuda", "select.fidelity=false", "select.batched=true"}),
             cpu_batched = load_sweep(b, {"select.batched=true"});
  EXPECT_DOUBLE_EQ(ip::exp::estimate_point_bytes(batched_no_fid.points[0]),
                   ip::exp::estimate_point_bytes(no_fid.points[0]));
  EXPECT_DOUBLE_EQ(ip::exp::estimate_point_bytes(cpu_batched.points[0]), ip::exp::estimate_point_bytes(off.points[0]));
  // The generator's direction tables while a request is made: one per topic (D + Dv floats) and needle (D).
  const auto tables = load_sweep(b, {"workload.topics=1000000", "workload.needles=1000"});
  EXPECT_DOUBLE_EQ(ip::exp::estimate_point_bytes(tables.points[0]) - ip::exp::estimate_point_bytes(off.points[0]),
                   4.0 * ((1000000 - 64) * (128 + 128) + (1000 - 4) * 128));
  // The fidelity references a workload may keep beside the estimate: on the cpu with fidelity on, per step a
  // score and (4 attention heads) four probabilities per token; at most the workload's arrays.
  const auto r = load_sweep(write("[workload]\ntokens = 64Ki\nsteps = 4\n[select]\nfidelity = true, false\n"));
  const double refs = estimate_reference_bytes(r.points[0]);
  EXPECT_NEAR(refs, 4.0 * (65536 * 4.0 * 5 + 3 * 2048 * 4.0 + 4 * 128 * 4.0), 1.0);
  EXPECT_EQ(estimate_reference_bytes(r.points[1]), 0.0);
  const auto on_gpu = load_sweep(write("backend = cuda\n[workload]\ntokens = 64Ki\nsteps = 4\n"));
  EXPECT_EQ(estimate_reference_bytes(on_gpu.points[0]), 0.0);
  const auto many = load_sweep(write("[workload]\ntokens = 64Ki\nsteps = 4096\n"));
  // Capped at the requests' arrays: keys and values, and per step the queries and head weights.
  EXPECT_EQ(estimate_reference_bytes(many.points[0]),
            65536 * 4.0 * (128 + 128 + 128) + 4096 * 4.0 * (8 * 129 + 4 * 128));
}

TEST_F(ConfigTest, CacheLevelsModeAndEnvironmentSize) {
  const auto sw = load_sweep(write("[cache]\nlevels = lru:100 clock:1MiB\nmode = inclusive, exclusive\n"));
  ASSERT_EQ(sw.points.size(), 2u);
  EXPECT_EQ(sw.points[0].cache.levels, (std::vector<std::string>{"lru:100", "clock:1MiB"}));
  EXPECT_EQ(sw.points[1].cache.mode, "exclusive");
  // The default hierarchy: the IndexPool article's three tiers.
  EXPECT_EQ(load_sweep(write("")).points[0].cache.levels,
            (std::vector<std::string>{"lru:16KiB", "clock:256KiB", "semantic:8MiB"}));
  const std::string bad = error_of(write("[cache]\nlevels = lru:16KiB magic:1MiB\n"));
  EXPECT_NE(bad.find("cache.levels"), std::string::npos) << bad;
  EXPECT_NE(bad.find("magic"), std::string::npos) << bad;
  EXPECT_NE(error_of(write("[cache]\nlevels = lru:0\n")).find("cache.levels"), std::string::npos);
  EXPECT_NE(error_of(write("[cache]\nmode = sideways\n")).find("cache.mode"), std::string::npos);
  ::setenv("INDEXPOOL_CACHE_SIZE", "4Mi", 1);
  const auto env = load_sweep(write("[cache]\nlevels = lru:16KiB semantic:8MiB\n"));
  // As an axis: the axis column and the point's key name the levels it runs with.
  const auto axis = load_sweep(write("[cache]\nlevels = lru:16KiB semantic:8MiB, lru:4KiB clock:1MiB\n"));
  ::setenv("INDEXPOOL_CACHE_SIZE", "big", 1);
  const std::string env_bad = error_of(write(""));
  ::unsetenv("INDEXPOOL_CACHE_SIZE");
  EXPECT_EQ(env.points[0].cache.levels, (std::vector<std::string>{"lru:16KiB", "semantic:4MiB"}));
  ASSERT_EQ(axis.points.size(), 2u);
  EXPECT_EQ(axis.points[1].cache.levels, (std::vector<std::string>{"lru:4KiB", "clock:4MiB"}));
  EXPECT_EQ(axis.points[1].axes, (std::vector<std::pair<std::string, std::string>>{{"cache.levels", "lru:4KiB clock:4MiB"}}));
  EXPECT_EQ(axis.points[0].key, "cache.levels=lru:16KiB semantic:4MiB");
  EXPECT_NE(env_bad.find("INDEXPOOL_CACHE_SIZE"), std::string::npos) << env_bad;
}

TEST_F(ConfigTest, OutputKeysCannotBeAxes) {
  EXPECT_NE(error_of(write("[output]\npath = a.h5, b.h5\n")).find("cannot be a sweep axis"), std::string::npos);
}

// select.batched: what the batched decoder cannot do is refused before any point runs, naming the key's
// file and line, the reason and the point.
TEST_F(ConfigTest, BatchedRefusesWhatTheBatchedDecoderCannotDo) {
  const auto ok = write("[pool]\nweighting = uniform, exact, positional, maxmin\n[select]\nbatched = true\n");
  const auto sw = load_sweep(ok);
  ASSERT_EQ(sw.points.size(), 4u);
  for (const auto& p : sw.points) EXPECT_TRUE(p.batched);
  EXPECT_FALSE(load_sweep(write("[pool]\nweighting = tfidf\n")).points[0].batched);  // off by default
  // Learning schemes: the error names the file, the line of the key (3), the scheme and the point.
  const auto learn = write("[pool]\nweighting = uniform, tfidf\n[select]\nbatched = true\n");
  const std::string e1 = error_of(learn);
  EXPECT_NE(e1.find(learn + ":4: key 'select.batched' = true: pool.weighting = tfidf learns"), std::string::npos) << e1;
  EXPECT_NE(e1.find("point 1 (pool.weighting=tfidf)"), std::string::npos) << e1;
  const std::string e2 = error_of(write("[pool]\nweighting = cosine\ncosine_reference = query\n[select]\nbatched = true\n"));
  EXPECT_NE(e2.find("cosine with pool.cosine_reference = query learns"), std::string::npos) << e2;
  EXPECT_EQ(error_of(write("[pool]\nweighting = cosine\ncosine_reference = group_mean\n[select]\nbatched = true\n")),
            "(no error)");
  const std::string e3 = error_of(write("[hybrid]\nenabled = true\n[select]\nbatched = true\n"));
  EXPECT_NE(e3.find("plain sparse layer only"), std::string::npos) << e3;
  // Which of the issue-7 keys is on, where it was set and what off is (only that one is named).
  const auto grow = write("[workload]\nappend_per_step = 8\n[select]\nbatched = true\n");
  const std::string e3b = error_of(grow);
  EXPECT_NE(e3b.find("it runs the plain sparse layer only, and workload.append_per_step (set at " + grow +
                     ":2; off: 0) is on"),
            std::string::npos)
      << e3b;
  const std::string e3c = error_of(write("[pool]\nrepool_tau = 0\n[select]\nbatched = true\n[hybrid]\nenabled = true\n"));
  EXPECT_NE(e3c.find("hybrid.enabled (set at "), std::string::npos) << e3c;
  EXPECT_NE(e3c.find(":6; off: false), pool.repool_tau (set at "), std::string::npos) << e3c;
  EXPECT_NE(e3c.find(":2; off: -1) are on"), std::string::npos) << e3c;
  EXPECT_EQ(e3c.find("adaptive.enabled"), std::string::npos) << e3c;
  const std::string e4 = error_of(write("[workload]\nattn_dim = 0\n[select]\nbatched = true\n"));
  EXPECT_NE(e4.find("needs an attention stage"), std::string::npos) << e4;
  EXPECT_NE(e4.find("(workload.attn_dim = 0, set at "), std::string::npos) << e4;
  EXPECT_NE(e1.find("learns from a request's history (set at " + learn + ":2)"), std::string::npos) << e1;
  const std::string e5 = error_of(write("[select]\nbatched = true\n[profile]\ncounters = on\n"));
  EXPECT_NE(e5.find("profile.counters and profile.kernel_records"), std::string::npos) << e5;
  // What to do, and no "set at default" for the key left unset (--profile cannot help: this check comes first).
  EXPECT_NE(e5.find(":4 and its default) measure"), std::string::npos) << e5;
  EXPECT_NE(e5.find("set both off (for Nsight, then run with --profile"), std::string::npos) << e5;
  const std::string e6 = error_of(write("[select]\nbatched = true\n[cache]\nrelevance = cosine\n"));
  EXPECT_NE(e6.find("cache.relevance = cosine"), std::string::npos) << e6;
  // From the command line the message says so.
  const std::string e7 = error_of(write("[pool]\nweighting = tfidf\n"), {"select.batched=true"});
  EXPECT_NE(e7.find("command line: key 'select.batched'"), std::string::npos) << e7;
}

}  // namespace

// ---- issue 7: limits.max_context (the edge profile), the new keys and configs.
namespace {
using ip::exp::load_sweep;
class Issue7ConfigTest : public ::testing::Test {
 protected:
  void TearDown() override {
    std::error_code ec;
    for (const auto& p : written_) std::filesystem::remove(p, ec);
  }
  std::string write(const std::string& text) {
    const std::string path = ::testing::TempDir() + "issue7_" + std::to_string(::getpid()) + "_" +
                             ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".ini";
    std::ofstream(path) << text;
    written_.push_back(path);
    return path;
  }
  std::vector<std::string> written_;
  static std::string error_of(const std::string& path, std::vector<std::string> sets = {}) {
    try {
      load_sweep(path, sets);
    } catch (const ip::Error& e) {
      return e.what();
    }
    return "(no error)";
  }
};
}  // namespace

TEST_F(Issue7ConfigTest, ContextPastTheLimitIsRejectedNamingKeyFileAndLine) {
  const auto p = write("[workload]\ntokens = 1Mi\n\n[limits]\nmax_context = 512Ki\n");
  const std::string e = error_of(p);
  EXPECT_NE(e.find(p + ":2: key 'workload.tokens' = 1048576"), std::string::npos) << e;
  EXPECT_NE(e.find("exceeds limits.max_context = 524288 tokens (set at " + p + ":5)"), std::string::npos) << e;
  // At the limit is fine; appended decode tokens count.
  EXPECT_EQ(error_of(write("[workload]\ntokens = 512Ki\n[limits]\nmax_context = 512Ki\n")), "(no error)");
  const auto g = write("[workload]\ntokens = 512Ki\nsteps = 4\nappend_per_step = 1\n[limits]\nmax_context = 512Ki\n");
  EXPECT_NE(error_of(g).find("a context of 524292 tokens"), std::string::npos) << error_of(g);
  // ... naming where the steps and the appended tokens were set (the one on the command line too).
  EXPECT_NE(error_of(g).find("(workload.steps = 4 set at " + g + ":3, workload.append_per_step = 1 set at " + g + ":4)"),
            std::string::npos)
      << error_of(g);
  EXPECT_NE(error_of(g, {"workload.append_per_step=2"}).find("workload.append_per_step = 2 set at command line"),
            std::string::npos)
      << error_of(g, {"workload.append_per_step=2"});
}

TEST_F(Issue7ConfigTest, EdgeProfileLoadsAndRejectsLongerContexts) {
  const std::string edge = std::string(IP_SOURCE_DIR) + "/configs/edge.ini";
  const auto sw = load_sweep(edge);
  ASSERT_FALSE(sw.points.empty());
  for (const auto& pt : sw.points) {
    EXPECT_EQ(pt.pipeline.pool.precision, ip::Precision::int8);
    EXPECT_EQ(pt.max_context, 512 * 1024);
    EXPECT_TRUE(pt.pipeline.async_updates);
  }
  const std::string e = error_of(edge, {"workload.tokens=1Mi"});
  EXPECT_NE(e.find("command line: key 'workload.tokens' = 1048576"), std::string::npos) << e;
  EXPECT_NE(e.find("limits.max_context = 524288 tokens (set at " + edge + ":"), std::string::npos) << e;
}

TEST_F(Issue7ConfigTest, NewKeysParseAndBadCombinationsStopTheLoad) {
  const auto p = write(
      "[workload]\ngate_decay = 0.8\ngate_spread = 0\nappend_per_step = 2\n[hybrid]\nenabled = true\nwindow = 1Ki\n"
      "chunk = 32\ncombine = sum\n[pool]\nrepool_tau = 0.1\n");
  const auto sw = load_sweep(p);
  ASSERT_EQ(sw.points.size(), 1u);
  const auto& pt = sw.points[0];
  EXPECT_EQ(pt.workload.gate_decay, 0.8);
  EXPECT_EQ(pt.workload.append_per_step, 2);
  EXPECT_EQ(pt.pipeline.append_per_step, 2);
  EXPECT_TRUE(pt.pipeline.hybrid.enabled);
  EXPECT_EQ(pt.pipeline.hybrid.window, 1024);
  EXPECT_EQ(pt.pipeline.hybrid.combine.kind, ip::CombineRule::Kind::sum);
  EXPECT_FLOAT_EQ(pt.pipeline.repool_tau, 0.1f);
  EXPECT_NE(error_of(write("[hybrid]\ncombine = gate:3\n")).find("hybrid.combine"), std::string::npos);
  EXPECT_NE(error_of(write("[pool]\nrepool_tau = -0.5\n")).find("pool.repool_tau"), std::string::npos);
  const auto a = write("[adaptive]\nenabled = true\nbudget = 16\n[pool]\nrepool_tau = 0\n");
  EXPECT_NE(error_of(a).find("pool.repool_tau must be -1"), std::string::npos) << error_of(a);
  const auto b = write("[adaptive]\nenabled = true\nbudget = 20\n");  // D = 128 fp32: 512-byte rows, 32 B/token at G = 16
  EXPECT_NE(error_of(b).find("key 'adaptive.budget' = 20 bytes per token is below"), std::string::npos) << error_of(b);
  // Exactly 32 B per token fits a context that is a multiple of 16, not a request whose length is not (a
  // partial last group is a whole row): every request's length is checked, not only workload.tokens.
  const auto exact = write("[workload]\ntokens = 4Ki\n[adaptive]\nenabled = true\nbudget = 32\n");
  EXPECT_EQ(error_of(exact), "(no error)");
  const auto spread = write("[workload]\ntokens = 4Ki\nrequests = 4\nlength_spread = 0.5\n[adaptive]\nenabled = true\n"
                            "budget = 32\n");
  EXPECT_NE(error_of(spread).find("key 'adaptive.budget' = 32 bytes per token is below"), std::string::npos)
      << error_of(spread);
  EXPECT_NE(error_of(spread).find(" tokens of request "), std::string::npos) << error_of(spread);
  // No attention stage: a kv cache access would be 0 bytes (a byte-sized level never fills).
  const auto kv = write("[workload]\nattn_dim = 0\n");
  EXPECT_NE(error_of(kv).find(":2: key 'cache.object' = kv sizes each cache access"), std::string::npos) << error_of(kv);
  EXPECT_NE(error_of(kv).find("set cache.object = index"), std::string::npos) << error_of(kv);
  EXPECT_EQ(error_of(write("[workload]\nattn_dim = 0\n[cache]\nobject = index\n")), "(no error)");
  EXPECT_EQ(error_of(write("[workload]\nattn_dim = 0\n[cache]\nenabled = false\n")), "(no error)");
  const auto h = write("[workload]\nattn_dim = 0\n[hybrid]\nenabled = true\n");
  EXPECT_NE(error_of(h).find("workload.attn_dim > 0"), std::string::npos) << error_of(h);
}

TEST_F(Issue7ConfigTest, Issue7ConfigsLoad) {
  const std::string dir = std::string(IP_SOURCE_DIR) + "/configs/";
  EXPECT_EQ(load_sweep(dir + "hybrid.ini").points.size(), 2u * 6);
  EXPECT_EQ(load_sweep(dir + "repool_tau.ini").points.size(), 2u * 9);
  EXPECT_EQ(load_sweep(dir + "adaptive.ini").points.size(), 2u * 3 * 2);
  EXPECT_EQ(load_sweep(dir + "growing.ini").points.size(), 2u * 2);
  EXPECT_EQ(load_sweep(dir + "edge.ini").points.size(), 2u);
}

// Every parameter check the run makes later (core/pool.cc validate_pool_params, core/pipeline.cc
// validate_pipeline_params) happens at load, before any point runs: with --overwrite a point that failed
// mid-sweep had already replaced the results file. The message names the key and where it was set.
TEST_F(ConfigTest, RunTimeParameterChecksFailAtLoadNamingKeyAndPlace) {
  const auto bias = write("[workload]\ntokens = 4096\nsteps = 2\n[pool]\nweighting = positional\ngroup_size = 4, 8\n"
                          "positional_bias = 0 0.1 0.2 0.3\n");
  const std::string e = error_of(bias);
  EXPECT_EQ(e.rfind(bias + ":7: point 1 (pool.group_size=8): pool.positional_bias: positional bias has 4 entries "
                           "for group size 8",
                    0),
            0u)
      << e;
  EXPECT_NE(e.find("pool.positional_bias set at " + bias + ":7, pool.group_size set at " + bias + ":6"),
            std::string::npos)
      << e;
  const auto base = write("[workload]\ntokens = 4096\nsteps = 2\n");
  struct Case {
    std::string set, needle;
  };
  for (const Case& c : std::vector<Case>{{"select.topk_tokens=512,0", "select.topk_tokens = 0 (must be >= 1)"},
                                         {"pool.tfidf_decay=0.9,1.5", "pool.tfidf_decay = 1.5 outside [0, 1]"},
                                         {"pool.eps=0", "pool.eps = 0 (must be > 0)"},
                                         {"pool.positional_lambda=100", "pool.positional_lambda: positional lambda = 100"},
                                         {"pool.cosine_power=0", "pool.cosine_power: cosine power = 0"},
                                         {"pool.query_ema=1", "pool.query_ema = 1 outside [0, 1)"},
                                         {"pool.rebuild_every=0", "pool.rebuild_every = 0 (must be >= 1)"}}) {
    const std::string err = error_of(base, {c.set});
    EXPECT_EQ(err.rfind("command line: point ", 0), 0u) << c.set << ": " << err;
    EXPECT_NE(err.find(c.needle), std::string::npos) << c.set << ": " << err;
  }
  // A whole-point error about a --set value says so (it said the config file, without a line).
  const std::string t = error_of(base, {"workload.dim=0"});
  EXPECT_EQ(t.rfind("command line: point 0 (-): workload.dim = 0", 0), 0u) << t;
  const auto in_file = write("[workload]\ntokens = 4096\nsteps = 2\nrequests = 0\n");
  EXPECT_EQ(error_of(in_file).rfind(in_file + ":4: point 0 (-): workload.requests = 0", 0), 0u) << error_of(in_file);
}

// k_g = ceil(k/G): a group larger than the whole budget is an error naming both keys; exact (effective G = 1)
// and adaptive sizes (G is not the selection's group there) are not refused; G = 3 at k = 512 stays valid.
TEST_F(ConfigTest, GroupLargerThanTheTokenBudgetIsAnError) {
  const auto p = write("[workload]\ntokens = 16Ki\nsteps = 2\n[pool]\ngroup_size = 8192\n[select]\ntopk_tokens = 512\n");
  const std::string e = error_of(p);
  EXPECT_NE(e.find("pool.group_size = 8192 exceeds select.topk_tokens = 512"), std::string::npos) << e;
  EXPECT_NE(e.find("pool.group_size set at " + p + ":5, select.topk_tokens set at " + p + ":7"), std::string::npos) << e;
  const std::string c = error_of(p, {"select.topk_tokens=1024"});
  EXPECT_NE(c.find("select.topk_tokens set at command line"), std::string::npos) << c;
  EXPECT_EQ(error_of(p, {"pool.weighting=exact"}), "(no error)");
  EXPECT_EQ(error_of(p, {"pool.group_size=3"}), "(no error)");
  EXPECT_EQ(error_of(p, {"pool.group_size=512"}), "(no error)");
  EXPECT_EQ(error_of(p, {"adaptive.enabled=true", "adaptive.budget=64"}), "(no error)");
}

TEST_F(ConfigTest, EveryReadyConfigStillLoads) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(IP_SOURCE_DIR) + "/configs")) {
    if (e.path().extension() != ".ini") continue;
    ++n;
    EXPECT_EQ(error_of(e.path().string()), "(no error)") << e.path();
  }
  EXPECT_GE(n, 10);
}

TEST_F(ConfigTest, NonFiniteNumbersAreRejectedNamingTheKey) {
  const auto p = write("[pool]\nweighting = hybrid\nalpha_tfidf = nan\n");
  EXPECT_NE(error_of(p).find(p + ":3: key 'pool.alpha_tfidf': 'nan' is not a finite number"), std::string::npos)
      << error_of(p);
  const auto base = write("[pool]\nweighting = hybrid\n");
  for (const std::string set : {"pool.alpha_cosine=inf", "pool.alpha_positional=-inf", "workload.sharpness=NaN",
                                "pool.positional_bias=0 nan 0 0", "adaptive.budget=infinity"}) {
    const std::string e = error_of(base, {set});
    EXPECT_EQ(e.rfind("command line: key '" + set.substr(0, set.find('=')) + "'", 0), 0u) << set << ": " << e;
    EXPECT_NE(e.find("is not a finite number"), std::string::npos) << set << ": " << e;
  }
  EXPECT_EQ(error_of(base, {"pool.alpha_tfidf=0.5", "pool.repool_tau=-1"}), "(no error)");
}

TEST_F(ConfigTest, LeadingByteOrderMarkIsIgnored) {
  const auto sw = load_sweep(write("\xEF\xBB\xBF" "backend = cpu\n[workload]\ntokens = 4Ki\n"));
  ASSERT_EQ(sw.points.size(), 1u);
  EXPECT_EQ(sw.points[0].workload.tokens, 4096);
}

TEST_F(ConfigTest, KeySetTwiceOnTheCommandLineIsAnError) {
  const auto p = write("[pool]\ngroup_size = 4\n");
  const std::string e = error_of(p, {"pool.weighting=uniform", "pool.weighting=cosine"});
  EXPECT_NE(e.find("command line: key 'pool.weighting' is set twice with --set ('uniform', then 'cosine')"),
            std::string::npos)
      << e;
  EXPECT_NE(error_of(p, {"sweep.memory_limit=1Gi", "sweep.memory_limit=2Gi"}).find("set twice with --set"),
            std::string::npos);
  // Once on the command line still overrides the file.
  EXPECT_EQ(load_sweep(p, {"pool.group_size=8"}).points[0].pipeline.pool.group_size, 8);
}

TEST(FormatBytes, ShowsTheValueInAFittingBinaryUnit) {
  EXPECT_EQ(ip::exp::format_bytes(0), "0 B");
  EXPECT_EQ(ip::exp::format_bytes(512), "512 B");
  EXPECT_EQ(ip::exp::format_bytes(1024), "1.0 KiB");
  EXPECT_EQ(ip::exp::format_bytes(1.5 * (1 << 20)), "1.5 MiB");
  EXPECT_EQ(ip::exp::format_bytes(80.0 * (1 << 30)), "80.0 GiB");
}
