"""analysis/common.py's aggregation, pinned on hand-made tables (no runner needed): summarize()'s centres and
error bars (over seeds: mean +- 1 s.d. with n - 1, times the median and range; one point: its decode steps,
times the 25th-75th percentile of the timed steps, a batched step once, re-pooled fractions after the first
step), sweeps never pooled, fix_others()'s preferred and largest values, per_request_times(). Expected values
are computed by hand in the comments. Added by the mutation-testing audit of common.py."""
import math
import os
import sys

import pandas as pd
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from analysis import schema  # noqa: E402
from analysis.common import fix_others, per_request_times, summarize  # noqa: E402
from analysis.load import Results  # noqa: E402

F = "/synthetic/a.h5"
BASE = {"status": "ok", "file": F, "attr.sweep_id": "s1", "pool.weighting": "hybrid", "pool.group_size": 4,
        "pool.precision": "fp32", "context": 4096.0, "workload.seed": 0, "backend": "cpu",
        schema.RUN_BACKEND: "cpu", schema.RUN_DEVICE: "x86"}


def results(rows, steps=None):
    pts = pd.DataFrame([{**BASE, "index": i, **r} for i, r in enumerate(rows)])
    res = Results(points=pts, files=[])
    res._detail[schema.STEPS] = pd.DataFrame() if steps is None else steps
    return res


def one(res, metric, by=("pool.weighting",)):
    s, kinds = summarize(res, res.ok, list(by), metric)
    assert len(s) == 1, s
    return s.iloc[0], kinds


# ----------------------------------------------------------------------------------------- over seeds
def test_seeds_mean_and_sample_standard_deviation():
    # 0.2, 0.4, 0.9: mean 0.5; s.d. with n - 1: sqrt((0.09 + 0.01 + 0.16) / 2) = sqrt(0.13) = 0.360555
    # (with n it would be sqrt(0.26 / 3) = 0.294392).
    r, kinds = one(results([{"workload.seed": s, "mass_recall": v} for s, v in enumerate((0.2, 0.4, 0.9))]),
                   "mass_recall")
    assert r["center"] == pytest.approx(0.5) and r["n"] == 3
    assert r["lo"] == pytest.approx(0.5 - math.sqrt(0.13)) and r["hi"] == pytest.approx(0.5 + math.sqrt(0.13))
    assert kinds == {"±1 s.d. over 3 seeds"}
    # Two seeds are already repeats: 0.2, 0.4 -> 0.3 +- 0.141421 (sqrt(0.02)).
    r, kinds = one(results([{"workload.seed": s, "mass_recall": v} for s, v in enumerate((0.2, 0.4))]), "mass_recall")
    assert r["center"] == pytest.approx(0.3) and r["hi"] == pytest.approx(0.3 + math.sqrt(0.02)) and r["n"] == 2
    assert kinds == {"±1 s.d. over 2 seeds"}


def test_seed_times_are_the_median_and_range():
    # 1, 2, 10 ms: median 2 (the mean would be 4.33), bars 1..10.
    r, kinds = one(results([{"workload.seed": s, "score_ms": v} for s, v in enumerate((1.0, 2.0, 10.0))]), "score_ms")
    assert (r["center"], r["lo"], r["hi"]) == (2.0, 1.0, 10.0)
    assert kinds == {"times: median and range over 3 seeds"}


def test_repeats_of_one_seed_are_called_repeated_points():
    r, kinds = one(results([{"workload.seed": 0, "mass_recall": v} for v in (0.2, 0.4)]), "mass_recall")
    assert r["center"] == pytest.approx(0.3) and kinds == {"±1 s.d. over 2 repeated points"}, kinds


def test_points_of_different_sweeps_are_not_pooled_the_main_sweep_is_drawn():
    # Sweep s1 has three points (0.2, 0.4, 0.9), sweep s2 one (0.0): the group draws s1's alone (0.5 over 3
    # seeds), not the four pooled (0.375), not s2's.
    rows = [{"workload.seed": s, "mass_recall": v} for s, v in enumerate((0.2, 0.4, 0.9))]
    rows.append({"workload.seed": 0, "mass_recall": 0.0, "attr.sweep_id": "s2"})
    r, kinds = one(results(rows), "mass_recall")
    assert r["center"] == pytest.approx(0.5) and r["n"] == 3
    assert any(k.startswith("not pooled across sweeps: at weighting = hybrid several sweeps have points, drawn: "
                            "sweep s1") for k in kinds), kinds


# ------------------------------------------------------------------------------------- one point's steps
def steps_of(index, col, values, requests=(0,)):
    return pd.DataFrame([{"file": F, "index": index, "request": q, "step": i, col: v}
                         for q in requests for i, v in enumerate(values)])


def test_one_point_time_bars_are_the_quartiles_of_its_timed_steps():
    # pool_ms per step 0, 1, 2, 3, 4: the 0 is a step that did not build the index (not a time); the timed steps
    # 1..4 have quartiles 1.75 and 3.25 (linear interpolation); the centre is the point's own value.
    res = results([{"pool_ms": 2.5}], steps_of(0, "pool_ms", [0.0, 1.0, 2.0, 3.0, 4.0]))
    r, kinds = one(res, "pool_ms")
    assert (r["center"], r["lo"], r["hi"]) == (2.5, 1.75, 3.25)
    assert kinds == {"25th–75th percentile over 4 decode steps"}


def test_one_point_recall_bars_are_the_sample_sd_of_its_steps():
    # mass_recall per step 0.1, 0.2, 0.3, 0.4: s.d. sqrt(0.05 / 3) = 0.129099 around the point's 0.25.
    res = results([{"mass_recall": 0.25}], steps_of(0, "mass_recall", [0.1, 0.2, 0.3, 0.4]))
    r, kinds = one(res, "mass_recall")
    s = math.sqrt(0.05 / 3)
    assert r["center"] == 0.25 and r["lo"] == pytest.approx(0.25 - s) and r["hi"] == pytest.approx(0.25 + s)
    assert kinds == {"±1 s.d. over 4 decode steps"}


def test_a_batched_gpu_step_time_counts_once():
    # A batched GPU point's steps table repeats the batch's step time in each request's row: 4 steps, not 8.
    res = results([{"score_ms": 2.5, schema.BATCHED: True, "backend": "cuda", schema.RUN_BACKEND: "cuda"}],
                  steps_of(0, "score_ms", [1.0, 2.0, 3.0, 4.0], requests=(0, 1)))
    r, kinds = one(res, "score_ms")
    assert (r["lo"], r["hi"]) == (1.75, 3.25) and kinds == {"25th–75th percentile over 4 decode steps"}, kinds


def test_repooled_fraction_bars_leave_the_first_step_out():
    # The first step builds the index (fraction 1.0, no re-pooling decision): the range of 0.2, 0.5, 0.3.
    res = results([{"repooled_fraction_mean": 1 / 3}], steps_of(0, "repooled_fraction", [1.0, 0.2, 0.5, 0.3]))
    r, kinds = one(res, "repooled_fraction_mean")
    assert (r["lo"], r["hi"]) == (0.2, 0.5) and kinds == {"range over 3 decode steps after the first"}, kinds


# ------------------------------------------------------------------------------------------ slicing
def test_fix_others_takes_the_preferred_value_else_the_largest_context():
    # Three fp8 points and one fp32: fp32 is the preferred precision (not the most common); of 2Ki and 4Ki, 4Ki.
    df = results([{"pool.precision": p, "context": t, "mass_recall": 0.5}
                  for p, t in (("fp8", 2048.0), ("fp8", 4096.0), ("fp8", 4096.0), ("fp32", 4096.0),
                               ("fp32", 2048.0))]).ok
    d, note = fix_others(df, keep=("pool.weighting",))
    assert list(d["index"]) == [3] and note == "precision = fp32, T = 4Ki", note
    # A key with no preferred value: its most common value (H = 2, two points, over H = 4, one).
    df = results([{"pool.weighting": w, "workload.index_heads": h}
                  for w, h in (("exact", 2), ("exact", 2), ("exact", 4))]).ok
    d, note = fix_others(df, keep=("pool.weighting",))
    assert list(d["index"]) == [0, 1] and note == "H = 2", note


def test_per_request_times_drop_batched_gpu_points_only():
    # A batched cuda point (its times are the batch's) goes; a batched cpu point ran request by request, stays.
    df = results([{schema.BATCHED: b, "backend": be, schema.RUN_BACKEND: be}
                  for b, be in ((True, "cuda"), (True, "cpu"), (False, "cuda"))]).ok
    d, note = per_request_times(df, "x")
    assert list(d["index"]) == [1, 2] and note == "1 batched GPU points left out (their times are of the whole batch)"
