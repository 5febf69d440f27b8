"""analysis/figures.py's data selection helpers, pinned on hand-made tables (no runner needed): the reference G,
the tokens attention reads, the slice a figure over one axis draws, the hybrid speed-up's medians. Expected
values are computed by hand in the comments. Added by the mutation-testing audit of figures.py."""
import os
import sys

import numpy as np
import pandas as pd

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from analysis import schema  # noqa: E402
from analysis.figures import _reference_g, _where_varies, attended_tokens, matched_speedup  # noqa: E402

W, G = "pool.weighting", "pool.group_size"


def test_reference_g_is_4_else_the_middle_pooled_g():
    df = pd.DataFrame({W: ["exact", "uniform", "uniform", "uniform"], G: [1, 2, 4, 8]})
    assert _reference_g(df) == 4
    # No G = 4: the middle of the pooled schemes' Gs (2, 8, 16 -> 8); the exact indexer's G is not counted.
    df = pd.DataFrame({W: ["exact", "uniform", "uniform", "uniform"], G: [32, 2, 8, 16]})
    assert _reference_g(df) == 8
    assert _reference_g(pd.DataFrame({W: ["exact"], G: [4]})) is None


def test_attention_reads_whole_groups_never_more_than_the_context():
    # k = 256 at G = 3: ceil(256 / 3) = 86 groups = 258 tokens; a 100-token context holds only 100.
    pooled = pd.DataFrame({schema.TOPK: [256], W: ["uniform"], G: [3]})
    assert list(attended_tokens(pooled, [100.0, 4096.0])) == [100.0, 258.0]
    exact = pd.DataFrame({schema.TOPK: [256], W: ["exact"], G: [3]})
    assert list(attended_tokens(exact, [100.0, 4096.0])) == [100.0, 256.0]


def test_where_varies_takes_the_largest_value_at_which_the_axis_varies():
    # Precision varies at 2Ki and 4Ki, not at 8Ki: the slice is 4Ki's rows.
    df = pd.DataFrame({"context": [2048, 2048, 4096, 4096, 8192], "pool.precision": ["fp32", "fp8"] * 2 + ["fp32"]})
    d = _where_varies(df, "pool.precision", "context")
    assert list(d.index) == [2, 3]


def test_hybrid_speedup_is_the_ratio_of_medians_from_one_sweep():
    # Sweep a (5 points): sparse 2, 2, 8 ms (median 2, mean 4), hybrid 1, 1 ms at budget 256: 2.0x (not 4.0x).
    # Sweep b (2 points, fewer): sparse 10, hybrid 1 at the same budget: not pooled with a, not drawn.
    df = pd.DataFrame({schema.HYBRID_ENABLED: [False, False, False, True, True, False, True],
                       schema.LAYER_MS: [2.0, 2.0, 8.0, 1.0, 1.0, 10.0, 1.0],
                       schema.TOKEN_BUDGET: [256.0] * 7, "attr.sweep_id": ["a"] * 5 + ["b"] * 2})
    sp = matched_speedup(df)
    assert list(sp.index) == [256.0] and sp.iloc[0] == 2.0
    assert np.isclose(matched_speedup(df[df["attr.sweep_id"] == "b"]).iloc[0], 10.0)


def test_latency_figure_leaves_out_stages_that_did_not_run():
    # Two contexts; at 2Ki the attention stage did not run (attention_ms 0: no attention stage), at 4Ki it took
    # 2 ms. The attention panels draw 4Ki only (a 0 ms time has no place on a log axis and no finite rate); the
    # scoring panels both contexts. Rate at 4Ki: k = 256 attended tokens / 2 ms = 128,000 tokens/s.
    import matplotlib.pyplot as plt
    from analysis.figures import fig_latency
    from analysis.load import Results
    base = {"status": "ok", "file": "/synthetic/l.h5", "attr.sweep_id": "s", "attr.config_path": "c.ini",
            "attr.argv": "", "backend": "cpu", schema.RUN_BACKEND: "cpu", schema.RUN_DEVICE: "x86", W: "uniform",
            G: 4, "pool.precision": "fp32", schema.TOPK: 256, "workload.seed": 0, "pool_ms": 1.0, "score_ms": 1.0,
            "topk_ms": 1.0}
    pts = pd.DataFrame([{**base, "index": i, "context": t, "tokens": t, "attention_ms": a}
                        for i, (t, a) in enumerate(((2048.0, 0.0), (4096.0, 2.0)))])
    res = Results(points=pts, files=[])
    res._detail[schema.STEPS] = pd.DataFrame()
    fig = fig_latency(res)
    ax = {a.get_ylabel().replace("\n", " "): a for a in fig.axes}

    def xy(a):
        (c,) = a.containers
        return [round(float(x)) for x in c.lines[0].get_xdata()], [float(y) for y in c.lines[0].get_ydata()]
    assert xy(ax["attention time per step (ms)"]) == ([4096], [2.0])
    assert xy(ax["attention throughput (attended tokens/s)"]) == ([4096], [128000.0])
    assert xy(ax["scoring time per step (ms)"])[0] == [2048, 4096]
    plt.close(fig)


def _results(rows, steps=None):
    from analysis.load import Results
    base = {"status": "ok", "file": "/synthetic/h.h5", "attr.sweep_id": "s", "backend": "cpu",
            schema.RUN_BACKEND: "cpu", W: "uniform", G: 4, "context": 2048.0, "workload.seed": 0}
    res = Results(points=pd.DataFrame([{**base, "index": i, **r} for i, r in enumerate(rows)]), files=[])
    res._detail[schema.STEPS] = pd.DataFrame() if steps is None else steps
    return res


def test_hybrid_rows_keep_only_backends_that_ran_both_layers():
    # cpu ran pure sparse and the hybrid; cuda only pure sparse (same sweep): cuda's points compare with nothing
    # and would pool into the cpu sparse median; they are left out.
    from analysis.figures import hybrid_rows
    rows = [{schema.HYBRID_ENABLED: on, schema.TOPK: k, schema.HYBRID_WINDOW: 128, schema.LAYER_MS: ms,
             schema.LAYER_OUTPUT_ERROR: 0.1, schema.LAYER_MASS_RECALL: 0.9, "backend": be, schema.RUN_BACKEND: be}
            for on, k, ms, be in ((False, 256, 2.3, "cpu"), (True, 128, 1.0, "cpu"), (False, 256, 0.1, "cuda"))]
    d = hybrid_rows(_results(rows))
    assert list(d["index"]) == [0, 1] and list(d[schema.TOKEN_BUDGET]) == [256.0, 256.0]


def test_paired_change_pairs_only_with_one_matching_base_point():
    # The fp8 point (index 2) matches two fp32 points in every listed setting (they differ only in a column
    # that is not a setting): no pair rather than a wrong one. With one fp32 point: the per-step differences.
    from analysis.figures import _paired_change
    steps = pd.DataFrame([{"file": "/synthetic/h.h5", "index": i, "request": 0, "step": s, "token_recall": v}
                          for i, vals in enumerate(([1.0, 1.0], [0.5, 0.5], [0.75, 0.5])) for s, v in enumerate(vals)])
    res = _results([{"pool.precision": p, "extra": x} for p, x in (("fp32", 1), ("fp32", 2), ("fp8", 1))], steps)
    assert _paired_change(res, res.ok, "fp32", "fp8", "token_recall").empty
    one = res.ok[res.ok["index"] != 1]
    assert list(_paired_change(res, one, "fp32", "fp8", "token_recall")) == [-0.25, -0.5]
