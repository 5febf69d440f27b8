"""Every name the analysis reads from a results file, in one place.

The runner writes these (experiments/results.h, schema_version 1). The families marked FUTURE are read
from columns or datasets that no issue writes yet: an engineer who adds the data writes exactly these
names (see analysis/README.md), and the figures and the claims report pick them up with no change here.
"""

SCHEMA_VERSION = 1  # the results-file layout this package reads (root attribute schema_version)

# Root attributes (strings unless noted).
ATTRS = ("schema_version", "tool_version", "git_revision", "config_text", "config_path", "argv", "host",
         "backend", "device", "created_utc", "sweep_id", "points_total", "units")

# /points: fixed columns, then one bytes column per sweep axis (named after its config key), then numbers.
POINT_ID_COLUMNS = ("index", "key", "status", "reason")
NUMBER_COLUMNS = ("tokens", "index_bytes_per_token", "exact_bytes_per_token", "macs_per_query",
                  "exact_macs_per_query", "token_recall", "block_recall", "mass_recall", "output_error",
                  "pool_ms", "score_ms", "topk_ms", "attention_ms", "wall_s", "cache_l1_hit_rate",
                  "cache_l2_hit_rate", "cache_l3_hit_rate", "cache_hit_rate", "cache_opt_hit_rate")

# Per-point datasets (group point_NNNNNN/).
STEPS = "steps"                # request, step, token_recall, block_recall, mass_recall, output_error, *_ms
CACHE_LEVELS = "cache_levels"  # level, policy, capacity, accesses, hits, misses, ..., hit_rate, opt_hit_rate
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

# Hardware counters (CUPTI): a per-point compound dataset point_NNNNNN/counters, one row per kernel and
# counter, columns: kernel (bytes), counter (bytes, e.g. "dram_throughput", "sm_throughput"),
# value (float64, the counter's own unit), peak (float64, same unit), pct_of_peak (float64, 0..100).
COUNTERS = "counters"
COUNTER_COLUMNS = ("kernel", "counter", "value", "peak", "pct_of_peak")

# GPU backend: points run on the CUDA backend have backend = "cuda" (the "backend" axis, or the root
# attribute when not an axis) and write the same *_ms columns, timed with CUDA events; the root
# attribute "device" names the GPU (e.g. "NVIDIA A100-SXM4-80GB ...").
BACKEND = "backend"
GPU_BACKENDS = ("cuda",)
