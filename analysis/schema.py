"""Every name the analysis reads from a results file, in one place.

The runner writes these (experiments/results.h, experiments/results.cc, experiments/profiling.h/.cc,
experiments/config.cc's key table; schema_version 1). Some families need data a CPU-only run of the
default configs does not have (CUDA points, counters, hybrid and re-pooling sweeps); their figure
functions raise NoData naming what is missing (see analysis/README.md).
"""

SCHEMA_VERSION = 1  # the results-file layout this package reads (root attribute schema_version)

# Root attributes (strings unless noted).
ATTRS = ("schema_version", "tool_version", "git_revision", "config_text", "config_path", "argv", "host",
         "backend", "device", "created_utc", "sweep_id", "points_total", "units")

# /points: fixed columns, then one bytes column per sweep axis (named after its config key), then numbers.
POINT_ID_COLUMNS = ("index", "key", "status", "reason")
# What a point actually ran on (bytes columns after status and reason): RUN_BACKEND is "cpu" or "cuda" (the
# backend the point ran on, after `backend = auto` was resolved; for a skipped point, the one it would have
# used), RUN_DEVICE that backend's device description ("" when skipped before a backend started). The
# configured value stays in the "backend" column (an axis, or the config's single value). Files written
# before these columns existed lack them: load.py then fills RUN_BACKEND from "backend" and RUN_DEVICE from
# the root attribute "device" (the old reading) and sets RUN_COLUMNS_READ to False for their rows.
RUN_BACKEND, RUN_DEVICE = "run_backend", "run_device"
RUN_COLUMNS = (RUN_BACKEND, RUN_DEVICE)
RUN_COLUMNS_READ = "run#read"  # True: RUN_COLUMNS came from the file; False: filled in by the fallback
NUMBER_COLUMNS = ("tokens", "index_bytes_per_token", "exact_bytes_per_token", "macs_per_query",
                  "exact_macs_per_query", "token_recall", "block_recall", "mass_recall", "output_error",
                  "pool_ms", "score_ms", "topk_ms", "attention_ms", "wall_s", "cache_l1_hit_rate",
                  "cache_l2_hit_rate", "cache_l3_hit_rate", "cache_hit_rate", "cache_opt_hit_rate",
                  "cache_opt_single_hit_rate",
                  # issue 7 (experiments/results.h): see the hybrid and re-pooling sections below
                  "layer_ms", "local_ms", "local_prefill_ms", "layer_output_error", "layer_mass_recall",
                  "layer_tokens_per_step", "repooled_fraction_mean", "pool_hidden_ms", "tokens_per_group")

# Cache model numbers (fractions in [0, 1]; NaN when the cache model or cache.opt_bound is off):
#   CACHE_HIT_RATE         accesses that hit some level, under the configured policies;
#   CACHE_OPT_HIT_RATE     the same hierarchy with Belady's OPT at every level: a REFERENCE, NOT A BOUND
#                          (per-level Belady is not optimal for a hierarchy; other policies can beat it);
#   CACHE_OPT_SINGLE_HIT_RATE  Belady's OPT on one cache of all levels' total capacity: an UPPER BOUND on
#                          CACHE_HIT_RATE for any policies and mode (NaN when objects differ in size).
# Per level (point_NNNNNN/cache_levels): LEVEL_HIT_RATE (hits / accesses reaching the level) and
# LEVEL_OPT_HIT_RATE (that level in the all-OPT hierarchy: a reference, not a bound); there is no
# per-level bound.
CACHE_HIT_RATE = "cache_hit_rate"
CACHE_OPT_HIT_RATE = "cache_opt_hit_rate"
CACHE_OPT_SINGLE_HIT_RATE = "cache_opt_single_hit_rate"

# Per-point datasets (group point_NNNNNN/).
STEPS = "steps"                # request, step, token_recall, block_recall, mass_recall, output_error, *_ms,
                               # context_tokens, local_ms, layer_ms, layer_output_error, layer_mass_recall,
                               # layer_tokens, repooled_fraction, pool_hidden_ms
CACHE_LEVELS = "cache_levels"  # level (1-based), policy, capacity, accesses, hits, misses, evictions,
                               # bytes_from_below, hit_rate, opt_hit_rate
LEVEL, LEVEL_HIT_RATE, LEVEL_OPT_HIT_RATE = "level", "hit_rate", "opt_hit_rate"
CACHE_MRC = "cache_mrc"        # capacity_entries, miss_ratio
STEP_METRICS = ("token_recall", "block_recall", "mass_recall", "output_error",
                "pool_ms", "score_ms", "topk_ms", "attention_ms",
                "layer_ms", "local_ms", "layer_output_error", "layer_mass_recall", "repooled_fraction_mean")
# A per-point number whose per-step column has another name, and per-point numbers taken over the steps
# after the first only (the first step's build is not a re-pooling decision).
STEP_COLUMN = {"repooled_fraction_mean": "repooled_fraction"}
AFTER_FIRST_STEP = ("repooled_fraction_mean",)

# Config keys the figures group by. Each becomes a column of the loaded table whether or not it was a
# sweep axis: an axis gives its column, a single value comes from the config text (plus --set in argv
# and the INDEXPOOL_PRECISION environment note), anything unset from these defaults (experiments/config.cc).
KEY_DEFAULTS = {
    "backend": "cpu",
    "workload.source": "synthetic",
    "workload.tokens": "65536",
    "workload.dim": "128",
    "workload.index_heads": "8",
    "workload.attn_dim": "128",
    "workload.value_dim": "128",
    "workload.requests": "1",
    "workload.seed": "0",
    "pool.weighting": "uniform",
    "pool.group_size": "4",
    "pool.precision": "fp32",
    "select.topk_tokens": "2048",
    "cache.object": "kv",
    "cache.kv_bytes": "2",
    "cache.levels": "lru:16KiB clock:256KiB semantic:8MiB",
    # issue 7: hybrid layer, incremental re-pooling, adaptive group sizes
    "hybrid.enabled": "false",
    "hybrid.window": "512",
    "hybrid.combine": "gate:0.5",
    "pool.repool_tau": "-1",
    "adaptive.enabled": "false",
    # select.batched: on a GPU backend the point's B requests decoded together; its *_ms are the batch's
    "select.batched": "false",
    # [kernels]: the cuda backend's kernel forms ("auto": the launchers' own choice); the cpu ignores them
    "kernels.score_math": "auto",
    "kernels.topk": "auto",
    "kernels.attention": "auto",
    "kernels.linear_attention": "auto",
}
KERNEL_FORM_KEYS = ("kernels.score_math", "kernels.topk", "kernels.attention", "kernels.linear_attention")
INT_KEYS = ("workload.tokens", "workload.dim", "workload.index_heads", "workload.attn_dim", "workload.value_dim",
            "workload.requests", "workload.seed", "pool.group_size", "select.topk_tokens", "cache.kv_bytes",
            "hybrid.window")
FLOAT_KEYS = ("pool.repool_tau",)
BOOL_KEYS = ("hybrid.enabled", "adaptive.enabled", "select.batched")  # read as Python bools (config.cc's parse_bool spellings)
TRUE_WORDS, FALSE_WORDS = ("true", "1", "yes", "on"), ("false", "0", "no", "off")

# Axes that only repeat a measurement (error bars come from them), never a series of their own.
REPLICATE_KEYS = ("workload.seed",)

# Schemes: "exact" is the uncompressed indexer, "maxmin" the Quest-style bounds (2 rows per group), the
# rest IndexPool's pooled composites. The claims report's reference scheme is the first of
# REFERENCE_WEIGHTINGS present in the data (the article's method is the hybrid weighting).
EXACT = "exact"
WEIGHTING_ORDER = ("exact", "uniform", "positional", "cosine", "tfidf", "hybrid", "maxmin")
POOLED = ("uniform", "positional", "cosine", "tfidf", "hybrid")
REFERENCE_WEIGHTINGS = ("hybrid", "tfidf", "cosine", "positional", "uniform")

STAGES = (("pool_ms", "pooling"), ("score_ms", "scoring"), ("topk_ms", "top-k"), ("attention_ms", "attention"))

# ---------------------------------------------------------------------------------------------------
# Hybrid layer vs pure sparse attention (issue 7; README "Hybrid attention, the feedback loop, ...",
# configs/hybrid.ini). HYBRID_ENABLED (bool key, default false) false = pure sparse attention over the
# select.topk_tokens selected tokens; true = a local gated linear branch over the last HYBRID_WINDOW tokens
# plus the sparse branch at select.topk_tokens, combined by HYBRID_COMBINE ("sum", or "gate:G" meaning
# (1-G) o_sparse + G o_local). Matched token budget: hybrid at k - W against pure sparse at k, i.e. equal
# TOKEN_BUDGET = select.topk_tokens + (hybrid ? hybrid.window : 0) (a derived column, not in the file).
# Per point (/points, float64):
#   LAYER_MS               median per step of score + top-k + sparse attention + local branch, ms;
#   LAYER_OUTPUT_ERROR     mean over steps of the layer output's relative L2 error vs dense attention;
#   LAYER_MASS_RECALL      mean over steps of the dense attention mass on the tokens the layer covers
#                          (the selection together with the window);
#   LAYER_TOKENS_PER_STEP  mean tokens the layer covers per step (the union: window and selection may overlap);
#   LOCAL_MS               median per step of the local branch (0 without hybrid), ms;
#   LOCAL_PREFILL_MS       median per request of the chunked linear attention over the window, ms.
# Perplexity is not simulated (no trained model); LAYER_OUTPUT_ERROR is what stands in for quality.
# ---------------------------------------------------------------------------------------------------
# select.batched = true (experiments/batched_run.cc): on a GPU backend (RUN_BACKEND in GPU_BACKENDS) the B
# requests of a point decoded together, so pool_ms, score_ms, topk_ms, attention_ms and layer_ms are the
# times of the whole batch (one launch per stage for all B), not of one request. On the cpu backend the
# requests ran one after another and the times are per request as usual. Selections, and so recalls and
# cache hit rates, are the same either way.
BATCHED = "select.batched"
HYBRID_ENABLED = "hybrid.enabled"
HYBRID_WINDOW = "hybrid.window"
HYBRID_COMBINE = "hybrid.combine"
TOPK = "select.topk_tokens"
TOKEN_BUDGET = "token_budget#derived"
LAYER_MS, LOCAL_MS, LOCAL_PREFILL_MS = "layer_ms", "local_ms", "local_prefill_ms"
LAYER_OUTPUT_ERROR, LAYER_MASS_RECALL = "layer_output_error", "layer_mass_recall"
LAYER_TOKENS_PER_STEP = "layer_tokens_per_step"

# ---------------------------------------------------------------------------------------------------
# Incremental re-pooling (issue 7, configs/repool_tau.ini): REPOOL_TAU (float key, default -1): -1 = full
# index rebuilds (FULL_REBUILD_TAU), tau >= 0 = re-pool only groups whose weight vector moved by more than
# tau (relative L1; 0 gives the full rebuild's bits). Per point REPOOLED_FRACTION_MEAN: mean over the steps
# after the first of (groups re-pooled / groups), NaN with one step; per step (point_NNNNNN/steps)
# REPOOLED_FRACTION (1 on a full build, 0 with no update). token_recall is read as for every point.
# ---------------------------------------------------------------------------------------------------
REPOOL_TAU = "pool.repool_tau"
FULL_REBUILD_TAU = -1.0
REPOOLED_FRACTION_MEAN = "repooled_fraction_mean"
REPOOLED_FRACTION = "repooled_fraction"

# Also written by issue 7 (not drawn yet): tokens per stored index group (the mean for adaptive sizes),
# the hidden part of asynchronous index updates (NaN on the cpu backend: nothing overlaps there), and the
# adaptive group-size keys (adaptive.budget: index bytes per context token).
TOKENS_PER_GROUP, POOL_HIDDEN_MS = "tokens_per_group", "pool_hidden_ms"
ADAPTIVE_ENABLED, ADAPTIVE_BUDGET = "adaptive.enabled", "adaptive.budget"

# ---------------------------------------------------------------------------------------------------
# Profiling (experiments/profiling.h, profile.counters / profile.kernel_records).
# ---------------------------------------------------------------------------------------------------

# Point group attributes: "off" (not asked for), "ok", or "unavailable", and why (e.g. "the point ran on
# the cpu backend; ..."). With counters ok also COUNTERS_CHIP and COUNTERS_PASSES.
COUNTERS_STATUS, COUNTERS_REASON = "counters_status", "counters_reason"
KERNELS_STATUS, KERNELS_REASON = "kernels_status", "kernels_reason"
COUNTERS_CHIP, COUNTERS_PASSES = "counters_chip", "counters_passes"
PROFILE_ATTRS = (COUNTERS_STATUS, COUNTERS_REASON, KERNELS_STATUS, KERNELS_REASON, COUNTERS_CHIP, COUNTERS_PASSES)

# Hardware counters: point_NNNNNN/counters, one row per stage and metric, aggregated over the stage's
# calls in the point: stage (pool, score, topk, attention, fidelity, stats), metric (CUPTI / Nsight
# Compute name), value (float64, in unit), unit (CUPTI's: "byte", "percent", "" for a count, ...), calls
# (int64, stage calls measured), aggregate ("sum": summed over the calls; "mean": averaged over them).
COUNTERS = "counters"
COUNTER_COLUMNS = ("stage", "metric", "value", "unit", "calls", "aggregate")
UNIT_PERCENT = "percent"
UNIT_BYTE = ("byte", "bytes")
DRAM_BYTES_PREFIX = "dram__bytes"  # dram__bytes_read.sum, dram__bytes_write.sum (unit byte, aggregate sum)
# Readable names of the runner's default metrics (experiments/profile_types.h); others show their own name.
METRIC_LABELS = {
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "SM throughput, % of peak",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved occupancy, % of peak",
    "lts__t_sector_hit_rate.pct": "L2 sector hit rate, %",
    "dram__bytes_read.sum": "DRAM read",
    "dram__bytes_write.sum": "DRAM write",
}
# Stages in pipeline order (core/ranges.h names). With counters on, a point's *_ms columns include the
# replay passes, so bandwidth is taken against the stage's kernel time (pass 0 of KERNELS), not them.
PROFILE_STAGES = ("pool", "score", "topk", "attention", "fidelity", "stats")

# Kernel launches: point_NNNNNN/kernels, one row per launch: name (demangled), stage ("" outside any
# measured stage), pass (0: the run itself; >= 1: counter replay passes), duration_ns, grid_x/y/z,
# block_x/y/z, registers_per_thread, static_shared_bytes, dynamic_shared_bytes.
KERNELS = "kernels"
KERNEL_COLUMNS = ("name", "stage", "pass", "duration_ns")

# ---------------------------------------------------------------------------------------------------
# Backend. BACKEND is the configured value (cpu | cuda | auto; an axis column or the config's value, root
# attribute "backend" as a last resort); whether a point ran on a GPU, and which, is RUN_BACKEND in
# GPU_BACKENDS and RUN_DEVICE (e.g. "NVIDIA A100-SXM4-80GB ..."). CUDA points write the same *_ms columns,
# timed with CUDA events.
BACKEND = "backend"
GPU_BACKENDS = ("cuda",)
