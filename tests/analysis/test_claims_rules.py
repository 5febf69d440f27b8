"""The claims report's verdict rules, pinned on small hand-made results tables (no runner needed): every
threshold and comparison of analysis/claims.py (RULES) at and around its boundary, with expected values
computed by hand in the comments. Added by the mutation-testing audit of claims.py: each test kills mutants
(a threshold moved, >= made >, a median made a mean, a wrong column, ...) that the runner-file tests let
through."""
import os
import sys

import pandas as pd
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from analysis import claims, schema  # noqa: E402
from analysis.load import Results  # noqa: E402

S, P, NS, NM = claims.SUPPORTED, claims.PARTIALLY, claims.NOT_SUPPORTED, claims.NOT_MEASURED
ONE_M, TWO_M = 1 << 20, 1 << 21
A100 = "NVIDIA A100-SXM4-80GB (synthetic)"
BASE = {"status": "ok", "file": "/synthetic/s.h5", "attr.sweep_id": "s1", "attr.config_path": "configs/syn.ini",
        "attr.argv": "", "attr.git_revision": "abc123", "attr.host": "h", "backend": "cuda",
        schema.RUN_BACKEND: "cuda", schema.RUN_DEVICE: A100, "pool.precision": "fp32", "pool.group_size": 4,
        "pool.weighting": "hybrid", "workload.seed": 0, "context": float(ONE_M), "tokens": float(ONE_M)}


def results(rows, steps=None):
    """A Results of the given points (each a dict over BASE); steps: the point_NNNNNN/steps table (default:
    none, so rates fall back to the points' own columns)."""
    pts = pd.DataFrame([{**BASE, "index": i, **r} for i, r in enumerate(rows)])
    r = Results(points=pts, files=[])
    r._detail[schema.STEPS] = pd.DataFrame() if steps is None else steps
    return r


def claim(res, cid):
    return {x.id: x for x in claims.evaluate(res)}[cid]


# ------------------------------------------------------------------------------------------------- reach()
def test_reach_is_at_least_97_percent_supported_at_least_80_percent_partially():
    # RULES: supported when the measured gain reaches the article's within 3 % (r >= 0.97), partially when it
    # reaches 80 % (r >= 0.80), not supported below. Both boundaries are inclusive ("reaches").
    assert claims.reach(0.97, 1.0) == S
    assert claims.reach(0.9699, 1.0) == P
    assert claims.reach(0.80, 1.0) == P
    assert claims.reach(0.7999, 1.0) == NS
    assert claims.reach(0.1, 1.0) == NS
    assert claims.reach(6.0, 4.0) == S  # more than the article's gain: supported, not "too far off"
    assert claims.reach(3.88, 4.0) == S and claims.reach(3.2, 4.0) == P and claims.reach(3.19, 4.0) == NS


# ------------------------------------------------------------------------------------------------- memory
def memory_row(exact_bpt, pooled_bpt, context=ONE_M):
    return claim(results([{"exact_bytes_per_token": exact_bpt, "index_bytes_per_token": pooled_bpt,
                           "context": float(context), "tokens": float(context)},
                          # a G = 2 point of the same scheme (2x smaller index): not the article's G, ignored
                          {"exact_bytes_per_token": exact_bpt, "index_bytes_per_token": pooled_bpt / 2,
                           "context": float(context), "tokens": float(context), "pool.group_size": 2}]), "memory")


def test_memory_claim_is_the_ratio_against_4x():
    # 32 -> 8 B/token at 1M tokens: 4.00x, 32 MiB -> 8 MiB: the article's claim exactly.
    r = memory_row(32.0, 8.0)
    assert r.verdict == S and "4.00× smaller" in r.measured and "32.0 MiB → 8.0 MiB" in r.measured, r
    assert "not the article" not in r.measured and "The exact index at 1M" not in r.reason, r.reason
    # 32 -> 10 B/token: 3.2x = 80 % of 4x: partially; 32 -> 32/3: 3.00x = 75 %: not supported.
    assert memory_row(32.0, 10.0).verdict == P
    r = memory_row(32.0, 32.0 / 3)
    assert r.verdict == NS and "= 3.00×" in r.reason, r.reason


def test_memory_claim_notes_an_exact_index_other_than_32_mb():
    # 40 -> 10 B/token: 4.00x, but the exact index at 1M tokens is 40 MiB, 25 % over the article's 32 MB:
    # the row says so, and a claim made for other sizes is at most partially supported.
    r = memory_row(40.0, 10.0)
    assert r.verdict == P and "The exact index at 1M tokens is 40.0 MiB here" in r.reason, r.reason
    # 32 MB read as decimal (32e6 bytes / 2^20 tokens = 30.52 B/token) also counts as the article's size.
    r = memory_row(32e6 / ONE_M, 32e6 / ONE_M / 4)
    assert r.verdict == S and "The exact index at 1M" not in r.reason, r.reason


# --------------------------------------------------------------------------------------------------- macs
def test_macs_claim_is_the_reduction_against_75_percent():
    def row(pooled):
        return claim(results([{"exact_macs_per_query": 1000.0, "macs_per_query": pooled}]), "macs")
    r = row(300.0)  # 1 - 300/1000 = 70 % fewer; 0.70 / 0.75 = 93.3 %: partially
    assert r.verdict == P and r.measured.startswith("70.00% fewer"), r.measured
    assert row(250.0).verdict == S  # 75 % exactly
    assert row(272.0).verdict == S  # 72.8 % = 97.07 % of 75 %
    assert row(274.0).verdict == P  # 72.6 % = 96.8 % of 75 %
    assert row(399.0).verdict == P  # 60.1 % = 80.13 % of 75 %
    assert row(401.0).verdict == NS  # 59.9 % = 79.87 % of 75 %
    # 60 % exactly is 80 % of 75 %, a boundary "reaches" includes; in floats 0.6 / 0.75 = 0.7999999999999999
    # (it was judged not supported).
    assert claims.reach(1 - 400 / 1000, 0.75) == P
    assert row(400.0).verdict == P


def test_a_zero_in_the_results_gives_not_measured_not_a_crash():
    # A pooled side timed at 0 ms or an index of 0 bytes per token: the ratio is infinite, and the report says
    # "not measured" for that claim (it raised ZeroDivisionError and no report was written).
    lat = claim(latency_rows([(6.0, 6.0)], [(0.0, 0.0)]), "latency")
    assert lat.verdict == NM and "not finite" in lat.reason, (lat.verdict, lat.reason)
    mem = memory_row(32.0, 0.0)
    assert mem.verdict == NM and "inf" in mem.measured, (mem.verdict, mem.measured)


# ------------------------------------------------------------------------------------------------ latency
def latency_rows(exact, pooled, run=("cuda", A100)):
    """GPU points of the exact indexer and hybrid G = 4, one per seed: exact / pooled are lists of
    (score_ms, topk_ms)."""
    out = []
    for w, times in (("exact", exact), ("hybrid", pooled)):
        for seed, (s, t) in enumerate(times):
            out.append({"pool.weighting": w, "workload.seed": seed, "score_ms": s, "topk_ms": t,
                        "backend": run[0], schema.RUN_BACKEND: run[0], schema.RUN_DEVICE: run[1]})
    return results(out)


def test_latency_claim_is_score_plus_topk_against_4x():
    # 6 + 6 = 12 ms -> 2.9 + 0.1 = 3.0 ms: 4.00x, at the article's absolute latencies: supported. (Scoring
    # alone would be 6 / 2.9 = 2.07x: the latency is scoring + top-k.)
    r = claim(latency_rows([(6.0, 6.0)], [(2.9, 0.1)]), "latency")
    assert r.verdict == S and "(4.00×)" in r.measured, r.measured
    assert "12.000 ms → 3.000 ms" in r.measured and "Absolute latencies differ" not in r.reason, r
    # 12 -> 3.2 ms: 3.75x = 93.75 % of 4x: partially (the A100 throughput's 3.6x is not this claim's bar).
    r = claim(latency_rows([(10.0, 2.0)], [(3.0, 0.2)]), "latency")
    assert r.verdict == P and "(3.75×)" in r.measured, r.measured
    # 24 -> 6 ms: 4.00x, but not the article's 12 ms / 3 ms (more than 20 % off): partially, saying so.
    r = claim(latency_rows([(20.0, 4.0)], [(5.0, 1.0)]), "latency")
    assert r.verdict == P and "Absolute latencies differ from 12 ms / 3 ms" in r.reason, r.reason


def test_latency_claim_is_the_median_over_seeds():
    # Exact indexer 12, 12, 30 ms over three seeds (median 12, mean 18), hybrid 3 ms each: 12 / 3 = 4.00x on
    # medians (the mean would say 6.00x).
    r = claim(latency_rows([(10.0, 2.0), (10.0, 2.0), (25.0, 5.0)], [(2.5, 0.5)] * 3), "latency")
    assert "(4.00×)" in r.measured and "6.00×" not in r.measured, r.measured
    assert "12.000 ms (median of 3 seeds, range 12.000–30.000)" in r.measured, r.measured
    assert r.verdict == S and "Speed-up 4.00×" in r.reason, r.reason


def test_latency_claim_is_not_judged_off_a_gpu():
    # CPU timings at 4x: shown, not judged.
    r = claim(latency_rows([(6.0, 6.0)], [(2.9, 0.1)], run=("cpu", "x86 CPU")), "latency")
    assert r.verdict == NM and "cpu: " in r.measured and "CPU-backend timings only" in r.reason, r.reason
    # An old file's run_backend is the configured backend: "auto" does not say the points ran on a GPU.
    r = claim(latency_rows([(6.0, 6.0)], [(2.9, 0.1)], run=("auto", "")), "latency")
    assert r.verdict == NM, (r.verdict, r.reason)
    # ... nor that they ran on the CPU: the reason says the backend is not recorded.
    assert "CPU-backend" not in r.reason and "backend is not recorded (backend = auto" in r.reason, r.reason


# --------------------------------------------------------------------------------------------- throughput
def test_throughput_claim_is_the_build_rate_against_1_2m_tokens_per_s():
    # One point; three steps of 1.2M context tokens, the index built in the first only (pool_ms 1200; 0 in the
    # others: no build, not an infinitely fast one): 1.2e6 / 1.2 s = 1.0 M tokens/s = 83 % of 1.2 M: partially.
    steps = pd.DataFrame({"file": BASE["file"], "index": 0, "request": 0, "step": [0, 1, 2],
                          "context_tokens": 1.2e6, "pool_ms": [1200.0, 0.0, 0.0], "score_ms": [1.0, 1.0, 1.0]})
    r = claim(results([{"pool_ms": 1200.0, "score_ms": 1.0, "tokens": 1.2e6}], steps), "throughput")
    assert r.verdict == P and "index build 1.00 M tokens/s" in r.measured, (r.verdict, r.measured)
    assert "1.00 M tokens/s vs 1.2 M" in r.reason, r.reason


def test_throughput_claim_is_the_median_over_points():
    # No steps table: per point tokens / pool_ms: 1.2M / 1 s, 1.2M / 1 s, 1.2M / 4 s = 1.2, 1.2, 0.3 M tokens/s;
    # the median 1.2 M: supported (the mean, 0.9 M, would be 75 %: not supported).
    r = claim(results([{"workload.seed": s, "pool_ms": ms, "score_ms": 1.0, "tokens": 1.2e6}
                       for s, ms in enumerate((1000.0, 1000.0, 4000.0))]), "throughput")
    assert r.verdict == S and "index build 1.20 M tokens/s" in r.measured, (r.verdict, r.measured)


def test_throughput_claim_needs_every_device_an_a100():
    # 1.2 M tokens/s, but one of the two points ran on an H100: not the claim's device, at most partially.
    r = claim(results([{"workload.seed": s, "pool_ms": 1000.0, "score_ms": 1.0, "tokens": 1.2e6,
                        schema.RUN_DEVICE: dev} for s, dev in enumerate((A100, "NVIDIA H100 80GB HBM3"))]),
              "throughput")
    assert r.verdict == P and "not an A100" in r.reason, (r.verdict, r.reason)


def test_throughput_claim_is_not_judged_off_a_gpu():
    # CPU rates: shown, not judged; an old file's backend = auto (run_backend not recorded) is not called CPU.
    for run, says in ((("cpu", "x86 CPU"), "CPU-backend timings only"),
                      (("auto", ""), "timings of 2 points whose backend is not recorded (backend = auto")):
        r = claim(results([{"workload.seed": s, "pool_ms": 1000.0, "score_ms": 1.0, "tokens": 1.2e6, "backend": run[0],
                            schema.RUN_BACKEND: run[0], schema.RUN_DEVICE: run[1]} for s in range(2)]), "throughput")
        assert r.verdict == NM and says in r.reason, (run, r.verdict, r.reason)


# ------------------------------------------------------------------------------------------------ hit rates
def hit_rows(l1, l2, l3, overall, context=TWO_M):
    return results([{"cache_l1_hit_rate": l1, "cache_l2_hit_rate": l2, "cache_l3_hit_rate": l3,
                     schema.CACHE_HIT_RATE: overall, "cache.levels": "lru:1MiB clock:2MiB semantic:4MiB",
                     "context": float(context), "tokens": float(context)}])


def test_hit_rates_exactly_two_points_short_count():
    # RULES: a tier counts when it is at most 2 points below the article's rate: 90/83/76 % and 86 % overall
    # at 2M tokens are each exactly 2 points short: supported.
    res = hit_rows(0.90, 0.83, 0.76, 0.86)
    assert claim(res, "tier_hits").verdict == S and claim(res, "overall_hits").verdict == S
    # A hundredth of a point more short in one tier (L3 75.99 %) or overall (85.99 %): not supported.
    res = hit_rows(0.90, 0.83, 0.7599, 0.8599)
    assert claim(res, "tier_hits").verdict == NS and "L3 2.0 points short" in claim(res, "tier_hits").reason
    assert claim(res, "overall_hits").verdict == NS


# ------------------------------------------------------------------------------------------------ accuracy
def accuracy_row(exact_mass, pooled_mass, pooled_token_recall=0.3):
    rows = [{"pool.weighting": w, "mass_recall": m, "token_recall": t, "output_error": e}
            for w, m, t, e in (("exact", exact_mass, 1.0, 0.01), ("hybrid", pooled_mass, pooled_token_recall, 0.02))]
    return claim(results(rows), "accuracy")


def test_accuracy_claim_is_the_relative_loss_of_mass_recall_under_2_percent():
    # (0.5 - 0.48975) / 0.5 = 2.05 % < 2 % * 1.03 = 2.06 %: within the claim, on the proxy only: partially.
    # (Relative to the pooled scheme's recall it would be 2.09 %; token recall, 0.3, is not the proxy.)
    r = accuracy_row(0.5, 0.48975)
    assert r.verdict == P and "2.05% loss" in r.measured, (r.verdict, r.measured)
    assert "0.5000 (exact indexer) → 0.4897 (hybrid)" in r.measured or \
        "0.5000 (exact indexer) → 0.4898 (hybrid)" in r.measured, r.measured
    r = accuracy_row(0.5, 0.4875)  # 2.5 % loss: more than 2 % (and than 2.06 %): not supported
    assert r.verdict == NS and "2.50% loss" in r.measured, (r.verdict, r.measured)
    assert accuracy_row(0.5, 0.5).verdict == P  # no loss: still only the proxy


# -------------------------------------------------------------------------------------------------- hybrid
def hybrid_points(budgets):
    """Pure sparse at k and the hybrid at k - 128 + a 128-token window, per budget k: (sparse, hybrid) layer_ms."""
    out = []
    for k, (s_ms, h_ms) in budgets.items():
        for on, topk, ms, err, mass in ((False, k, s_ms, 0.2, 0.7), (True, k - 128, h_ms, 0.1, 0.8)):
            out.append({schema.HYBRID_ENABLED: on, schema.TOPK: topk, schema.HYBRID_WINDOW: 128,
                        schema.HYBRID_COMBINE: "gate:0.25", schema.LAYER_MS: ms, schema.LAYER_OUTPUT_ERROR: err,
                        schema.LAYER_MASS_RECALL: mass, "pool.weighting": "uniform"})
    return results(out)


def test_hybrid_claim_is_judged_at_the_largest_matched_budget_against_2_3x():
    # 2.1 / 1.0 = 2.10x at 256 tokens, 4.6 / 2.0 = 2.30x at 512: judged at 512, supported; 256 listed.
    r = claim(hybrid_points({256: (2.1, 1.0), 512: (4.6, 2.0)}), "hybrid")
    assert r.verdict == S and "(2.30×) at 512 tokens" in r.measured and "256: 2.10×" in r.measured, r.measured
    assert "layer output error 0.2000 → 0.1000" in r.measured, r.measured  # sparse -> hybrid
    assert "covered (fraction) 0.7000 → 0.8000" in r.measured, r.measured
    # 2.10x alone: 91 % of 2.3x: partially.
    r = claim(hybrid_points({256: (2.1, 1.0)}), "hybrid")
    assert r.verdict == P and "Speed-up 2.10× vs 2.3×" in r.reason, (r.verdict, r.reason)


# ------------------------------------------------------------------------------------- what a claim reads
def test_throughput_claim_is_not_judged_on_batched_gpu_times():
    # Every GPU point ran select.batched (its pool_ms is of the whole batch): per-request rates cannot be read
    # from them, so the claim is not measured, even though 1.2M tokens / 1 s would be exactly 1.2 M tokens/s.
    r = claim(results([{"pool_ms": 1000.0, "score_ms": 1.0, "tokens": 1.2e6, schema.BATCHED: True}]), "throughput")
    assert r.verdict == NM and "batched" in r.reason, (r.verdict, r.reason)


def test_latency_claim_needs_both_indexers_on_the_gpu():
    # The exact indexer ran on cuda and cpu, hybrid on cpu only: no GPU comparison, whatever the CPU shows.
    rows = [{"pool.weighting": w, "score_ms": s, "topk_ms": 0.0, "backend": be, schema.RUN_BACKEND: be,
             schema.RUN_DEVICE: dev}
            for w, s, be, dev in (("exact", 12.0, "cuda", A100), ("exact", 12.0, "cpu", "x86"),
                                  ("hybrid", 3.0, "cpu", "x86"))]
    r = claim(results(rows), "latency")
    assert r.verdict == NM and "No GPU point of both the exact indexer and hybrid" in r.reason, (r.verdict, r.reason)


def test_other_values_are_the_mean_over_seeds():
    # RULES: several seeds, times the median, other values the mean. Mass recall over three seeds: exact 0.5
    # each, hybrid 0.49, 0.49, 0.46 (mean 0.48, median 0.49): loss (0.5 - 0.48) / 0.5 = 4.00 %: not supported
    # (the median would give 2.00 %, within the claim).
    rows = [{"pool.weighting": w, "workload.seed": s, "mass_recall": m, "token_recall": 0.5, "output_error": 0.1}
            for s, m in enumerate((0.49, 0.49, 0.46)) for w, m in (("exact", 0.5), ("hybrid", m))]
    r = claim(results(rows), "accuracy")
    assert r.verdict == NS and "4.00% loss" in r.measured and "3 seeds each" in r.source, (r.verdict, r.measured)


def test_hybrid_claim_takes_the_largest_context():
    # At 1M tokens 2.30x, at 512Ki 1.00x: the claim is judged at the largest context (1M).
    a = hybrid_points({256: (2.3, 1.0)}).points
    b = hybrid_points({256: (1.0, 1.0)}).points.assign(context=float(ONE_M // 2), tokens=float(ONE_M // 2))
    both = pd.concat([a, b.assign(index=b["index"] + 100)], ignore_index=True)
    r = claim(results(both.drop(columns=["index"]).to_dict("records")), "hybrid")
    assert r.verdict == S and "(2.30×)" in r.measured and r.source.startswith("T = 1Mi tokens"), (r.measured, r.source)


def test_overall_hit_rate_names_an_upper_bound_below_the_claim():
    # OPT on one cache of the tiers' total capacity reaches 85 % < 86 %: no policies can make 88 % within 2 points.
    res = hit_rows(0.90, 0.83, 0.76, 0.80)
    res.points[schema.CACHE_OPT_SINGLE_HIT_RATE] = 0.85
    r = claim(res, "overall_hits")
    assert r.verdict == NS and "8.0 points short" in r.reason, r.reason
    assert "No policies reach 88% on this trace with these capacities: the upper bound" in r.reason, r.reason
    assert "85.0%" in r.reason, r.reason
    res.points[schema.CACHE_OPT_SINGLE_HIT_RATE] = 0.87  # a bound above 86 %: nothing to say
    assert "No policies reach" not in claim(res, "overall_hits").reason


def test_an_infinite_measured_value_gets_no_verdict():
    # An exact multiply-add count of inf gives a "100.00% fewer" reduction from "inf M": no verdict on it.
    r = claim(results([{"exact_macs_per_query": float("inf"), "macs_per_query": 250.0}]), "macs")
    assert r.verdict == NM and "inf" in r.measured and "missing or not finite" in r.reason, (r.verdict, r.measured)


def test_a_compared_side_without_values_is_named():
    # The exact indexer has mass recall, hybrid none: the comparison is not measured, naming hybrid's column.
    rows = [{"pool.weighting": w, "mass_recall": m, "token_recall": 0.5, "output_error": 0.1}
            for w, m in (("exact", 0.5), ("hybrid", float("nan")))]
    r = claim(results(rows), "accuracy")
    assert r.verdict == NM and "no value of mass_recall at the finished point of hybrid at G = 4" in r.reason, \
        r.reason
