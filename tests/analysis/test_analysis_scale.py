"""The analysis's scaled paths give the answers of reading every point: Results.detail of a subset of points,
detail_keys, step_groups of some points, the figures and claims that read only the points they use, and
load's _complete (its columns built at once) against the column-by-column version it replaced.

Results files come from the real indexpool binary (INDEXPOOL_BIN, as in test_analysis.py)."""
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from analysis import FAMILIES, claims, load, schema  # noqa: E402
from analysis.common import G, PREC, W, step_groups, summarize  # noqa: E402
L = sys.modules["analysis.load"]  # the module (the package exports its load function as load)

# Tiny points: 2 contexts x 3 schemes x 2 G x 2 precisions x 3 seeds, and a context the memory limit skips
# (not ok).
SWEEP = """
[workload]
tokens = 1Ki, 2Ki, 64Ki
dim = 32
index_heads = 2
attn_dim = 32
attn_heads = 1
value_dim = 32
steps = 3
seed = 0, 1, 2

[pool]
weighting = exact, uniform, tfidf
group_size = 2, 4
precision = fp32, fp16

[select]
topk_tokens = 64
"""
# A second sweep with other axes (requests), read with the shards of the first.
OTHER = """
[workload]
tokens = 1Ki
dim = 32
index_heads = 2
attn_dim = 32
attn_heads = 1
value_dim = 32
steps = 2
requests = 1, 2

[pool]
weighting = tfidf, exact
group_size = 4

[select]
topk_tokens = 64
"""
DETAILS = (schema.STEPS, schema.CACHE_LEVELS, schema.CACHE_MRC, schema.COUNTERS)


def indexpool_bin():
    b = os.environ.get("INDEXPOOL_BIN") or os.path.join(ROOT, "build", "experiments", "indexpool")
    if not os.access(b, os.X_OK):
        pytest.fail(f"indexpool binary not found at {b} (build it with `make build`, or set INDEXPOOL_BIN)")
    return b


def run(tmp, name, text, *extra):
    cfg = tmp / f"{name}.ini"
    cfg.write_text(text)
    out = tmp / f"{name}.h5"
    subprocess.run([indexpool_bin(), "run", str(cfg), "--overwrite", "--set", f"output.path={out}",
                    "--set", "sweep.memory_limit=24Mi", *extra], check=True, capture_output=True, timeout=120)
    return str(out)


@pytest.fixture(scope="session")
def paths(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("scale")
    shards = [run(tmp, f"shard{i}", SWEEP, "--shard", f"{i}/3") for i in range(3)]
    return shards + [run(tmp, "other", OTHER)]


def fresh(paths):
    return load(paths)


_FULL = {}


def full_reader(paths):
    """Results whose every detail table is read whole first: the old path (every point read, then filtered).
    One per set of files (what the tests add to it are caches of the same tables)."""
    key = tuple(paths)
    if key not in _FULL:
        r = _FULL[key] = load(paths)
        for name in DETAILS:
            r.detail(name)
    return _FULL[key]


def keys_of(df):
    return list(zip(df["file"], df["index"]))


def test_the_files_hold_what_the_tests_need(paths):
    r = fresh(paths)
    assert len(r.files) == 4 and r.points["attr.sweep_id"].nunique() == 2
    assert (r.points["status"] != "ok").any() and (r.points["status"] == "ok").sum() > 70
    assert len(r.detail(schema.STEPS)) and len(r.detail(schema.CACHE_MRC)) and len(r.detail(schema.CACHE_LEVELS))


@pytest.mark.parametrize("name", DETAILS)
def test_detail_of_some_points_is_the_full_detail_filtered(paths, name):
    full = full_reader(paths).detail(name)
    r = fresh(paths)
    ok = r.ok
    pts = r.points
    rng = np.random.default_rng(7)
    picks = [keys_of(ok.iloc[rng.permutation(len(ok))[:n]]) for n in (1, 5, len(ok) // 2)]
    picks.append(keys_of(pts))  # every point: the ones not ok are left out
    picks.append(keys_of(pts[pts["status"] != "ok"]))  # none ok: nothing
    picks.append([(pts["file"].iloc[0], 999999), ("/no/such/file.h5", 0)])  # unknown points: nothing
    picks.append([])
    for keys in picks:
        got = r.detail(name, keys=keys)
        if full.empty:
            assert got.empty
            continue
        want = full[[k in set((f, int(i)) for f, i in keys) for k in zip(full["file"], full["index"])]]
        want = want.reset_index(drop=True)
        if want.empty:
            assert got.empty
            continue
        pd.testing.assert_frame_equal(got, want, check_exact=True)
        # The same from a Results that holds the whole table (the filter path).
        pd.testing.assert_frame_equal(full_reader(paths).detail(name, keys=keys), want, check_exact=True)
    # After subsets were read, the whole table is still the one read at once.
    pd.testing.assert_frame_equal(r.detail(name), full, check_exact=True)


def test_full_detail_equals_a_frame_per_point(paths):
    """detail() builds one frame from the points' arrays: the frame of the old reading, a frame per point with
    its text decoded, concatenated."""
    import h5py
    r = fresh(paths)
    for name in (schema.STEPS, schema.CACHE_LEVELS, schema.CACHE_MRC):
        frames = []
        for path, rows in r.ok.groupby("file", sort=False):
            with h5py.File(path, "r") as f:
                for idx in rows["index"]:
                    ds = f.get(f"point_{int(idx):06d}/{name}")
                    if ds is None:
                        continue
                    d = pd.DataFrame(ds[:])
                    for c in d.columns:
                        if d[c].dtype == object:
                            d[c] = d[c].map(L._text)
                    d.insert(0, "index", int(idx))
                    d.insert(0, "file", path)
                    frames.append(d)
        pd.testing.assert_frame_equal(r.detail(name), pd.concat(frames, ignore_index=True), check_exact=True)
    assert r.detail(schema.CACHE_LEVELS)["policy"].map(type).eq(str).all()


def test_detail_frame_with_record_types_that_differ():
    """Points whose tables have other fields: joined as pandas joins a frame per point (the slow path)."""
    a = np.array([(1, 0.5, b"lru")], dtype=[("level", "<i8"), ("hit_rate", "<f8"), ("policy", "S8")])
    b = np.array([(2, 0.25), (3, 0.125)], dtype=[("level", "<i4"), ("hit_rate", "<f8")])
    items = [(("x.h5", 0), a), (("x.h5", 1), b), (("y.h5", 4), a[:0])]
    want = []
    for (path, idx), arr in items:
        d = pd.DataFrame(arr)
        for c in d.columns:
            if d[c].dtype == object:
                d[c] = d[c].map(L._text)
        d.insert(0, "index", int(idx))
        d.insert(0, "file", path)
        want.append(d)
    pd.testing.assert_frame_equal(L._detail_frame(items), pd.concat(want, ignore_index=True), check_exact=True)
    same = [(("x.h5", 0), a), (("y.h5", 4), a[:0]), (("y.h5", 2), np.concatenate([a, a]))]
    want = pd.concat([pd.DataFrame(arr).assign(policy=lambda d: d["policy"].map(L._text))
                      .pipe(lambda d: (d.insert(0, "index", k[1]), d.insert(0, "file", k[0]), d)[-1])
                      for k, arr in same], ignore_index=True)
    pd.testing.assert_frame_equal(L._detail_frame(same), want, check_exact=True)
    assert L._detail_frame([]).empty


def test_detail_keys_are_the_points_the_full_detail_holds(paths):
    full = full_reader(paths)
    r = fresh(paths)
    for name in DETAILS:
        d = full.detail(name)
        want = list(dict.fromkeys(zip(d["file"], d["index"]))) if len(d) else []
        assert r.detail_keys(name) == want
        assert full.detail_keys(name) == want
    assert schema.CACHE_MRC not in r._detail  # no table was read for it


def test_step_groups_of_some_points_match_every_points(paths):
    every = step_groups(full_reader(paths))
    r = fresh(paths)
    ok = r.ok
    some = keys_of(ok.iloc[::3]) + keys_of(r.points[r.points["status"] != "ok"])
    got = step_groups(r, some)
    for k in some:
        if k not in every:
            assert k not in got
            continue
        pd.testing.assert_frame_equal(got[k].reset_index(drop=True), every[k].reset_index(drop=True),
                                      check_exact=True)
    more = keys_of(ok.iloc[1::3])
    got = step_groups(r, more)
    assert all(k in got for k in more if k in every) and all(k in got for k in some if k in every)
    # The whole set, asked for after the subsets: every point's steps.
    assert set(step_groups(r)) == set(every)


@pytest.mark.parametrize("metric", ["token_recall", "pool_ms", "output_error", "cache_hit_rate"])
def test_summarize_reads_the_same_steps(paths, metric):
    a, b = full_reader(paths), fresh(paths)
    for by in (["context"], [W, G, "workload.seed"], [W, G, "workload.seed", PREC, "workload.requests"]):
        sa, ka = summarize(a, a.ok, by, metric)
        sb, kb = summarize(b, b.ok, by, metric)
        pd.testing.assert_frame_equal(sa, sb, check_exact=True)
        assert ka == kb


def test_claims_are_the_same(paths):
    a, b = full_reader(paths), fresh(paths)
    ra, rb = claims.evaluate(a), claims.evaluate(b)
    assert [vars(x) for x in ra] == [vars(x) for x in rb]
    assert "#steps_by_point" not in b._detail  # the throughput claim read only its points' steps


def figure_data(fig):
    out = [" ".join(t.get_text() for t in fig.texts)]
    for ax in fig.axes:
        out.append(ax.get_title())
        out += [(ln.get_label(), ln.get_xydata().tolist()) for ln in ax.lines]
        out += [[np.asarray(s).tolist() for s in c.get_segments()] for c in ax.collections
                if hasattr(c, "get_segments")]
        out += [(p.get_x(), p.get_y(), p.get_width(), p.get_height()) for p in ax.patches if hasattr(p, "get_width")]
    return out


@pytest.mark.parametrize("family", ["precision", "cache", "mrc", "quality", "ablation", "latency"])
def test_figures_are_the_same(paths, family):
    import matplotlib.pyplot as plt
    a, b = full_reader(paths), fresh(paths)
    fa, fb = FAMILIES[family][0](a), FAMILIES[family][0](b)
    try:
        assert figure_data(fa) == figure_data(fb)
    finally:
        plt.close(fa)
        plt.close(fb)


def test_mrc_reads_only_the_curves_it_draws(paths):
    import matplotlib.pyplot as plt
    r = fresh(paths)
    plt.close(FAMILIES["mrc"][0](r))
    assert schema.CACHE_MRC not in r._detail
    read = r._detail["#raw:" + schema.CACHE_MRC]
    assert 0 < len(read) < len(r.detail_keys(schema.CACHE_MRC))


# The column-by-column _complete this package had before its columns were built at once: the reference.
def old_complete(df, info):
    for key, default in schema.KEY_DEFAULTS.items():
        if key in df.columns:
            continue
        if key == schema.BACKEND and key not in info.settings:
            value = info.attrs.get("backend") or default
        else:
            values = info.settings.get(key, [default])
            value = values[0] if len(values) == 1 else ",".join(values)
        df[key] = value
    for key in schema.INT_KEYS:
        df[key + "#n"] = df[key].map(L.parse_size)
    for key in schema.FLOAT_KEYS:
        df[key + "#n"] = pd.to_numeric(df[key].where(df[key] != ""), errors="coerce")
    for key in schema.BOOL_KEYS:
        df[key + "#n"] = df[key].map(L._bool)
    for key in schema.INT_KEYS + schema.FLOAT_KEYS + schema.BOOL_KEYS:
        df[key + "#s"] = df[key]
        df[key] = df.pop(key + "#n")
    synthetic = df["workload.source"] == "synthetic"
    df["context"] = np.where(synthetic, df["workload.tokens"], df["tokens"]).astype(float)
    df["file"] = info.path
    for a in ("sweep_id", "host", "device", "tool_version", "config_path", "argv"):
        df["attr." + a] = str(info.attrs.get(a, ""))
    df["attr.git_revision"] = L.revisions(info.attrs)
    df[schema.RUN_COLUMNS_READ] = all(c in df.columns for c in schema.RUN_COLUMNS)
    if schema.RUN_BACKEND not in df.columns:
        df[schema.RUN_BACKEND] = df[schema.BACKEND]
    if schema.RUN_DEVICE not in df.columns:
        df[schema.RUN_DEVICE] = df["attr.device"]
    return df


def test_complete_equals_the_column_by_column_version(paths):
    for path in paths:
        info, df = L._read_file(path)
        variants = [df, df.iloc[:0], df.drop(columns=list(schema.RUN_COLUMNS)),  # an older file: no run columns
                    df.assign(**{"workload.tokens": "2Ki", "hybrid.enabled": "yes", "pool.repool_tau": ""})]
        for d in variants:
            want = old_complete(d.copy(), info)
            got = L._complete(d.copy(), info)
            pd.testing.assert_frame_equal(got, want, check_exact=True)
            assert list(got.columns) == list(want.columns)
    # A file whose attributes are not text (a numeric backend attribute) and whose settings sweep a key.
    info, df = L._read_file(paths[0])
    info.attrs["backend"] = 3
    info.settings.pop(schema.BACKEND, None)
    info.settings["workload.topics"] = ["16", "32"]
    pd.testing.assert_frame_equal(L._complete(df.copy(), info), old_complete(df.copy(), info), check_exact=True)


def test_load_of_many_files_equals_the_old_load(paths, monkeypatch):
    with pytest.warns(UserWarning, match="more than one file"):  # a file twice: its points kept once
        new = load(paths + paths[:1]).points
    monkeypatch.setattr(L, "_complete", old_complete)
    with pytest.warns(UserWarning, match="more than one file"):
        old = load(paths + paths[:1]).points
    pd.testing.assert_frame_equal(new, old, check_exact=True)


def old_paired_change(res, d, base, p, metric):
    """figures._paired_change as it was: a filter per point over every setting, every point's steps read."""
    from analysis.common import RUN
    steps = step_groups(res)
    SW = "attr.sweep_id"
    if SW in d.columns and d[SW].nunique() > 1:
        d = d[d[SW] == max(d[SW].unique(), key=lambda sw: (int((d[SW] == sw).sum()), str(sw)))]
    keys = [k for k in dict.fromkeys((*schema.KEY_DEFAULTS, "context", RUN, SW)) if k in d.columns and k != PREC]
    bases = d[d[PREC] == base]
    out = []
    for _, r in d[d[PREC] == p].iterrows():
        m = bases
        for k in keys:
            m = m[m[k].isna()] if pd.isna(r[k]) else m[m[k] == r[k]]
        if len(m) != 1:
            continue
        a, b = steps.get((r["file"], r["index"])), steps.get((m["file"].iloc[0], m["index"].iloc[0]))
        if a is None or b is None or metric not in a.columns:
            continue
        j = a[["request", "step", metric]].merge(b[["request", "step", metric]], on=["request", "step"],
                                                 suffixes=("", "_base"))
        out.append((j[metric] - j[metric + "_base"]).astype(float).dropna())
    return pd.concat(out) if out else pd.Series(dtype=float)


def test_paired_change_equals_the_filter_per_point(paths):
    from analysis.figures import _paired_change
    a, b = full_reader(paths), fresh(paths)
    ok = b.ok
    cases = 0
    for (w, g), d in ok.groupby([W, G]):
        for metric in ("token_recall", "output_error", "mass_recall"):
            want = old_paired_change(a, d, "fp32", "fp16", metric)
            got = _paired_change(b, d, "fp32", "fp16", metric)
            np.testing.assert_array_equal(got.to_numpy(), want.to_numpy())
            cases += len(want) > 0
    # With the two sweeps and a seed missing at fp32 (no pair for it), and a setting that is NaN on some rows.
    d = ok[~((ok[PREC] == "fp32") & (ok["workload.seed"] == "1"))].copy()
    d.loc[d.index[::2], "workload.requests"] = np.nan
    for metric in ("token_recall", "pool_ms"):
        want = old_paired_change(a, d, "fp32", "fp16", metric)
        got = _paired_change(b, d, "fp32", "fp16", metric)
        np.testing.assert_array_equal(got.to_numpy(), want.to_numpy())
    assert cases >= 6
