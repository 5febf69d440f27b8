"""Tests of analysis/: results files made by the real indexpool binary, every figure family, the claims
report, and the schema_version check.

Run by `make test` (INDEXPOOL_BIN names the binary; without it the build folder's is used)."""
import copy
import errno
import os
import re
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pandas as pd
import pytest
from matplotlib.image import imread

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from analysis import FAMILIES, NoData, SchemaVersionError, load, save  # noqa: E402
from analysis import claims, schema  # noqa: E402
from analysis.__main__ import main  # noqa: E402

# A small sweep: 2 context lengths x 3 schemes x 2 group sizes x 2 precisions x 2 seeds = 48 tiny points.
GRID = """
[workload]
tokens = 2Ki, 4Ki
dim = 32
index_heads = 2
attn_dim = 32
attn_heads = 1
value_dim = 32
steps = 4
seed = 0, 1

[pool]
weighting = exact, uniform, tfidf
group_size = 2, 4
precision = fp32, fp8

[select]
topk_tokens = 256
"""
# Concurrent requests as an axis (cache hit rates vs B): a second file, read together with the first.
REQUESTS = """
[workload]
tokens = 4Ki
dim = 32
index_heads = 2
attn_dim = 32
attn_heads = 1
value_dim = 32
steps = 4
requests = 1, 2, 4

[pool]
weighting = tfidf
group_size = 4

[select]
topk_tokens = 256
"""


def indexpool_bin():
    b = os.environ.get("INDEXPOOL_BIN") or os.path.join(ROOT, "build", "experiments", "indexpool")
    if not os.access(b, os.X_OK):
        pytest.fail(f"indexpool binary not found at {b} (build it with `make build`, or set INDEXPOOL_BIN)")
    return b


def run_sweep(tmp, name, text):
    cfg = tmp / f"{name}.ini"
    out = tmp / f"{name}.h5"
    cfg.write_text(text + f"\n[output]\npath = {out}\n")
    subprocess.run([indexpool_bin(), "run", str(cfg), "--overwrite"], check=True, capture_output=True, timeout=120)
    return str(out)


@pytest.fixture(autouse=True)
def close_figures():
    """Every figure a test made is closed after it (pyplot keeps them open, and warns past 20)."""
    yield
    import matplotlib.pyplot as plt
    plt.close("all")


@pytest.fixture(scope="session")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("results")
    return [run_sweep(tmp, "grid", GRID), run_sweep(tmp, "requests", REQUESTS)]


@pytest.fixture(scope="session")
def res(files):
    return load(files)


def test_load_reads_every_point_with_settings(res, files):
    pts = res.points
    assert len(pts) == 48 + 3
    assert set(pts["status"]) == {"ok"}
    assert set(pts["file"]) == set(files)
    grid = pts[pts["file"] == files[0]]
    assert sorted(grid["context"].unique()) == [2048, 4096]
    assert sorted(grid["pool.weighting"].unique()) == ["exact", "tfidf", "uniform"]
    assert sorted(grid["pool.precision"].unique()) == ["fp32", "fp8"]
    # Non-axis settings come from the config text: the requests file has one weighting, no such column.
    req = pts[pts["file"] == files[1]]
    assert set(req["pool.weighting"]) == {"tfidf"} and set(req["pool.group_size"]) == {4}
    assert sorted(req["workload.requests"]) == [1, 2, 4]
    assert (pts["backend"] == "cpu").all()
    # What each point ran on: the runner's run_backend / run_device columns, read from the file.
    assert (pts[schema.RUN_BACKEND] == "cpu").all() and pts[schema.RUN_COLUMNS_READ].all()
    assert (pts[schema.RUN_DEVICE].str.len() > 0).all()
    assert schema.RUN_BACKEND not in load(files[0]).files[0].axes  # a point column, not a sweep axis
    steps = res.detail(schema.STEPS)
    assert len(steps) == 48 * 4 + (1 + 2 + 4) * 4
    assert {"file", "index", "token_recall", "score_ms"} <= set(steps.columns)


def test_shards_join(res, files, tmp_path):
    # indexpool merge of two shard files gives the same table as the unsharded run.
    b = indexpool_bin()
    cfg = tmp_path / "s.ini"
    cfg.write_text(REQUESTS)
    shards = []
    for i in range(2):
        out = tmp_path / f"shard{i}.h5"
        subprocess.run([b, "run", str(cfg), "--overwrite", "--shard", f"{i}/2", "--set", f"output.path={out}"],
                       check=True, capture_output=True, timeout=60)
        shards.append(str(out))
    joined = load(shards)
    assert sorted(joined.points["workload.requests"]) == [1, 2, 4]
    assert joined.points["attr.sweep_id"].nunique() == 1
    # Merged by indexpool: one file whose report says what it was merged from.
    merged = tmp_path / "merged.h5"
    subprocess.run([b, "merge", str(merged)] + shards, check=True, capture_output=True, timeout=60)
    m = load(str(merged))
    assert sorted(m.points["workload.requests"]) == [1, 2, 4]
    info = m.file_provenance()[0]
    rev = info["git_revision"]
    assert info["merged_from"].startswith(f"{shards[0]} (shard 0/2, git revision {rev}, host "), info["merged_from"]
    assert f"; {shards[1]} (shard 1/2, git revision {rev}, host " in info["merged_from"], info["merged_from"]
    md = claims.markdown(m, claims.evaluate(m), [str(merged)])
    assert f"merged from {shards[0]} (shard 0/2" in md


def test_cache_size_from_the_environment_reaches_figures_and_report(tmp_path):
    # INDEXPOOL_CACHE_SIZE sets the last level's capacity (after --set); the analysis reads the note the
    # runner leaves in config_text, as for INDEXPOOL_PRECISION: the tier names, the MRC's L1..L3 line and the
    # claims' tiers say 64KiB, as the stored per-level capacities do.
    cfg = tmp_path / "c.ini"
    out = tmp_path / "c.h5"
    cfg.write_text(REQUESTS + f"\n[output]\npath = {out}\n")
    env = dict(os.environ, INDEXPOOL_CACHE_SIZE="64Ki")
    subprocess.run([indexpool_bin(), "run", str(cfg), "--set", "cache.levels=lru:4KiB clock:8KiB semantic:1MiB"],
                   check=True, capture_output=True, timeout=120, env=env)
    r = load(str(out))
    assert set(r.points["cache.levels"]) == {"lru:4KiB clock:8KiB semantic:64KiB"}
    with h5py.File(out) as f:
        assert f["point_000000/cache_levels"]["capacity"][-1] == b"64KiB"
    rows = {x.id: x for x in claims.evaluate(r)}
    assert "tiers lru:4KiB clock:8KiB semantic:64KiB" in rows["tier_hits"].source, rows["tier_hits"].source
    # cache.levels as an axis: its column names the levels the points ran with.
    out2 = tmp_path / "c2.h5"
    subprocess.run([indexpool_bin(), "run", str(cfg), "--set", f"output.path={out2}", "--set",
                    "cache.levels=lru:4KiB clock:8KiB semantic:1MiB, lru:4KiB semantic:2MiB"],
                   check=True, capture_output=True, timeout=120, env=env)
    assert set(load(str(out2)).points["cache.levels"]) == {"lru:4KiB clock:8KiB semantic:64KiB",
                                                           "lru:4KiB semantic:64KiB"}


def test_a_resumed_file_names_the_run_that_resumed_it(tmp_path):
    # A run whose points were all skipped (memory limit), then resumed: the report's inputs say which run
    # resumed the file (its argv), and a resume by another revision shows in the file's revision.
    b = indexpool_bin()
    cfg = tmp_path / "r.ini"
    cfg.write_text(REQUESTS)
    out = tmp_path / "r.h5"
    subprocess.run([b, "run", str(cfg), "--set", f"output.path={out}", "--set", "sweep.memory_limit=1Ki"],
                   check=True, capture_output=True, timeout=60)
    subprocess.run([b, "run", str(cfg), "--set", f"output.path={out}", "--resume"], check=True, capture_output=True,
                   timeout=60)
    r = load(str(out))
    info = r.file_provenance()[0]
    assert " --resume" in info["resumed_by"] and "; argv: " in info["resumed_by"], info["resumed_by"]
    assert "--resume" not in info["argv"], info["argv"]
    md = claims.markdown(r, claims.evaluate(r), [str(out)])
    assert "resumed by " in md and " --resume" in md.split("resumed by ", 1)[1], md
    from analysis.load import revisions
    line = info["resumed_by"]
    assert revisions({"git_revision": "aaaa", "resumed_by": line.replace(f"(git {info['git_revision']};", "(git bbbb;")}) \
        == "aaaa (some points written at bbbb)"
    assert revisions({"git_revision": info["git_revision"], "resumed_by": line}) == info["git_revision"]
    # Merged: each input's revision, and the runs that resumed an input (merge drops the root resumed_by).
    merged = (f"a.h5 (shard 0/2, git revision aaaa, host h, written t, argv: x)\n  resumed {line}\n"
              "b.h5 (shard 1/2, git revision cccc, host h, written t, argv: y)")
    assert revisions({"git_revision": "aaaa", "merged_from": merged}) \
        == f"aaaa (some points written at {info['git_revision']}, cccc)"


def test_set_values_with_spaces_are_read_back_from_argv(tmp_path):
    # indexpool writes its argv shell-quoted (core/provenance.h): a --set value holding a space, in a folder
    # whose name holds one, comes back whole through shlex.split (unquoted, "select.topk_tokens=" and "128"
    # were two words and the column read "").
    folder = tmp_path / "my results"
    folder.mkdir()
    cfg = folder / "r.ini"
    cfg.write_text(REQUESTS)
    out = folder / "r.h5"
    subprocess.run([indexpool_bin(), "run", str(cfg), "--overwrite", "--set", "select.topk_tokens= 128",
                    "--set", f"output.path={out}"], check=True, capture_output=True, timeout=60)
    with h5py.File(out, "r") as f:
        argv = f.attrs["argv"]
    assert "'select.topk_tokens= 128'" in str(argv)
    res = load([str(out)])
    assert set(res.points["select.topk_tokens"]) == {128}


def test_other_schema_version_is_refused(files, tmp_path, capsys):
    bad = tmp_path / "v2.h5"
    shutil.copy(files[1], bad)
    with h5py.File(bad, "r+") as f:
        f.attrs["schema_version"] = np.int64(2)
    with pytest.raises(SchemaVersionError) as e:
        load([files[0], str(bad)])
    msg = str(e.value)
    assert str(bad) in msg and "schema_version 2" in msg and "reads schema_version 1" in msg
    # The command line says the same on stderr, without a traceback, and exits 2.
    assert main(["report", str(bad), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "schema_version 2" in err and "Traceback" not in err


def test_missing_file_is_a_clear_error(tmp_path, capsys):
    assert main(["figures", str(tmp_path / "nope.h5"), "--out", str(tmp_path)]) == 2
    assert "no such file" in capsys.readouterr().err


def test_unknown_family_is_a_usage_error(files, tmp_path, capsys):
    # Status 2, like every other usage error (1 means no figure could be made), naming the family.
    with pytest.raises(SystemExit) as e:
        main(["figures", files[0], "--out", str(tmp_path), "--only", "memory", "bogus"])
    assert e.value.code == 2
    assert "invalid choice: 'bogus'" in capsys.readouterr().err
    assert not os.listdir(tmp_path)


def check_png(path, min_px=300):
    assert os.path.getsize(path) > 5000, path
    img = imread(path)
    assert img.shape[0] >= min_px and img.shape[1] >= min_px, img.shape
    # not a blank canvas: a real plot has many distinct colours
    assert len(np.unique(img.reshape(-1, img.shape[-1])[::7], axis=0)) > 20, path


def labels(fig):
    return [ax.get_xlabel() for ax in fig.axes] + [ax.get_ylabel() for ax in fig.axes]


# Families the runner writes today: from the real files.
REAL = ["memory", "latency", "macs", "ablation", "quality", "precision", "cache", "mrc"]
# Families the CPU-only test files above hold no data for: GPU backend points and counters (the runner writes
# them on a GPU machine), the hybrid layer and re-pooling (these sweeps leave hybrid.enabled and
# pool.repool_tau at their defaults; test_hybrid_and_repool_from_runner_files runs sweeps that set them).
FUTURE = ["backends", "hybrid", "repool", "counters", "batched"]


@pytest.mark.parametrize("family", REAL)
def test_figure_from_runner_file(res, family, tmp_path):
    fig = FAMILIES[family][0](res)
    axes_with_data = [ax for ax in fig.axes if ax.lines or ax.patches or ax.images or ax.collections]
    assert axes_with_data, family
    for lab in labels(fig):
        if lab and "G" not in lab and "scheme" not in lab:
            assert "(" in lab, f"{family}: axis label without a unit: {lab!r}"
    png, pdf = save(fig, str(tmp_path), family)
    check_png(png)
    assert open(pdf, "rb").read(5) == b"%PDF-" and os.path.getsize(pdf) > 2000


def test_figure_contents(res):
    lab = labels(FAMILIES["memory"][0](res))
    assert "index memory per request (MiB)" in lab and "context length T (tokens)" in lab
    fig = FAMILIES["ablation"][0](res)
    assert [ax.get_title() for ax in fig.axes[:3]] == ["token recall (fraction)", "attention-mass recall (fraction)",
                                                       "attention output error (relative L2)"]
    # Two seeds per point: the caption says the bars are over seeds.
    assert any("over 2 seeds" in t.get_text() for t in fig.texts)
    fig = FAMILIES["cache"][0](res)
    assert any("OPT" in t for ax in fig.axes for t in ax.get_legend_handles_labels()[1]) or \
        any("OPT" in t.get_text() for t in fig.legends[0].get_texts())
    # cache_opt_hit_rate (OPT at every level of the hierarchy) is a reference, never called a bound; the bound
    # shown is cache_opt_single_hit_rate (OPT on one cache of the total capacity).
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert not any("OPT bound" in t for t in legend)
    assert any("reference" in t for t in legend) and any("upper bound" in t for t in legend)
    cap = " ".join(t.get_text() for t in fig.texts).replace("\n", " ")
    assert "a reference and not a bound" in cap and "an upper bound on the overall hit rate" in cap


def test_precision_figure_pairs_each_precision_with_the_widest(res, files):
    from analysis.common import G, PREC, RUN, W, fix_others
    from analysis.figures import _paired_change
    fig = FAMILIES["precision"][0](res)
    top, bottom = fig.axes[:3], fig.axes[3:6]
    assert [ax.get_ylabel() for ax in bottom] == ["change vs fp32 (fraction)", "change vs fp32 (fraction)",
                                                   "change vs fp32 (relative L2)"]
    assert all(ax.get_xlabel() == "index bytes per context token (B)" for ax in bottom)
    # Series: exact (at its smallest G only), tfidf and uniform at G = 2 and 4; each precision named at its point.
    names = [t.get_text() for t in top[0].texts]
    assert names.count("fp32") == 5 and names.count("fp8") == 5
    # The bottom row's fp8 point of a series is the mean of the per-step differences against the fp32 point of
    # the same seed, computed here by hand from the steps table for uniform G = 4's attention-mass recall (the
    # exact indexer's fp32 token recall is 1 at every step, so it would not show a wrong pairing).
    d = fix_others(res.ok, keep=(W, G, PREC, "attr.sweep_id", "backend", RUN))[0]
    un = d[(d[W] == "uniform") & (d[G] == 4)]
    steps = res.detail(schema.STEPS)
    want = []
    for seed in sorted(un["workload.seed"].unique()):
        a, b = (un[(un[PREC] == p) & (un["workload.seed"] == seed)].iloc[0] for p in ("fp8", "fp32"))
        sa = steps[(steps["file"] == a["file"]) & (steps["index"] == a["index"])].set_index(["request", "step"])
        sb = steps[(steps["file"] == b["file"]) & (steps["index"] == b["index"])].set_index(["request", "step"])
        want.extend((sa["mass_recall"] - sb["mass_recall"]).dropna())
    got = _paired_change(res, un, "fp32", "fp8", "mass_recall")
    assert len(got) == len(want) == 2 * 4
    assert np.isclose(got.mean(), np.mean(want)) and np.mean(want) != 0
    ys = [y for line in bottom[1].lines for y in line.get_ydata()]
    assert any(np.isclose(y, np.mean(want)) for y in ys)
    cap = " ".join(t.get_text() for t in fig.texts).replace("\n", " ")
    assert "stored at fp32, per decode step" in cap and "unquantized fp32 keys" in cap
    # One precision: no figure, and the reason names the key.
    with pytest.raises(NoData, match="one index precision .fp32.; a sweep over pool.precision"):
        FAMILIES["precision"][0](load(files[1]))


def test_paired_change_pairs_within_the_main_sweep_and_backend(res):
    from analysis.common import G, PREC, RUN, W, fix_others, step_groups
    from analysis.figures import _paired_change
    d = fix_others(res.ok, keep=(W, G, PREC, "attr.sweep_id", "backend", RUN))[0]
    un = d[(d[W] == "uniform") & (d[G] == 4)]
    want = _paired_change(res, un, "fp32", "fp8", "mass_recall")
    steps = step_groups(res)
    # A second sweep with fewer points whose fp8 steps differ by +1: not the main sweep, so not in the pairs.
    other = un[~((un[PREC] == "fp32") & (un["workload.seed"] == 1))].assign(**{"attr.sweep_id": "zzz-other"})
    other = other.assign(index=other["index"] + 50_000)
    for _, o in other.iterrows():
        st = steps[(o["file"], o["index"] - 50_000)].copy()
        st["mass_recall"] += 1.0 if o[PREC] == "fp8" else 0.0
        steps[(o["file"], o["index"])] = st
    got = _paired_change(res, pd.concat([un, other]), "fp32", "fp8", "mass_recall")
    assert len(got) == len(want) and np.isclose(got.mean(), want.mean())
    # The same points run on another backend pair among themselves, never with the cpu ones.
    cuda = un.assign(**{RUN: "cuda", "index": un["index"] + 60_000})
    for _, o in cuda.iterrows():
        st = steps[(o["file"], o["index"] - 60_000)].copy()
        st["mass_recall"] += 0.5 if o[PREC] == "fp8" else 0.0
        steps[(o["file"], o["index"])] = st
    both = _paired_change(res, pd.concat([un, cuda]), "fp32", "fp8", "mass_recall")
    assert len(both) == 2 * len(want)
    assert np.isclose(both.mean(), want.mean() + 0.25)  # half the pairs are cuda's, +0.5 each; none mixed


def test_no_finished_point_says_why_in_figures_and_report(tmp_path):
    # Every point skipped (k over the context): the figures' notes and the report give the skip reasons, not a
    # missing column or 'no pooled scheme'.
    base = "[workload]\ndim = 32\nindex_heads = 2\nattn_dim = 32\nattn_heads = 1\nvalue_dim = 32\nsteps = 2\n"
    f = run_sweep(tmp_path, "sk", base + "tokens = 2Ki\n[pool]\nweighting = exact, uniform\n"
                  "[select]\ntopk_tokens = 4Ki\n")
    r = load(f)
    why = "0 of 2 points finished; 2 not finished: select.topk_tokens = 4096 exceeds a request's context of 2048 tokens"
    with pytest.raises(NoData, match=re.escape(why)):
        FAMILIES["memory"][0](r)
    md = claims.markdown(r, claims.evaluate(r), [f])
    assert f"**No finished point**: {why}." in md, md


def test_quality_caption_names_where_the_other_axis_is_held(tmp_path):
    # A T x k grid: the T row is drawn at the largest k, the k row at the largest T, and the caption says both.
    # T and k zipped: neither row can be drawn, and the note says they move together.
    base = "[workload]\ndim = 32\nindex_heads = 2\nattn_dim = 32\nattn_heads = 1\nvalue_dim = 32\nsteps = 2\n"
    grid = run_sweep(tmp_path, "grid", base + "tokens = 2Ki, 4Ki\n[pool]\nweighting = uniform\n"
                     "[select]\ntopk_tokens = 128, 256\n")
    fig = FAMILIES["quality"][0](load(grid))
    cap = " ".join(t.get_text() for t in fig.texts).replace("\n", " ")
    assert "T row: k = 256" in cap and "k row: T = 4Ki" in cap, cap
    zipped = run_sweep(tmp_path, "zip", base + "tokens = 2Ki, 4Ki\n[pool]\nweighting = uniform\n"
                       "[select]\ntopk_tokens = 128, 256\n[sweep]\nzip = workload.tokens select.topk_tokens\n")
    with pytest.raises(NoData, match="move together"):
        FAMILIES["quality"][0](load(zipped))


def test_precision_and_quality_figures_find_their_slice_across_files(tmp_path):
    # A T sweep (2Ki, 4Ki at k = 256, fp32) beside a precision sweep (fp32, fp8) and a k sweep (128, 512), both at
    # T = 2Ki: the largest T holds one precision and one k, which must not hide the other files' axes.
    base = "[workload]\ndim = 32\nindex_heads = 2\nattn_dim = 32\nattn_heads = 1\nvalue_dim = 32\nsteps = 2\n"
    t = run_sweep(tmp_path, "t", base + "tokens = 2Ki, 4Ki\n[pool]\nweighting = uniform\n[select]\ntopk_tokens = 256\n")
    p = run_sweep(tmp_path, "p", base + "tokens = 2Ki\n[pool]\nweighting = uniform\nprecision = fp32, fp8\n"
                  "[select]\ntopk_tokens = 256\n")
    k = run_sweep(tmp_path, "k", base + "tokens = 2Ki\n[pool]\nweighting = uniform\n[select]\ntopk_tokens = 128, 512\n")
    r = load([t, p, k])
    fig = FAMILIES["precision"][0](r)
    assert sorted({t.get_text() for t in fig.axes[0].texts}) == ["fp32", "fp8"]
    fig = FAMILIES["quality"][0](r)
    assert [ax.get_xlabel() for ax in fig.axes[::3]] == ["context length T (tokens)",
                                                         "selection budget k = select.topk_tokens (tokens)"]


def test_run_columns_fallback_for_older_files(files, tmp_path):
    # A file written before run_backend / run_device existed: the configured backend and the root "device".
    import numpy.lib.recfunctions as rfn
    old = tmp_path / "old.h5"
    shutil.copy(files[1], old)
    with h5py.File(old, "r+") as f:
        table = rfn.drop_fields(f["points"][:], list(schema.RUN_COLUMNS), usemask=False)
        del f["points"]
        f.create_dataset("points", data=table)
        root_device = f.attrs["device"]
    pts = load(str(old)).points
    assert len(pts) == 3 and not pts[schema.RUN_COLUMNS_READ].any()
    assert (pts[schema.RUN_BACKEND] == pts["backend"]).all()
    assert set(pts[schema.RUN_DEVICE]) == {root_device.decode() if isinstance(root_device, bytes) else root_device}


@pytest.mark.parametrize("family", FUTURE)
def test_future_family_says_no_data_on_runner_file(res, family):
    with pytest.raises(NoData) as e:
        FAMILIES[family][0](res)
    assert family in str(e.value)


def synthetic_results(res, batched=True):
    """A small synthetic table for the families no runner writes yet: the real points with the FUTURE columns
    (schema.py) added by hand. Built here in the test, not read from any file. batched: with copies of the
    CUDA points run with select.batched at B = 1, 4 and 16 (step times of the whole batch, 1000x slower)."""
    r = copy.copy(res)
    pts = res.points[res.points["file"] == res.points["file"].iloc[0]].copy()
    cuda = pts.copy()
    cuda["backend"] = "cuda"
    # What the point ran on is run_backend / run_device; the root attribute (attr.device) stays the CPU
    # file's, so a claim that read it instead would not find the A100.
    cuda[schema.RUN_BACKEND] = "cuda"
    cuda[schema.RUN_DEVICE] = "NVIDIA A100-SXM4-80GB (synthetic)"
    for c in ("pool_ms", "score_ms", "topk_ms", "attention_ms"):
        cuda[c] = cuda[c] / 20
    cuda["index"] = cuda["index"] + 10_000
    hyb = pts.copy()
    pts[schema.HYBRID_ENABLED] = False
    cuda[schema.HYBRID_ENABLED] = False
    # The hybrid at k - W = 128 sparse tokens + a 128-token window: matched with pure sparse at k = 256.
    hyb[schema.HYBRID_ENABLED] = True
    hyb[schema.TOPK] = 128
    hyb[schema.HYBRID_WINDOW] = 128
    hyb[schema.LAYER_OUTPUT_ERROR] = hyb[schema.LAYER_OUTPUT_ERROR] * 0.8
    hyb["index"] = hyb["index"] + 20_000
    # Incremental re-pooling: copies of the CPU points at tau >= 0 (the others keep tau = -1, full rebuilds).
    rep = []
    for i, tau in enumerate((0.0, 0.1, 0.2, 0.4)):
        x = pts.copy()
        x[schema.REPOOL_TAU] = tau
        x["index"] = x["index"] + 30_000 + 1000 * i
        rep.append(x)
    bat = []
    if batched:
        for i, b in enumerate((1, 4, 16)):
            x = cuda.copy()
            x["workload.requests"] = b
            for c in ("pool_ms", "score_ms", "topk_ms", "attention_ms"):
                x[c] = x[c] * 1000 * b ** 0.5
            x["index"] = x["index"] + 40_000 + 1000 * i
            x[schema.HYBRID_ENABLED] = False
            x[schema.BATCHED] = True
            bat.append(x)
    for x in (pts, cuda, hyb, *rep):
        x[schema.BATCHED] = False
    allp = pd.concat([pts, cuda, hyb, *rep, *bat], ignore_index=True)
    allp[schema.LAYER_MS] = np.where(allp[schema.HYBRID_ENABLED], 1.0, 2.3) * allp["context"] / 1e3
    allp.loc[allp[schema.BATCHED], schema.LAYER_MS] = allp[["score_ms", "topk_ms", "attention_ms"]].sum(axis=1)
    allp[schema.REPOOLED_FRACTION_MEAN] = np.where(allp[schema.REPOOL_TAU] < 0, 1.0,
                                                   1 / (1 + 10 * allp[schema.REPOOL_TAU]))
    r.points = allp
    # Counters in the runner's layout (experiments/profiling.cc): one row per stage and metric of the CUDA
    # points, and kernel records (pass 0: the run itself; pass 1: a replay, which the bandwidth must ignore).
    counters, kernels = [], []
    for _, p in allp[allp[schema.RUN_BACKEND] == "cuda"].iterrows():
        for stage, base, gbytes in (("pool", 40.0, 0.5), ("score", 70.0, 2.0), ("topk", 20.0, 0.1),
                                    ("attention", 55.0, 1.0)):
            for metric, f in (("sm__throughput.avg.pct_of_peak_sustained_elapsed", 1.0),
                              ("sm__warps_active.avg.pct_of_peak_sustained_active", 0.8),
                              ("lts__t_sector_hit_rate.pct", 0.5)):
                counters.append(dict(file=p["file"], index=p["index"], stage=stage, metric=metric, value=base * f,
                                     unit="percent", calls=4, aggregate="mean"))
            for metric, f in (("dram__bytes_read.sum", 1.0), ("dram__bytes_write.sum", 0.25)):
                counters.append(dict(file=p["file"], index=p["index"], stage=stage, metric=metric,
                                     value=4 * gbytes * f * 1e9, unit="byte", calls=4, aggregate="sum"))
            for pss in (0, 1):  # 4 calls of 1 ms each: 4 * gbytes GB in 4 ms
                kernels.append(dict(file=p["file"], index=p["index"], name=f"{stage}_kernel", stage=stage,
                                    **{"pass": pss}, duration_ns=4e6 * (1 + 9 * pss)))
    r._detail = dict(res._detail)
    r._detail[schema.COUNTERS] = pd.DataFrame(counters)
    r._detail[schema.KERNELS] = pd.DataFrame(kernels)
    r._detail[schema.STEPS] = res.detail(schema.STEPS)
    r.point_attrs = lambda names=schema.PROFILE_ATTRS, rows=None: pd.DataFrame(
        [dict(file=p["file"], index=p["index"], counters_status="ok", counters_reason="", kernels_status="ok",
              kernels_reason="", counters_chip="GA100", counters_passes=5)
         for _, p in (allp if rows is None else rows).iterrows()], columns=["file", "index", *schema.PROFILE_ATTRS])
    return r


@pytest.mark.parametrize("family", FUTURE)
def test_future_family_from_synthetic_columns(res, family, tmp_path):
    fig = FAMILIES[family][0](synthetic_results(res))
    png, _ = save(fig, str(tmp_path), family)
    check_png(png)


# Issue 7 sweeps, tiny: the hybrid layer (window W = 128) against pure sparse attention; hybrid at k = 128
# and pure sparse at k = 256 give the layer the same 256 tokens per step (matched token budget).
HYBRID = """
[workload]
tokens = 2Ki
dim = 32
index_heads = 2
attn_dim = 32
attn_heads = 1
value_dim = 32
steps = 4

[pool]
weighting = uniform
group_size = 4

[hybrid]
enabled = false, true
window = 128
combine = gate:0.25

[select]
topk_tokens = 128, 256

[cache]
enabled = false
"""
# Incremental re-pooling: full rebuilds (tau = -1) and two thresholds, tfidf weights (they move every step).
REPOOL = """
[workload]
tokens = 2Ki
dim = 32
index_heads = 2
attn_dim = 32
attn_heads = 1
value_dim = 32
steps = 4

[pool]
weighting = tfidf
group_size = 4
repool_tau = -1, 0, 0.1

[select]
topk_tokens = 256

[cache]
enabled = false
"""


def test_matched_speedup_takes_both_layers_from_one_sweep():
    # Sweep A ran pure sparse at budgets 256 and 512 but the hybrid at 512 only; sweep B ran both at 256.
    # At 256 the ratio is B's (2.0): A's sparse points are not repeats of B's (pooled, the median was 5.0).
    from analysis.figures import matched_speedup
    rows = [("A", False, 256, 5.0), ("A", False, 256, 5.0), ("A", False, 512, 8.0), ("A", True, 512, 2.0),
            ("A", True, 512, 2.0), ("B", False, 256, 2.0), ("B", True, 256, 1.0)]
    df = pd.DataFrame(rows, columns=["attr.sweep_id", schema.HYBRID_ENABLED, schema.TOKEN_BUDGET, schema.LAYER_MS])
    sp = matched_speedup(df)
    assert sp.to_dict() == {256: 2.0, 512: 4.0}
    # Where both sweeps ran both layers at a budget, the sweep with more points is taken, not a pooled median.
    more = pd.DataFrame([("B", False, 512, 3.0), ("B", True, 512, 1.0)], columns=df.columns)
    assert matched_speedup(pd.concat([df, more], ignore_index=True))[512] == 4.0
    assert matched_speedup(df.drop(columns="attr.sweep_id")).to_dict() == {256: 5.0, 512: 4.0}


def test_quality_figure_rows_follow_the_axes_that_vary(res, files, tmp_path):
    # The grid varies T (2Ki, 4Ki) at one k: one row, against T.
    fig = FAMILIES["quality"][0](res)
    assert len(fig.axes) == 3 and fig.axes[0].get_xlabel() == "context length T (tokens)"
    assert fig._suptitle.get_text() == "Selection quality vs context length"
    # The hybrid sweep varies k (128, 256) at one T: one row, against k, drawn from its pure sparse points.
    r = load(run_sweep(tmp_path, "hybrid", HYBRID))
    fig = FAMILIES["quality"][0](r)
    assert [ax.get_xlabel() for ax in fig.axes] == ["selection budget k = select.topk_tokens (tokens)"] * 3
    cap = " ".join(t.get_text() for t in fig.texts).replace("\n", " ")
    assert "hybrid.enabled = false" in cap or "hybrid = false" in cap, cap
    # Both at one value: no figure, saying which keys to sweep.
    with pytest.raises(NoData, match="one context length and one select.topk_tokens"):
        FAMILIES["quality"][0](load(files[1]))


def test_hybrid_windows_are_series_not_repeats(tmp_path):
    # Two windows: at a token budget of 512, hybrid W = 128 (k = 384) and W = 256 (k = 256) are different
    # layers. The figure draws a series per window (they were pooled and called "2 repeated points"), and
    # the claim judges one window, listing the other.
    from analysis import claims
    cfg = HYBRID.replace("window = 128", "window = 128, 256").replace("topk_tokens = 128, 256",
                                                                      "topk_tokens = 256, 384, 512")
    r = load(run_sweep(tmp_path, "hybrid2", cfg))
    fig = FAMILIES["hybrid"][0](r)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any(t.endswith("W = 128") and t.startswith("hybrid") for t in legend), legend
    assert any(t.endswith("W = 256") and t.startswith("hybrid") for t in legend), legend
    # (c): each window's series has its own 3 budgets (pooled, one hybrid series had 4: 384 ... 768). The pure
    # sparse points of the two windows are the same configuration (the window is ignored) and stay pooled.
    series = {c.get_label(): len(c.lines[0].get_ydata()) for c in fig.axes[2].containers}
    assert series == {"pure sparse (k tokens)": 3, "hybrid (k − W sparse + W local), W = 128": 3,
                      "hybrid (k − W sparse + W local), W = 256": 3}, series
    # (b): a speed-up line per window: W = 128 matched at 384 and 512, W = 256 at 512.
    xs = sorted(tuple(ln.get_xdata()) for ln in fig.axes[1].lines if ln.get_label().startswith("sparse ÷"))
    assert xs == [(384.0, 512.0), (512.0,)], xs
    row = claims.hybrid(r)
    assert "window 128" in row.measured and "other windows" in row.measured and "W = 256" in row.measured, row.measured


def test_hybrid_and_repool_from_runner_files(tmp_path):
    hf, rf = run_sweep(tmp_path, "hybrid", HYBRID), run_sweep(tmp_path, "repool", REPOOL)
    r = load([hf, rf])
    pts = r.points
    assert set(pts["status"]) == {"ok"} and len(pts) == 4 + 3
    h = pts[pts["file"] == hf]
    assert sorted(h[schema.HYBRID_ENABLED]) == [False, False, True, True]
    assert h[[schema.LAYER_MS, schema.LAYER_OUTPUT_ERROR, schema.LAYER_MASS_RECALL]].notna().all().all()
    assert (h.loc[h[schema.HYBRID_ENABLED], schema.LOCAL_MS] > 0).all()
    t = pts[pts["file"] == rf]
    assert sorted(t[schema.REPOOL_TAU]) == [-1.0, 0.0, 0.1]
    assert t[schema.REPOOLED_FRACTION_MEAN].between(0, 1).all()
    steps = r.detail(schema.STEPS)
    assert schema.REPOOLED_FRACTION in steps.columns

    fig = FAMILIES["hybrid"][0](r)
    lab = labels(fig)
    assert "attention layer time per step (ms)" in lab and "speed-up of hybrid over sparse (×)" in lab
    assert "layer output error vs dense (relative L2)" in lab and "dense attention mass covered (fraction)" in lab
    assert "tokens per step given to the layer (sparse: k; hybrid: k − W + W)" in lab
    # (b): one matched budget, 256 tokens.
    assert list(fig.axes[1].lines[0].get_xdata()) == [256.0]
    cap = " ".join(t.get_text() for t in fig.texts).replace("\n", " ")
    assert "gate:0.25" in cap and "W = 128" in cap and "hybrid.combine" in cap
    png, _ = save(fig, str(tmp_path), "hybrid")
    check_png(png)

    fig = FAMILIES["repool"][0](r)
    lab = labels(fig)
    assert "groups re-pooled per step (fraction)" in lab and "token recall (fraction)" in lab
    assert any(x.startswith("re-pooling threshold τ") for x in lab)
    # tau = -1 is a reference line, not a point at x = -1.
    for ax in fig.axes[:2]:
        xs = np.concatenate([np.asarray(ln.get_xdata(), dtype=float) for ln in ax.lines
                             if len(ln.get_xdata()) and not ln.get_label().endswith("(τ = −1)")])
        assert (xs >= 0).all()
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any("full rebuild (τ = −1)" in t for t in legend)
    png, _ = save(fig, str(tmp_path), "repool")
    check_png(png)

    rows = {row.id: row for row in claims.evaluate(r)}
    hy = rows["hybrid"]
    assert hy.verdict != claims.NOT_MEASURED and hy.measured != "—", hy.reason
    assert "×" in hy.measured and "256" in hy.measured and "output error" in hy.measured
    assert rows["perplexity"].verdict == claims.NOT_MEASURED


def test_counters_figure_reads_stage_layout(res, tmp_path):
    syn = synthetic_results(res)
    fig = FAMILIES["counters"][0](syn)
    pct, dram = fig.axes[:2]
    assert pct.get_xlabel() == "percent (%)" and dram.get_xlabel() == "DRAM bandwidth (GB/s)"
    assert [t.get_text() for t in pct.get_yticklabels()] == ["pool", "score", "topk", "attention"]
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any("sm__throughput.avg.pct_of_peak_sustained_elapsed" in t for t in legend)
    assert any("lts__t_sector_hit_rate.pct" in t for t in legend) and any("DRAM read" in t for t in legend)
    # score: 2 GB read per call of 1 ms (pass 0 only) = 2000 GB/s; the replay pass is not counted.
    widths = {round(b.get_width()) for b in dram.patches}
    assert 2000 in widths and 500 in widths
    cap = " ".join(t.get_text() for t in fig.texts).replace("\n", " ")
    assert "GB/s" in cap and "pass 0" in cap and "GA100" in cap
    png, _ = save(fig, str(tmp_path), "counters")
    check_png(png)
    # Without kernel records there is no stage kernel time: GB per stage call, and the caption says why.
    syn._detail[schema.KERNELS] = pd.DataFrame()
    fig = FAMILIES["counters"][0](syn)
    assert fig.axes[1].get_xlabel() == "DRAM traffic per stage call (GB)"
    assert {round(b.get_width(), 3) for b in fig.axes[1].patches} >= {2.0, 0.5}
    assert "no GB/s" in " ".join(t.get_text() for t in fig.texts).replace("\n", " ")


def test_counters_on_cpu_backend_says_why(tmp_path):
    # profile.counters = on, but the points run on the CPU backend: each point records
    # counters_status = unavailable and the reason, and the figure's NoData message carries that reason.
    f = run_sweep(tmp_path, "cpu_counters", REQUESTS + "\n[profile]\ncounters = on\n")
    r = load(f)
    pa = r.point_attrs()
    assert len(pa) == 3 and set(pa[schema.COUNTERS_STATUS]) == {"unavailable"}
    reason = pa[schema.COUNTERS_REASON].iloc[0]
    assert "cpu backend" in reason
    with pytest.raises(NoData) as e:
        FAMILIES["counters"][0](r)
    msg = str(e.value)
    assert "counters" in msg and reason in msg and "unavailable in 3 points" in msg


def test_report_has_a_row_per_claim(res, files, tmp_path):
    rows, paths = claims.write_report(res, files, str(tmp_path))
    assert [r.id for r in rows] == [f.__name__ for f in claims.CLAIMS] and len(rows) == 9
    by = {r.id: r for r in rows}
    assert all(r.verdict in claims.VERDICTS for r in rows)
    # No data, no guess.
    for cid in ("perplexity", "hybrid"):
        assert by[cid].verdict == claims.NOT_MEASURED and by[cid].measured == "—" and by[cid].reason
    # CPU timings are shown but a GPU claim is not judged on them.
    assert by["latency"].verdict == claims.NOT_MEASURED and "cpu:" in by["latency"].measured
    assert "GPU" in by["latency"].reason
    # Measured from the data: G = 4 stores a quarter of the bytes -> 4.00x; but only at 4Ki tokens, not 1M.
    assert "4.00×" in by["memory"].measured and by["memory"].verdict == claims.PARTIALLY
    assert "not 1M" in by["memory"].reason
    assert by["macs"].measured.startswith("7")  # about 75 % fewer
    assert "2M" in by["tier_hits"].reason and "4Ki" in by["tier_hits"].reason
    # cache_opt_hit_rate is shown as a reference, not a bound; the bound is cache_opt_single_hit_rate.
    assert "OPT bound" not in by["overall_hits"].measured
    assert "a reference and not a bound" in by["overall_hits"].measured
    assert "upper bound" in by["overall_hits"].measured
    md = open(paths[0]).read()
    table = [line for line in md.splitlines() if line.startswith("| ") and not line.startswith("| #")]
    assert len(table) == len(claims.CLAIMS)
    assert all(c[0] in md for c in claims.CLAIM_TEXT.values())
    page = open(paths[1]).read()
    assert page.count("<tr>") == len(claims.CLAIMS) + 1 and "not measured" in page


def test_report_judges_gpu_claims_on_gpu_data(res):
    rows = {r.id: r for r in claims.evaluate(synthetic_results(res))}
    assert rows["latency"].verdict != claims.NOT_MEASURED and "cuda:" in rows["latency"].measured
    # The A100 check reads run_device (the root attribute names no A100 here).
    assert rows["throughput"].verdict != claims.NOT_MEASURED and "cuda:" in rows["throughput"].measured
    assert "not an A100" not in rows["throughput"].reason
    assert rows["hybrid"].verdict == claims.SUPPORTED and "2.30×" in rows["hybrid"].measured


def test_timing_claims_and_figures_leave_batched_gpu_points_out(res):
    # Batched GPU points carry the whole batch's times: the per-request timing claims must not change when
    # they are present (here 1000x slower), and the latency figure says it left them out.
    with_b, without = synthetic_results(res), synthetic_results(res, batched=False)
    assert with_b.points[schema.BATCHED].sum() > 0 and not without.points[schema.BATCHED].any()
    a = {r.id: r for r in claims.evaluate(with_b)}
    b = {r.id: r for r in claims.evaluate(without)}
    for cid in ("latency", "throughput"):
        assert a[cid].measured == b[cid].measured and a[cid].verdict == b[cid].verdict, cid
    assert "batched GPU points left out" in a["latency"].source
    fig = FAMILIES["latency"][0](with_b)
    assert any("batched GPU points left out" in t.get_text().replace("\n", " ") for t in fig.texts)
    # The batched figure: step time and rate vs B from exactly those points.
    fig = FAMILIES["batched"][0](with_b)
    assert "requests decoded together B (requests)" in labels(fig)
    xs = sorted({float(x) for ax in fig.axes[:1] for line in ax.lines for x in line.get_xdata()})
    assert xs == [1.0, 4.0, 16.0]


def test_cli_figures_and_report(files, tmp_path, capsys):
    out = tmp_path / "figs"
    # Two families the data hold and every one it does not (the others are drawn by the tests above).
    assert main(["figures", *files, "--out", str(out), "--only", "memory", "macs", *FUTURE]) == 0
    text = capsys.readouterr().out
    for fam in ("memory", "macs"):
        assert os.path.exists(out / f"{fam}.png") and os.path.exists(out / f"{fam}.pdf")
    for fam in FUTURE:
        assert f"skip {fam}:" in text
    assert "2 figures" in text and f"{len(FUTURE)} families skipped" in text
    assert main(["report", files[0], "--out", str(tmp_path / "rep")]) == 0
    assert os.path.exists(tmp_path / "rep" / "claims.md")


def with_block_topk_points(res):
    """(base, mixed, slow): the synthetic GPU results; the same with copies of their cuda points at
    kernels.topk = block whose top-k takes 10x longer; those copies."""
    base = synthetic_results(res, batched=False)
    slow = base.points[base.points[schema.RUN_BACKEND] == "cuda"].copy()
    slow["kernels.topk"] = "block"
    slow["topk_ms"] = slow["topk_ms"] * 10
    slow["index"] = slow["index"] + 50_000
    mixed = copy.copy(base)
    mixed.points = pd.concat([base.points, slow], ignore_index=True)
    return base, mixed, slow


def test_kernel_form_axes_are_read_and_timing_claims_take_one_form(res, tmp_path):
    # A runner file with [kernels] axes: the columns are read; the cpu points say the forms did not apply.
    f = run_sweep(tmp_path, "forms", "[workload]\ntokens = 2Ki\ndim = 32\nindex_heads = 2\nattn_dim = 32\n"
                                     "attn_heads = 1\nvalue_dim = 32\nsteps = 2\n[select]\ntopk_tokens = 256\n"
                                     "[kernels]\ntopk = chain, block\n")
    pts = load([f]).points
    assert sorted(pts["kernels.topk"]) == ["block", "chain"]
    assert set(pts["kernels.attention"]) == {"auto"}  # not an axis: the default
    assert all("apply to the cuda backend only" in r for r in pts["reason"])
    # Timing claims take one form (auto when present) and say so, never a median over several forms.
    base, mixed, slow = with_block_topk_points(res)
    a = {r.id: r for r in claims.evaluate(base)}["latency"]
    b = {r.id: r for r in claims.evaluate(mixed)}["latency"]
    assert a.measured == b.measured and a.verdict == b.verdict
    assert "top-k form = auto" in b.source, b.source
    only_block = copy.copy(base)
    only_block.points = pd.concat([base.points[base.points[schema.RUN_BACKEND] != "cuda"], slow], ignore_index=True)
    c = {r.id: r for r in claims.evaluate(only_block)}["latency"]
    assert c.measured != a.measured  # the block points' own times, 10x the top-k


def test_forms_figure(res, tmp_path):
    # No [kernels] axis on a GPU backend: no data, saying what would give some.
    with pytest.raises(NoData) as e:
        FAMILIES["forms"][0](res)
    assert str(e.value).startswith("forms: ") and "configs/kernel_forms.ini" in str(e.value)
    # A runner file with two form axes, its points relabelled as GPU points (this machine has none): a row of
    # stage panels per varying form key, a bar group per form in the forms' order, a bar per weighting.
    f = run_sweep(tmp_path, "forms2", "[workload]\ntokens = 2Ki\ndim = 32\nindex_heads = 2\nattn_dim = 32\n"
                                      "attn_heads = 1\nvalue_dim = 32\nsteps = 2\n[pool]\nweighting = exact, uniform\n"
                                      "[select]\ntopk_tokens = 256\n[kernels]\ntopk = block, chain\n"
                                      "score_math = bf16, auto\n")
    r = load([f])
    r.points[schema.RUN_BACKEND] = "cuda"
    r.points[schema.RUN_DEVICE] = "NVIDIA H200 (synthetic)"
    fig = FAMILIES["forms"][0](r)
    axes = fig.axes
    assert len(axes) == 6  # 2 varying keys x (scoring, top-k, attention)
    assert [t.get_text() for t in axes[0].get_xticklabels()] == ["auto", "bf16"]  # kernels.score_math first
    assert [t.get_text() for t in axes[3].get_xticklabels()] == ["chain", "block"]
    assert axes[0].get_xlabel() == "kernels.score_math" and axes[3].get_xlabel() == "kernels.topk"
    assert all(len(ax.patches) == 4 for ax in axes)  # 2 forms x 2 weightings
    cap = " ".join(t.get_text() for t in fig.texts).replace("\n", " ")
    assert "top-k form = auto" not in cap  # topk has no auto value here: the most common one is taken, and named
    assert "score math row: top-k form =" in cap and "top-k form row: score math = auto" in cap
    for lab in labels(fig):
        if lab and not lab.startswith("kernels."):
            assert "(" in lab, f"axis label without a unit: {lab!r}"
    png, _ = save(fig, str(tmp_path), "forms")
    check_png(png)


def test_latency_claim_lists_every_kernel_form(res):
    # GPU points at two top-k forms: the verdict stays on one form (auto), and the reason lists both, the
    # fastest compressed indexer first, without lowering the verdict.
    base, mixed, _ = with_block_topk_points(res)
    a = {r.id: r for r in claims.evaluate(base)}["latency"]
    b = {r.id: r for r in claims.evaluate(mixed)}["latency"]
    assert b.verdict == a.verdict and b.measured == a.measured
    assert "By kernel forms" not in a.reason
    i = b.reason.index("By kernel forms (topk), fastest compressed indexer first: auto: ")
    assert b.reason.index("; block: ", i) > i, b.reason


# ---------------------------------------------------------------------------------------- audit fixes
# Two sweeps read together, as `report quickstart.h5 context_scaling.h5`: A has the reference scheme (hybrid) at
# one context only; B has many contexts but no hybrid, and shares A's 2Ki (other steps: a different sweep).
SWEEP_A = """
[workload]
tokens = 2Ki
dim = 32
index_heads = 2
attn_dim = 32
attn_heads = 1
value_dim = 32
steps = 4

[pool]
weighting = exact, uniform, hybrid
group_size = 4

[select]
topk_tokens = 256
"""
SWEEP_B = """
[workload]
tokens = pow2:9..14
dim = 32
index_heads = 2
attn_dim = 32
attn_heads = 1
value_dim = 32
steps = 2

[pool]
weighting = exact, uniform
group_size = 4

[select]
topk_tokens = 256
"""


@pytest.fixture(scope="session")
def two_sweeps(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("two_sweeps")
    return [run_sweep(tmp, "a", SWEEP_A), run_sweep(tmp, "b", SWEEP_B)]


def test_comparison_claims_use_a_context_where_both_sides_exist(two_sweeps):
    a, b = two_sweeps
    r = load(two_sweeps)
    assert r.points["context"].max() == 16384 and set(r.points.loc[r.points["file"] == a, "context"]) == {2048}
    rows = {row.id: row for row in claims.evaluate(r)}
    for cid in ("latency", "accuracy"):
        row = rows[cid]
        assert "nan" not in row.measured.lower() and "nan" not in row.reason.lower(), (cid, row.measured)
        # Compared at 2Ki, the largest context with both the exact indexer and hybrid, from sweep A only.
        assert row.source.startswith("T = 2Ki tokens"), row.source
        assert os.path.basename(a) in row.source and os.path.basename(b) not in row.source, row.source
        assert "the results go up to 16Ki" in row.source
    assert "(hybrid)" in rows["accuracy"].measured and rows["accuracy"].verdict != claims.NOT_MEASURED
    # Without A's exact indexer there is no context with both sides: not measured, saying why.
    r2 = copy.copy(r)
    r2.points = r.points[~((r.points["file"] == a) & (r.points["pool.weighting"] == "exact"))]
    rows = {row.id: row for row in claims.evaluate(r2)}
    for cid in ("latency", "accuracy"):
        assert rows[cid].verdict == claims.NOT_MEASURED and rows[cid].measured == "—"
        assert "no context length at which exact and hybrid both" in rows[cid].reason, rows[cid].reason
        assert "hybrid at 2Ki" in rows[cid].reason
    # Never a verdict on a NaN, in any row.
    for row in claims.evaluate(r) + claims.evaluate(r2):
        assert row.verdict == claims.NOT_MEASURED or "nan" not in row.measured.lower(), row


def test_nan_measured_value_gets_no_verdict(res):
    r = copy.copy(res)
    r.points = res.points.copy()
    orig = claims.macs

    def nan_macs(x):
        row = orig(x)
        row.measured = "nan% fewer"
        return row

    claims.CLAIMS = tuple(nan_macs if f is orig else f for f in claims.CLAIMS)
    try:
        row = {row.id: row for row in claims.evaluate(r)}["macs"]
    finally:
        claims.CLAIMS = tuple(orig if f is nan_macs else f for f in claims.CLAIMS)
    assert row.verdict == claims.NOT_MEASURED and "NaN" in row.reason


def _visible_ticklabels(ax):
    return [t for t in ax.get_xticklabels() if t.get_visible() and t.get_text()]


@pytest.mark.parametrize("family", ["latency", "memory", "macs", "cache"])
def test_context_axes_span_the_data_with_readable_ticks(two_sweeps, family):
    # The cache figure draws the reference scheme, hybrid, which only sweep A has: sweep B alone there.
    fig = FAMILIES[family][0](load(two_sweeps[1:] if family == "cache" else two_sweeps))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ctx = [512.0 * 2 ** i for i in range(6)]
    axes = [ax for ax in fig.axes if ax.get_xlabel() == "context length T (tokens)"]
    if family == "latency":
        axes = list(fig.axes)  # shared x: the top row's labels are hidden, its limits the same
    assert axes
    for ax in axes:
        lo, hi = ax.get_xlim()
        # The data fill the panel: limits within a factor 2 of the smallest and largest context.
        assert ctx[0] / 2 <= lo < ctx[0] and ctx[-1] < hi <= ctx[-1] * 2, (family, lo, hi)
        assert sorted(ax.get_xticks()) == ctx
        labs = _visible_ticklabels(ax)
        if not labs:
            continue
        assert {t.get_text() for t in labs} <= {"512", "1Ki", "2Ki", "4Ki", "8Ki", "16Ki"}
        assert "16Ki" in {t.get_text() for t in labs}
        boxes = sorted((t.get_window_extent(renderer) for t in labs), key=lambda bb: bb.x0)
        assert all(q.x0 >= p.x1 for p, q in zip(boxes, boxes[1:])), (family, [t.get_text() for t in labs])


def test_crowded_tick_labels_are_thinned():
    import matplotlib.pyplot as plt
    from analysis.common import context_axis, finish
    fig, ax = plt.subplots(figsize=(2.2, 2))
    xs = [2.0 ** i for i in range(10, 22)]
    ax.errorbar(xs, xs, yerr=[1.0] * len(xs))
    context_axis(ax, xs)
    finish(fig, "t")
    fig.canvas.draw()
    labs = _visible_ticklabels(ax)
    boxes = sorted((t.get_window_extent(fig.canvas.get_renderer()) for t in labs), key=lambda bb: bb.x0)
    assert 2 <= len(labs) < len(xs) and "2Mi" in [t.get_text() for t in labs]
    assert all(q.x0 >= p.x1 for p, q in zip(boxes, boxes[1:]))
    plt.close(fig)


def _rows_with_hits(res, l1, l2, l3, overall, context=None):
    r = copy.copy(res)
    p = res.points.copy()
    for c, v in (("cache_l1_hit_rate", l1), ("cache_l2_hit_rate", l2), ("cache_l3_hit_rate", l3),
                 (schema.CACHE_HIT_RATE, overall)):
        p[c] = v
    if context:
        p["context"] = float(context)
    r.points = p
    return {row.id: row for row in claims.evaluate(r)}


def test_cache_verdicts_follow_the_per_tier_two_point_rule(res):
    # One tier of three, and an overall rate 14 points short: not supported (no partial credit for hit rates).
    rows = _rows_with_hits(res, 0.0, 0.0, 0.826, 0.737)
    assert rows["tier_hits"].verdict == claims.NOT_SUPPORTED, rows["tier_hits"].reason
    assert "L1 92.0 points short" in rows["tier_hits"].reason
    assert rows["overall_hits"].verdict == claims.NOT_SUPPORTED, rows["overall_hits"].reason
    assert "14.3 points short" in rows["overall_hits"].reason
    # Every tier within 2 points, overall within 2 points: supported at 2Mi tokens, partially at 4Ki (the
    # claim's context length differs), which is the only thing "partially" means for hit rates.
    rows = _rows_with_hits(res, 0.905, 0.84, 0.77, 0.865, context=2 * 1024 * 1024)
    assert rows["tier_hits"].verdict == claims.SUPPORTED and rows["overall_hits"].verdict == claims.SUPPORTED
    rows = _rows_with_hits(res, 0.905, 0.84, 0.77, 0.865)
    assert rows["tier_hits"].verdict == claims.PARTIALLY and "2M" in rows["tier_hits"].reason
    assert rows["overall_hits"].verdict == claims.PARTIALLY
    rows = _rows_with_hits(res, 0.92, 0.85, 0.75, 0.855)  # L3 3 points short, overall 2.5 short
    assert rows["tier_hits"].verdict == claims.NOT_SUPPORTED and rows["overall_hits"].verdict == claims.NOT_SUPPORTED
    assert "no partial credit for hit rates" in claims.RULES and "80%-of" not in claims.RULES


def test_report_and_figures_carry_provenance(tmp_path):
    cfg = tmp_path / "p.ini"
    cfg.write_text(REQUESTS)
    out = tmp_path / "p.h5"
    subprocess.run([indexpool_bin(), "run", str(cfg), "--overwrite", "--set", "workload.steps=3",
                    "--set", f"output.path={out}"], check=True, capture_output=True, timeout=60)
    with h5py.File(out, "r") as f:
        a = {k: (v.decode() if isinstance(v, bytes) else str(v)) for k, v in f.attrs.items()}
    r = load([str(out)])
    rows, (md, ht) = claims.write_report(r, [str(out)], str(tmp_path / "rep"))
    for text in (open(md).read(), open(ht).read()):
        assert "Report created 20" in text
        for k in ("tool_version", "git_revision", "created_utc", "sweep_id"):
            assert a[k] in text, k
        assert "workload.steps=3" in text and str(out) in text
    src = {row.id: row for row in rows}["memory"].source
    assert "--set workload.steps=3" in src and a["git_revision"] in src
    assert "output.path" not in src  # the output path names the file, not the data
    fig = FAMILIES["cache"][0](r)
    cap = " ".join(t.get_text() for t in fig.texts).replace("\n", " ")
    assert f"config {a['config_path']} --set workload.steps=3" in cap and f"sweep {a['sweep_id'][:8]}" in cap
    png, pdf = save(fig, str(tmp_path / "f"), "cache")
    from PIL import Image
    meta = Image.open(png).text
    assert str(out) in meta["Source"] and a["git_revision"] in meta["Source"] and a["git_revision"] in meta["Comment"]
    raw = open(pdf, "rb").read()
    assert a["git_revision"].encode() in raw and os.path.basename(str(out)).encode() in raw


def test_points_of_different_sweeps_are_not_pooled(two_sweeps):
    from analysis.common import summarize
    r = load(two_sweeps)
    d = r.ok[(r.ok["pool.weighting"] == "uniform")]
    assert d.loc[d["context"] == 2048, "attr.sweep_id"].nunique() == 2
    s, kinds = summarize(r, d, ["context"], "score_ms")
    assert (s["n"] == 1).all(), s
    assert not any("repeated points" in k for k in kinds) and any("not pooled across sweeps" in k for k in kinds)
    fig = FAMILIES["latency"][0](r)
    cap = " ".join(t.get_text() for t in fig.texts).replace("\n", " ")
    assert "repeated points" not in cap and "not pooled across sweeps" in cap


def test_latency_claim_is_the_median_over_seeds_with_range(res):
    syn = synthetic_results(res, batched=False)
    pts = syn.points
    # A third seed of the GPU points, 10x slower: the median differs from the mean.
    third = pts[(pts[schema.RUN_BACKEND] == "cuda") & (pts["workload.seed"] == 1)].copy()
    third["workload.seed"] = 2
    third["score_ms"] *= 10
    third["topk_ms"] *= 10
    third["index"] += 60_000
    r = copy.copy(syn)
    r.points = pd.concat([pts, third], ignore_index=True)
    row = {x.id: x for x in claims.evaluate(r)}["latency"]
    p = r.points
    # The claim's slice: the cuda points at the largest context, fp32, G = 4 (the exact indexer's too).
    sl = p[(p[schema.RUN_BACKEND] == "cuda") & (p["context"] == p["context"].max()) & (p["pool.precision"] == "fp32")
           & (p["pool.group_size"] == 4)]
    for w in (schema.EXACT, "tfidf"):
        v = (sl.loc[sl["pool.weighting"] == w, "score_ms"] + sl.loc[sl["pool.weighting"] == w, "topk_ms"]).astype(float)
        assert len(v) == 3 and abs(v.median() - v.mean()) > 1e-3
        assert f"{v.median():.3f} ms (median of 3 seeds, range {v.min():.3f}–{v.max():.3f})" in row.measured, row.measured
    assert "3 seeds each (times: median over them" in row.source


def test_captions_name_a_sliced_setting_once(res):
    # The grid has fp32 and fp8: the heat maps and the latency figure take fp32, said once (the slice note), not
    # again among the settings the caption lists as constant.
    for family in ("ablation", "latency"):
        cap = " ".join(t.get_text() for t in FAMILIES[family][0](res).texts).replace("\n", " ")
        assert cap.count("precision = fp32") == 1, (family, cap)


def test_latency_figure_pooling_label_says_per_build(res):
    fig = FAMILIES["latency"][0](res)
    # The label says it (wrapped to the panel's height); no note inside the panel, where it covered data points.
    assert fig.axes[0].get_ylabel().replace("\n", " ") == "pooling time per index build or update (ms)"
    assert not fig.axes[0].texts
    assert fig.axes[1].get_ylabel().replace("\n", " ") == "scoring time per step (ms)"


def test_cli_bad_paths_are_one_line_errors(files, tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    for cmd in ("figures", "report"):
        assert main([cmd, files[1], "--out", str(afile)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "not a directory" in err and "Traceback" not in err, err
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "a directory, not a results file" in err and "errno" not in err, err


class _FillingFile:
    """A file that takes `room` more bytes, then writes part of the next chunk and raises ENOSPC, as a full
    disk does."""

    def __init__(self, f, room):
        self._f, self._room = f, room

    def write(self, data):
        if len(data) > self._room:
            self._f.write(data[:self._room])
            self._room = 0
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._room -= len(data)
        return self._f.write(data)

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()


def disk_full(monkeypatch, room=1000, only=None):
    """Every file opened for writing through os.fdopen (only: those whose name contains it) fills the disk after
    `room` bytes."""
    real = os.fdopen

    def fdopen(fd, mode="r", *a, **kw):
        f = real(fd, mode, *a, **kw)
        if "w" not in mode or (only and only not in os.readlink(f"/proc/self/fd/{fd}")):
            return f
        return _FillingFile(f, room)

    if only and not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc/self/fd to tell which file is being written")
    monkeypatch.setattr(os, "fdopen", fdopen)


def snapshot(folder):
    return {n: open(os.path.join(folder, n), "rb").read() for n in sorted(os.listdir(folder))}


def test_a_failed_report_write_leaves_the_old_report_whole(files, tmp_path, capsys, monkeypatch):
    out = tmp_path / "rep"
    assert main(["report", files[0], "--out", str(out)]) == 0
    old = snapshot(out)
    assert sorted(old) == ["claims.html", "claims.md"] and all(old.values())
    capsys.readouterr()
    disk_full(monkeypatch, room=1000)
    assert main(["report", *files, "--out", str(out)]) == 2  # another report: the old one must survive
    err = capsys.readouterr().err
    assert err == f"analysis report: cannot write '{out / 'claims.md'}': No space left on device\n", err
    assert snapshot(out) == old  # unchanged, and no temporary left beside it
    # Into a new folder: nothing left at all (no empty or partial claims.md).
    assert main(["report", files[0], "--out", str(tmp_path / "new")]) == 2
    assert "cannot write" in capsys.readouterr().err and os.listdir(tmp_path / "new") == []


@pytest.mark.parametrize("failing", ["memory.png", "memory.pdf"])
def test_a_failed_figure_write_leaves_the_old_figure_whole(files, tmp_path, capsys, monkeypatch, failing):
    out = tmp_path / "figs"
    assert main(["figures", files[0], "--out", str(out), "--only", "memory"]) == 0
    old = snapshot(out)
    assert sorted(old) == ["memory.pdf", "memory.png"]
    capsys.readouterr()
    # The PDF backend, its disk full mid-stream, raises an AttributeError while closing the stream: the message
    # is still the OSError's, with no traceback.
    disk_full(monkeypatch, room=5000, only=failing)
    assert main(["figures", *files, "--out", str(out), "--only", "memory"]) == 2
    err = capsys.readouterr().err
    assert err == f"analysis figures: cannot write '{out / failing}': No space left on device\n", err
    now = snapshot(out)
    assert sorted(now) == ["memory.pdf", "memory.png"]  # no temporary
    assert now[failing] == old[failing]
    # Into a new folder: the failing file is not there at all; the other, written before it, is whole.
    new = tmp_path / "new"
    assert main(["figures", *files, "--out", str(new), "--only", "memory"]) == 2
    assert f"cannot write '{new / failing}'" in capsys.readouterr().err
    assert os.listdir(new) == ([] if failing.endswith("png") else ["memory.png"])
    if failing.endswith("pdf"):
        check_png(str(new / "memory.png"))


def test_write_output_names_the_oserror_behind_a_secondary_error(tmp_path):
    from analysis.common import OutputError, write_output
    target = tmp_path / "a.txt"
    target.write_text("old")
    os.chmod(target, 0o640)

    def broken(f):
        f.write("partial")
        try:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        except OSError:
            raise AttributeError("'Stream' object has no attribute 'pos'")  # as matplotlib's PDF backend does

    with pytest.raises(OutputError) as e:
        write_output(str(target), broken)
    assert str(e.value) == f"cannot write '{target}': No space left on device"
    assert e.value.oserror.errno == errno.ENOSPC
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["a.txt"]
    with pytest.raises(ZeroDivisionError):  # not an OSError: a bug, raised as it is; no temporary left
        write_output(str(target), lambda f: 1 / 0)
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["a.txt"]
    assert write_output(str(target), lambda f: f.write("new ±")) == str(target)
    assert target.read_text(encoding="utf-8") == "new ±" and os.listdir(tmp_path) == ["a.txt"]
    assert os.stat(target).st_mode & 0o777 == 0o640  # the replaced file's mode is kept
    # Written through a symlink, not replacing it.
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    write_output(str(link), lambda f: f.write("via link"))
    assert link.is_symlink() and target.read_text() == "via link"


def _mount_tmpfs(path, size):
    if not sys.platform.startswith("linux") or os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("a real full disk needs root on Linux to mount a tmpfs (the monkeypatched tests cover the logic)")
    os.makedirs(path, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True,
                       text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip() or r.returncode}")


def _fill(folder, leave):
    """Fills folder's file system but `leave` bytes (a whole number of 4 KiB pages)."""
    st = os.statvfs(folder)
    free = st.f_bavail * st.f_frsize
    with open(os.path.join(folder, "filler"), "wb") as f:
        f.write(b"\0" * max(0, free - leave))


def test_a_full_tmpfs_leaves_old_outputs_whole(files, tmp_path, capsys):
    mnt = tmp_path / "mnt"
    _mount_tmpfs(mnt, "4m")
    try:
        # The report: a good one, the disk filled, another report of more files (longer) fails.
        rep = mnt / "rep"
        assert main(["report", files[0], "--out", str(rep)]) == 0
        old = snapshot(rep)
        _fill(str(mnt), 0)
        capsys.readouterr()
        assert main(["report", *files, "--out", str(rep)]) == 2
        err = capsys.readouterr().err
        assert re.fullmatch(rf"analysis report: cannot write '{re.escape(str(rep))}/claims\.(md|html)': "
                            r"No space left on device\n", err), err
        assert snapshot(rep) == old
        os.remove(mnt / "filler")
        # Figures: room for the PNG and 8 KiB, so the PDF fails mid-stream (matplotlib's secondary error).
        ref = save(FAMILIES["memory"][0](load([files[0]])), str(tmp_path / "ref"), "memory")[0]
        _fill(str(mnt), -(-os.path.getsize(ref) // 4096) * 4096 + 8192)
        figs = mnt / "figs"
        assert main(["figures", files[0], "--out", str(figs), "--only", "memory"]) == 2
        err = capsys.readouterr().err
        assert err == f"analysis figures: cannot write '{figs / 'memory.pdf'}': No space left on device\n", err
        assert os.listdir(figs) == ["memory.png"]
        check_png(str(figs / "memory.png"))
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_mrc_capacity_is_in_bytes_per_curve(res):
    # Every curve's x is its object count times its own object size: the exact indexer's objects are single
    # tokens (K and V of one token: (32 + 32) x 2 B = 128 B), a pooled scheme's groups of G tokens; the tier
    # lines are the tiers' cumulative capacities in bytes, valid for every curve alike.
    fig = FAMILIES["mrc"][0](res)
    mrc = res.detail(schema.CACHE_MRC)
    token = (32 + 32) * 2
    pts = res.ok
    pts = pts[(pts["file"] == pts["file"].iloc[0]) & (pts["pool.precision"] == "fp32") & (pts["workload.seed"] == 0)
              & (pts["context"] == 4096)]  # the slice the figure draws: fp32, one seed, the largest context
    for ax in fig.axes:
        if not ax.get_title().startswith("G = "):
            continue
        g = int(ax.get_title().split("= ")[1])
        assert ax.get_xlabel() == "LRU capacity (bytes)"
        curves = {ln.get_label(): ln for ln in ax.lines if not ln.get_label().startswith("_")}
        assert {"exact", "uniform", "tfidf"} <= set(curves), curves
        for w, ln in curves.items():
            unit = token if w == "exact" else g * token
            m = mrc.merge(pts[(pts["pool.weighting"] == w) & (pts["pool.group_size"] == g)], on=["file", "index"])
            xs = np.asarray(ln.get_xdata(), dtype=float)
            assert m["index"].nunique() == 1 and xs.max() == pytest.approx(m["capacity_entries"].max() * unit), (w, g)
            assert xs.min() == pytest.approx(unit), (w, g)
        tiers = sorted({float(ln.get_xdata()[0]) for ln in ax.lines if ln.get_label().startswith("_")})
        assert tiers == [16384.0, 16384.0 + 262144, 16384.0 + 262144 + 8 * 2 ** 20]
    cap = " ".join(t.get_text() for t in fig.texts).replace("\n", " ")
    assert "exact indexer 128 B" in cap and "G = 4: 512 B" in cap and "groups of" not in " ".join(labels(fig))


def test_captions_say_which_points_were_skipped(tmp_path):
    import matplotlib.pyplot as plt
    # sweep.memory_limit skips the points estimated above it (exact and uniform at 8Ki and 16Ki tokens): the
    # context axis stops at 4Ki, and every figure drawn against it says how many points are missing and why.
    cfg = tmp_path / "sk.ini"
    cfg.write_text(SWEEP_SKIP)
    out = tmp_path / "sk.h5"
    subprocess.run([indexpool_bin(), "run", str(cfg), "--overwrite", "--set", "sweep.memory_limit=3Mi",
                    "--set", f"output.path={out}"], check=True, capture_output=True, timeout=60)
    r = load([str(out)])
    skipped = r.points[r.points["status"] != "ok"]
    assert len(skipped) == 4 and set(skipped["context"]) == {8192, 16384}, r.points[["status", "reason", "context"]]
    assert skipped["reason"].str.contains("sweep.memory_limit").all()
    for family, n in (("memory", 4), ("latency", 4), ("macs", 4), ("cache", 2)):
        fig = FAMILIES[family][0](r)
        cap = " ".join(t.get_text() for t in fig.texts).replace("\n", " ")
        assert f"Not drawn: {n} points skipped by the runner at T = 8Ki, 16Ki (estimated memory" in cap, (family, cap)
        assert "exceeds the limit 3.0 MiB (sweep.memory_limit))" in cap, (family, cap)
        plt.close(fig)
    # A file without skipped points says nothing of the kind.
    ok = load([str(run_sweep(tmp_path, "noskip", SWEEP_SKIP.replace("pow2:11..14", "pow2:11..12")))])
    for family in ("memory", "latency", "macs", "cache"):
        fig = FAMILIES[family][0](ok)
        assert "Not drawn" not in " ".join(t.get_text() for t in fig.texts)
        plt.close(fig)


SWEEP_SKIP = SWEEP_B.replace("tokens = pow2:9..14", "tokens = pow2:11..14")
assert "pow2:11..14" in SWEEP_SKIP


def test_reason_summary_gives_ranges_of_differing_numbers():
    from analysis.common import reason_summary
    text = reason_summary(["estimated memory 263.2 MiB exceeds the limit 200.0 MiB (sweep.memory_limit)",
                           "estimated memory 1.0 GiB exceeds the limit 200.0 MiB (sweep.memory_limit)",
                           "estimated memory 214.7 MiB exceeds the limit 200.0 MiB (sweep.memory_limit)"])
    assert text == "estimated memory 214.7 MiB–1.0 GiB exceeds the limit 200.0 MiB (sweep.memory_limit)"


def test_memory_bar_labels_keep_fractional_bytes(res):
    # Panel (b) labels each bar with its bytes per token: a fraction (int8 at G = 8: 8.5 B with its scale) must
    # not be rounded to a whole byte; whole numbers stay without decimals.
    import matplotlib.pyplot as plt
    r = copy.copy(res)
    pooled = (res.points["pool.precision"] == "fp8") & (res.points["pool.weighting"] != "exact")
    r.points = res.points.assign(index_bytes_per_token=np.where(pooled, res.points["index_bytes_per_token"] + 0.5,
                                                                res.points["index_bytes_per_token"]))
    fig = FAMILIES["memory"][0](r)
    labels = {t.get_text() for t in fig.axes[1].texts}
    plt.close(fig)
    assert {"9.5", "18.5", "36"} <= labels, labels  # fp8 D = 32 (+4 B scale): G = 4, G = 2, exact
    assert not {"10", "18", "19"} & labels, labels


def test_memory_series_tell_g_by_marker_and_precision_by_fill_and_offset(res):
    # Panel (a) with fp32 and fp8 at G = 2 and 4: the marker is G's, the fill and a sideways offset the
    # precision's, so no two series share marker, fill and position (a one-T sweep draws no lines).
    fig = FAMILIES["memory"][0](res)
    lines = {ln.get_label(): ln for ln in fig.axes[0].lines}
    g2, g2_fp8, g4 = lines["pooled G=2, fp32"], lines["pooled G=2, fp8"], lines["pooled G=4, fp32"]
    assert g2.get_marker() == g2_fp8.get_marker() != g4.get_marker()
    assert g2.get_fillstyle() != g2_fp8.get_fillstyle()
    assert not np.allclose(g2.get_xdata(), g2_fp8.get_xdata())
    seen = {(ln.get_marker(), ln.get_fillstyle(), ln.get_color(), tuple(np.round(ln.get_xdata(), 6)))
            for ln in fig.axes[0].lines}
    assert len(seen) == len(fig.axes[0].lines)


def test_memory_claim_is_in_mib_and_says_the_context_differs(res):
    # One unit system (MiB) in the measured value and the reason; at 4Ki tokens the row says it was not measured
    # at the article's 1M, what the ratio is, and what the measured bytes per token give at 1M.
    import re
    row = {x.id: x for x in claims.evaluate(res)}["memory"]
    p = res.ok
    ex = p.loc[(p["pool.precision"] == "fp32") & (p["context"] == 4096), "exact_bytes_per_token"].iloc[0]
    for text in (row.measured, row.reason):
        # never decimal MB for our own numbers (the article's "32 MB" is quoted as the article wrote it)
        assert not re.search(r"\d(\.\d+)? MB\b", text.replace('"32 MB"', "")), text
    assert "T = 4Ki tokens (not the article's 1M)" in row.measured, row.measured
    assert f"at 1M tokens these bytes per token give {ex * 2 ** 20 / 2 ** 20:.1f} MiB" in row.measured, row.measured
    assert "The claim is the ratio: exact / pooled bytes per token = 4.00×" in row.reason, row.reason
    assert f"The exact index at 1M tokens is {ex:.1f} MiB here" in row.reason, row.reason
    # At 2Mi tokens: still MiB, and the exact index at 1M from its bytes per token.
    r = copy.copy(res)
    r.points = res.points.assign(context=float(1 << 21), tokens=float(1 << 21))
    row = {x.id: x for x in claims.evaluate(r)}["memory"]
    for text in (row.measured, row.reason):
        assert not re.search(r"\d(\.\d+)? MB\b", text.replace('"32 MB"', "")), text
    assert f"index per request at T = 2Mi tokens (not the article's 1M): {ex * 2:.1f} MiB" in row.measured
    assert f"The exact index at 1M tokens is {ex:.1f} MiB here" in row.reason, row.reason


def test_exact_only_sweep_skips_what_needs_pooled_schemes(tmp_path):
    # With only the exact indexer there is no reduction to draw (macs panel b), no weighting x G heat map, and its
    # miss-ratio curve is the same at every G: one macs panel, the ablation family skipped saying why, one MRC panel.
    import warnings
    import matplotlib.pyplot as plt
    text = GRID.replace("weighting = exact, uniform, tfidf", "weighting = exact").replace("seed = 0, 1", "seed = 0")
    r = load([run_sweep(tmp_path, "exact_only", text)])
    assert set(r.ok["pool.weighting"]) == {"exact"} and r.ok["pool.group_size"].nunique() == 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig = FAMILIES["macs"][0](r)
    assert not [w for w in caught if "No artists with labels" in str(w.message)], [str(w.message) for w in caught]
    assert len(fig.axes) == 1 and fig.axes[0].lines
    cap = " ".join(t.get_text() for t in fig.texts).replace("\n", " ")
    assert "No panel of the reduction against the exact indexer" in cap
    plt.close(fig)
    with pytest.raises(NoData) as e:
        FAMILIES["ablation"][0](r)
    assert str(e.value).startswith("ablation: no pooled scheme") and "only the exact indexer" in str(e.value)
    fig = FAMILIES["mrc"][0](r)
    assert len(fig.axes) == 1 and fig.axes[0].get_title() == "exact indexer (G does not apply)"
    plt.close(fig)


def test_latency_attention_throughput_counts_attended_tokens(res):
    # Attention reads only the k = select.topk_tokens selected tokens (k = 256 here; pooled at G = 4: 64 whole
    # groups, also 256 tokens), so its rate is attended tokens / attention time; scoring goes over the context,
    # so its rate stays T / scoring time.
    fig = FAMILIES["latency"][0](res)
    ax = {a.get_ylabel().replace("\n", " "): a for a in fig.axes}  # labels wrapped to the panel's height
    att = ax["attention throughput (attended tokens/s)"]
    assert "attention throughput (context tokens/s)" not in ax and "scoring throughput (context tokens/s)" in ax

    def series(a):  # errorbar: the container carries the label, its first line the data
        return {c.get_label(): c.lines[0] for c in a.containers}

    for time_label, rate, tokens in (("attention time per step (ms)", att, lambda x: 256.0),
                                     ("scoring time per step (ms)", ax["scoring throughput (context tokens/s)"],
                                      lambda x: 2.0 ** np.round(np.log2(x)))):
        times, rates = series(ax[time_label]), series(rate)
        assert set(times) == set(rates) and {"exact", "tfidf G=4"} <= set(rates), rates
        for lab, ln in rates.items():
            x = np.asarray(ln.get_xdata(), dtype=float)
            got = np.asarray(ln.get_ydata(), dtype=float) * np.asarray(times[lab].get_ydata(), dtype=float) / 1e3
            assert np.allclose(got, tokens(x)), (time_label, lab, got)
    cap = " ".join(t.get_text() for t in fig.texts).replace("\n", " ")
    assert "attention: attended tokens / attention time, the k = select.topk_tokens tokens it reads" in cap


def test_cache_figure_matches_its_caption(res, files):
    import matplotlib.pyplot as plt
    fig = FAMILIES["cache"][0](res)
    a = fig.axes[0]
    cap = " ".join(t.get_text() for t in fig.texts).replace("\n", " ")
    # The bound is drawn as the caption says: a black bar at each x, joined by a dotted line.
    bound = [ln for ln in a.lines if ln.get_label().startswith("overall upper bound")]
    assert bound and bound[0].get_marker() == "_" and bound[0].get_linestyle() == ":"
    assert bound[0].get_color() == "black"
    assert "black dotted:" not in cap and "black bar (—) at each x, joined by a dotted line" in cap
    # "Series at one x are offset sideways": every series, the overall rate and its OPT reference included.
    data = [c.lines[0] for c in a.containers] + [ln for ln in a.lines if not ln.get_label().startswith("_")]
    labels_ = [c.get_label() for c in a.containers] + [ln.get_label() for ln in data[len(a.containers):]]
    assert "overall" in labels_ and "overall OPT hierarchy (reference)" in labels_
    xs = []
    for ln in data:
        x = np.asarray(ln.get_xdata(), dtype=float)
        xs.append(float(x[np.argmin(np.abs(np.log2(x / 4096)))]))
    assert len(set(np.round(xs, 6))) == len(xs), dict(zip(labels_, xs))
    assert "every series at one x is offset sideways" in cap
    assert "Accesses: each selected group's keys and values (cache.object = kv)." in cap
    assert len(fig.axes) == 2  # the requests file varies B: panel (b) is drawn
    plt.close(fig)
    # cache.object = index: the caption says what an access is then.
    from analysis.figures import _cache_accesses
    assert _cache_accesses(pd.DataFrame({"cache.object": ["index"]})) == \
        "each selected group's stored index entry (cache.object = index)"
    # One request count (B = 1 only): panel (b) would repeat panel (a); it is left out, and the caption says so.
    fig = FAMILIES["cache"][0](load(files[0]))
    assert len(fig.axes) == 1 and fig.axes[0].get_xlabel() == "context length T (tokens)"
    cap = " ".join(t.get_text() for t in fig.texts).replace("\n", " ")
    assert "No panel vs concurrent requests: every point of the slice has B = 1." in cap
    plt.close(fig)


# A sweep axis no figure draws (workload.topic_weight): its values are different workloads, never pooled.
AXIS = """
[workload]
tokens = 2Ki
dim = 32
index_heads = 2
attn_dim = 32
attn_heads = 1
value_dim = 32
steps = 4
seed = 0, 1
topic_weight = 0.2, 0.9

[pool]
weighting = exact, hybrid
group_size = 4

[select]
topk_tokens = 256
"""


@pytest.fixture(scope="session")
def axis_file(tmp_path_factory):
    return run_sweep(tmp_path_factory.mktemp("axis"), "axis", AXIS)


def test_an_undrawn_axis_is_sliced_not_pooled(axis_file):
    from analysis.common import fix_others, summarize
    res = load(axis_file)
    p = res.ok
    assert sorted(p["workload.topic_weight"].unique()) == ["0.2", "0.9"]
    d, note = fix_others(p, keep=("pool.weighting", "pool.group_size"))
    assert d["workload.topic_weight"].nunique() == 1 and "workload.topic_weight = " in note, note
    tw = d["workload.topic_weight"].iloc[0]
    s, kinds = summarize(res, d, ["pool.weighting"], "mass_recall")
    for w, g in d.groupby("pool.weighting"):
        got = s.loc[s["pool.weighting"] == w, "center"].iloc[0]
        assert got == pytest.approx(g["mass_recall"].mean())  # the two seeds at one topic weight only
        both = p[p["pool.weighting"] == w]["mass_recall"].mean()
        assert got != pytest.approx(both)
    assert kinds == {"±1 s.d. over 2 seeds"}, kinds
    # The accuracy claim says which topic weight it took, and averages over the seeds of that one.
    row = {x.id: x for x in claims.evaluate(res)}["accuracy"]
    assert f"workload.topic_weight = {tw}" in row.source, row.source
    ex = d[d["pool.weighting"] == "exact"]["mass_recall"].mean()
    assert f"{ex:.4f} (exact indexer)" in row.measured, row.measured


def test_compared_schemes_are_paired_by_seed(axis_file):
    res = load(axis_file)
    p = res.points
    # Drop the exact indexer's seed-0 points and hybrid's seed-1 points: no seed has both.
    r = copy.copy(res)
    r.points = p[~(((p["pool.weighting"] == "exact") & (p["workload.seed"] == 0))
                   | ((p["pool.weighting"] == "hybrid") & (p["workload.seed"] == 1)))]
    row = {x.id: x for x in claims.evaluate(r)}["accuracy"]
    assert row.verdict == claims.NOT_MEASURED and "share no workload seed" in row.reason, row.reason
    # Only hybrid's seed-1 points gone: the comparison is at seed 0, and says so.
    r.points = p[~((p["pool.weighting"] == "hybrid") & (p["workload.seed"] == 1))]
    row = {x.id: x for x in claims.evaluate(r)}["accuracy"]
    assert "paired by workload seed: 0 (seed 1 left out" in row.source, row.source
    q = r.points[(r.points["status"] == "ok") & (r.points["workload.seed"] == 0)]
    tw = row.source.split("workload.topic_weight = ")[1].split(";")[0]
    ex = q[(q["pool.weighting"] == "exact") & (q["workload.topic_weight"] == tw)]["mass_recall"].mean()
    assert f"{ex:.4f} (exact indexer)" in row.measured, row.measured


def test_missing_shards_are_reported(tmp_path, capsys):
    b = indexpool_bin()
    cfg = tmp_path / "a.ini"
    cfg.write_text(AXIS)
    out = tmp_path / "s0.h5"
    subprocess.run([b, "run", str(cfg), "--overwrite", "--shard", "0/3", "--set", f"output.path={out}"], check=True,
                   capture_output=True, timeout=120)
    res = load(str(out))
    held = len(res.points)
    assert 0 < held < 8
    assert res.incomplete() == [f"sweep {res.points['attr.sweep_id'].iloc[0]}: {held} of 8 points in the given files"]
    assert main(["report", str(out), "--out", str(tmp_path / "rep")]) == 0
    assert f"warning: sweep {res.points['attr.sweep_id'].iloc[0]}: {held} of 8 points" in capsys.readouterr().err
    assert "**Partial results**" in (tmp_path / "rep" / "claims.md").read_text()
    assert "Partial results" in (tmp_path / "rep" / "claims.html").read_text()
    # A whole sweep: nothing to say.
    assert load(run_sweep(tmp_path, "whole", AXIS)).incomplete() == []


def test_throughput_counts_each_requests_own_length(tmp_path):
    f = run_sweep(tmp_path, "spread", AXIS.replace("seed = 0, 1", "requests = 3\nlength_spread = 0.5")
                  .replace("topic_weight = 0.2, 0.9", ""))
    res = load(f)
    p = res.ok
    assert (p["tokens"] < p["context"]).all()  # the requests are shorter than the nominal T
    row = {x.id: x for x in claims.evaluate(res)}["throughput"]
    steps = res.detail(schema.STEPS)
    h = p[p["pool.weighting"] == "hybrid"].iloc[0]
    st = steps[(steps["file"] == h["file"]) & (steps["index"] == h["index"]) & (steps["score_ms"] > 0)]
    want = np.median(st["context_tokens"] / (st["score_ms"] / 1e3)) / 1e6
    assert f"scoring scan {want:.1f} M tokens/s (context tokens / score_ms)" in row.measured, row.measured
    mem = {x.id: x for x in claims.evaluate(res)}["memory"]
    assert f"requests of {p['tokens'].mean():.0f} tokens on average" in mem.measured, mem.measured


def test_a_fifo_is_refused_at_once(tmp_path, capsys):
    fifo = tmp_path / "f.h5"
    os.mkfifo(fifo)
    assert main(["report", str(fifo), "--out", str(tmp_path / "r")]) == 2  # h5py would wait for a writer
    assert "not a regular file" in capsys.readouterr().err


def test_thinned_tick_labels_keep_the_powers_of_two():
    from analysis.common import _label_phase
    ticks = [512.0 * i for i in range(1, 10)]  # 512, 1Ki, 1.5Ki, ..., 4.5Ki
    ph = _label_phase(ticks, 2)
    kept = [t for i, t in enumerate(ticks) if (len(ticks) - 1 - i) % 2 == ph]
    assert kept == [1024.0, 2048.0, 3072.0, 4096.0]
    assert _label_phase([1024.0, 2048.0, 4096.0], 2) == 0  # a tie: the phase that labels the largest


def test_a_setting_that_differs_only_between_sweeps_is_not_sliced_where_sweeps_stay_apart():
    from analysis.common import fix_others
    df = pd.DataFrame({"attr.sweep_id": ["a", "a", "a", "a", "b", "b"],
                       "workload.attn_dim": [32, 32, 32, 32, 64, 64],
                       "workload.topic_weight": ["0.2", "0.2", "0.9", "0.9", "0.5", "0.5"],
                       "pool.weighting": ["exact", "hybrid"] * 3})
    d, note = fix_others(df, keep=("pool.weighting", "attr.sweep_id"))
    assert set(d["attr.sweep_id"]) == {"a", "b"} and "attn_dim" not in note, note
    assert d.groupby("attr.sweep_id")["workload.topic_weight"].nunique().max() == 1  # within a sweep: sliced
    d, note = fix_others(df, keep=("pool.weighting",))  # sweeps not kept apart: one sweep, one of each setting
    assert d["attr.sweep_id"].nunique() == 1 and d["workload.attn_dim"].nunique() == 1, note
    assert d["workload.topic_weight"].nunique() == 1, note
    # Both sweeps vary the axis: each keeps its own value, and the note names both.
    df2 = df.assign(**{"workload.topic_weight": ["0.2", "0.2", "0.9", "0.9", "0.5", "0.7"]})
    d, note = fix_others(df2, keep=("pool.weighting", "attr.sweep_id"))
    assert set(d["attr.sweep_id"]) == {"a", "b"}, note
    assert "workload.topic_weight = 0.2 (sweep a), " in note, note


def test_an_axis_of_one_file_does_not_drop_the_others(tmp_path):
    # a.h5 sweeps T, b.h5 sweeps the topic weight: b's axis is no column of a (filled from a's config, or
    # left NaN at its default), and the memory figure, which keeps sweeps apart, still draws both files.
    a = run_sweep(tmp_path, "a", AXIS.replace("seed = 0, 1\ntopic_weight = 0.2, 0.9\n", "")
                  .replace("tokens = 2Ki", "tokens = 1Ki, 2Ki"))
    b = run_sweep(tmp_path, "b", AXIS.replace("seed = 0, 1\ntopic_weight = 0.2, 0.9", "topic_weight = 0.5, 0.9"))
    res = load([a, b])
    assert res.points.loc[res.points["file"] == a, "workload.topic_weight"].isna().all()
    fig = FAMILIES["memory"][0](res)
    text = fig._ip_caption.get_text()
    assert "a.h5" in text and "b.h5" in text, text
    # The axis set in a's config file (one value) fills a's rows.
    c = run_sweep(tmp_path, "c", AXIS.replace("seed = 0, 1\ntopic_weight = 0.2, 0.9", "topic_weight = 0.7"))
    both = load([c, b])
    assert set(both.points.loc[both.points["file"] == c, "workload.topic_weight"]) == {"0.7"}


def test_a_key_zipped_with_a_drawn_one_keeps_every_series():
    # adaptive.ini zips pool.group_size with adaptive.budget: G determines the budget, so nothing is sliced.
    from analysis.common import fix_others
    df = pd.DataFrame({"pool.group_size": [2, 4, 8, 2, 4, 8], "adaptive.budget": ["64", "32", "16"] * 2,
                       "pool.weighting": ["uniform"] * 3 + ["tfidf"] * 3})
    d, note = fix_others(df, keep=("pool.weighting", "pool.group_size"))
    assert len(d) == 6 and note == "", note
    # Thread counts as an axis are settings, not repeats.
    t = pd.DataFrame({"threads": [1, 2, 1, 2], "pool.weighting": ["exact", "exact", "hybrid", "hybrid"]})
    d, note = fix_others(t, keep=("pool.weighting",))
    assert d["threads"].nunique() == 1 and "threads = " in note, note


# No attention stage (workload.attn_dim = 0): mass_recall and output_error are NaN, token and block recall are not.
NO_ATTENTION = """
[workload]
tokens = 2Ki, 4Ki
dim = 32
index_heads = 2
attn_dim = 0
steps = 4

[pool]
weighting = exact, hybrid
group_size = 4

[select]
topk_tokens = 256

[cache]
object = index
"""


def _caption(fig):
    return " ".join(t.get_text() for t in fig.texts).replace("\n", " ")


def test_not_measured_names_the_columns_without_a_value_and_why(tmp_path):
    # The points finished: the report names the columns they have no value of and why, not "no finished point".
    off = {r.id: r for r in claims.evaluate(load(run_sweep(tmp_path, "hybrid", HYBRID)))}  # cache.enabled = false
    for cid in ("tier_hits", "overall_hits"):
        why = off[cid].reason
        assert off[cid].verdict == claims.NOT_MEASURED and "no finished point" not in why, why
        assert "no value of cache_l1_hit_rate, cache_l2_hit_rate, cache_l3_hit_rate, cache_hit_rate" in why, why
        assert "cache model was off (cache.enabled = false)" in why, why
    na = {r.id: r for r in claims.evaluate(load(run_sweep(tmp_path, "noattn", NO_ATTENTION)))}
    why = na["accuracy"].reason
    assert na["accuracy"].verdict == claims.NOT_MEASURED and "no finished point" not in why, why
    assert "no value of mass_recall, output_error at the 4 finished points of exact/hybrid" in why, why
    assert "token_recall" not in why and "no attention stage" in why, why
    why = na["hybrid"].reason  # hybrid_rows -> ok_rows: only the columns without a value
    assert "no value of layer_output_error, layer_mass_recall" in why and "hybrid.enabled," not in why, why


def test_quality_figures_without_attention_draw_token_and_block_recall(tmp_path):
    from analysis.common import ok_rows
    r = load(run_sweep(tmp_path, "noattn", NO_ATTENTION))
    with pytest.raises(NoData) as e:
        ok_rows(r, "x", ["pool.weighting", "token_recall", "mass_recall", "output_error"])
    assert "no value of mass_recall, output_error" in str(e.value) and "token_recall" not in str(e.value)
    assert "no attention stage" in str(e.value)
    for family in ("ablation", "quality"):
        fig = FAMILIES[family][0](r)
        titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
        assert titles[:2] == ["token recall (fraction)", "block recall (fraction)"] or \
            titles[:2] == ["token recall (higher is better)", "block recall (higher is better)"], titles
        assert not any("attention-mass" in t or "output error" in t for t in titles), titles
        cap = _caption(fig)
        assert "Not drawn: no value of mass_recall, output_error" in cap and "no attention stage" in cap, cap
        png, _ = save(fig, str(tmp_path), family)
        check_png(png)


def test_throughput_claim_is_measured_on_full_rebuilds_only(tmp_path):
    # Only incremental updates (tau >= 0): their pool_ms re-pools a fraction of the groups, not the context.
    inc = load(run_sweep(tmp_path, "inc", REPOOL.replace("repool_tau = -1, 0, 0.1", "repool_tau = 0, 0.1")))
    row = {r.id: r for r in claims.evaluate(inc)}["throughput"]
    assert row.verdict == claims.NOT_MEASURED and row.measured == "—", row.measured
    assert "full index rebuilds (pool.repool_tau = -1)" in row.reason and "incrementally" in row.reason, row.reason
    # With full rebuilds present, those alone, and the row says so.
    both = load(run_sweep(tmp_path, "both", REPOOL))
    row = {r.id: r for r in claims.evaluate(both)}["throughput"]
    assert "index build" in row.measured and "full index rebuilds" in row.source, row.source
    assert "2 points of tfidf G = 4 with incremental updates" in row.source, row.source


def test_captions_name_only_what_is_drawn(res, tmp_path):
    # Repool without tau = -1 points: no dashed reference line, and the caption does not describe one.
    r = load(run_sweep(tmp_path, "inc", REPOOL.replace("repool_tau = -1, 0, 0.1", "repool_tau = 0, 0.1")))
    fig = FAMILIES["repool"][0](r)
    assert not any(ln.get_linestyle() == "--" for ax in fig.axes for ln in ax.lines)
    assert "Dashed" not in _caption(fig)
    assert "Dashed" in _caption(FAMILIES["repool"][0](load(run_sweep(tmp_path, "rep", REPOOL))))
    # The ablation heat map without the exact indexer has no exact row to repeat across G.
    h = load(run_sweep(tmp_path, "hybrid", HYBRID))
    fig = FAMILIES["ablation"][0](h)
    assert "exact" not in [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert "repeats across G" not in _caption(fig)
    assert "repeats across G" in _caption(FAMILIES["ablation"][0](res))


def test_report_recalls_carry_their_unit(res, tmp_path):
    rows = {r.id: r for r in claims.evaluate(res)}
    m = rows["accuracy"].measured
    assert "attention-mass recall (fraction) 0." in m and "token recall (fraction) 0." in m, m
    rows = {r.id: r for r in claims.evaluate(load(run_sweep(tmp_path, "hybrid", HYBRID)))}
    assert "dense attention mass covered (fraction) 0." in rows["hybrid"].measured, rows["hybrid"].measured
