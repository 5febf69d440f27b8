"""Every name the analysis reads from a results file, in one place.

The runner writes these (experiments/results.h, experiments/results.cc, experiments/profiling.h/.cc,
schema_version 1). The families marked FUTURE are read
from columns or datasets that no issue writes yet: an engineer who adds the data writes exactly these
names (see analysis/README.md), and the figures and the claims report pick them up with no change here.
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
                  "cache_opt_single_hit_rate")

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
STEPS = "steps"                # request, step, token_recall, block_recall, mass_recall, output_error, *_ms
CACHE_LEVELS = "cache_levels"  # level (1-based), policy, capacity, accesses, hits, misses, evictions,
                               # bytes_from_below, hit_rate, opt_hit_rate
LEVEL, LEVEL_HIT_RATE, LEVEL_OPT_HIT_RATE = "level", "hit_rate", "opt_hit_rate"
CACHE_MRC = "cache_mrc"        # capacity_entries, miss_ratio
STEP_METRICS = ("token_recall", "block_recall", "mass_recall", "output_error",
                "pool_ms", "score_ms", "topk_ms", "attention_ms")

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
    # FUTURE keys (hybrid attention, incremental re-pooling): read the same way once they exist.
    "attention.mode": "sparse",
    "pool.repool_tau": "",
}
INT_KEYS = ("workload.tokens", "workload.dim", "workload.index_heads", "workload.attn_dim", "workload.value_dim",
            "workload.requests", "workload.seed", "pool.group_size", "select.topk_tokens", "cache.kv_bytes")
FLOAT_KEYS = ("pool.repool_tau",)

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
# FUTURE data. Nothing writes these yet; the figure functions raise NoData naming them when absent.
# ---------------------------------------------------------------------------------------------------

# Hybrid vs pure sparse attention: a sweep axis "attention.mode" with the values below, and the
# per-point number STEP_MS (float64 column in /points): median wall time of one whole decode step
# (indexer + attention), milliseconds. output_error and mass_recall are read as today.
ATTENTION_MODE = "attention.mode"
MODE_SPARSE, MODE_HYBRID = "sparse", "hybrid"
STEP_MS = "step_ms"

# Incremental re-pooling: a sweep axis "pool.repool_tau" (threshold tau, no unit) and the per-point number
# REPOOLED_FRACTION (float64 column in /points): mean over decode steps of the fraction of groups whose
# composite was recomputed, in [0, 1]. token_recall is read as today.
REPOOL_TAU = "pool.repool_tau"
REPOOLED_FRACTION = "repooled_fraction"

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
