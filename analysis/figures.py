"""The figure families. Each function takes loaded results (analysis.load) and returns a matplotlib
Figure, or raises NoData naming what the results lack; common.save writes it as PNG and PDF."""
import re
import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import FuncFormatter, NullLocator, ScalarFormatter

from . import schema
from .common import (binary_label, dodge, G, PREC, RUN, SEQUENTIAL_CMAP, W, ATTENTION_COLUMNS, batched_gpu, caption,
                     color_of, constants, context_axis, errorbar, finish, fix_others, fmt_value, log2_axis, logy,
                     no_value, ok_rows, per_request_times, skipped_note,
                     sources, point_keys, step_groups, summarize, weighting_sort_key, LINESTYLES, MARKERS, SHORT)
from .load import NoData, parse_size

MiB = float(1 << 20)


def _g_marker(gs):
    return {g: MARKERS[i % len(MARKERS)] for i, g in enumerate(sorted(gs))}


def _legend(fig):
    seen = {}
    for ax in fig.axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    return list(seen.values()), list(seen.keys())


PRECISION_ORDER = ["fp32", "bf16", "fp16", "int8", "fp8"]  # widest first


def precision_sort_key(p):
    return PRECISION_ORDER.index(p) if p in PRECISION_ORDER else len(PRECISION_ORDER)


# ---------------------------------------------------------------------------------------------- memory
def fig_memory(res):
    """Index memory vs context length: the exact index and pooled indexes, every precision and G."""
    df = ok_rows(res, "memory", ["index_bytes_per_token", "exact_bytes_per_token", "context", W, G, PREC])
    df, note = fix_others(df, keep=("context", W, G, PREC, "workload.requests", "attr.sweep_id"))
    precs = sorted(df[PREC].unique(), key=precision_sort_key)
    kind = np.where(df[W] == schema.EXACT, "exact", np.where(df[W] == "maxmin", "maxmin", "pooled"))
    df = df.assign(kind=kind)
    series = []  # (label, frame of context -> bytes/token, colour, marker, style, precision's place)
    gm = _g_marker(df.loc[df["kind"] != "exact", G].unique())
    # Colour: exact / pooled / maxmin; marker: G; line style and, with several precisions, the marker's fill
    # and a small sideways offset: the precision (a sweep at one context length draws no lines, and two
    # precisions' points of equal size, fp32 at 2G and fp16 at G, would hide each other).
    multi = len(precs) > 1
    for pi, p in enumerate(precs):
        d = df[df[PREC] == p]
        ex = d.groupby("context")["exact_bytes_per_token"].first()
        series.append((f"exact, {p}", ex, "#000000", "o", LINESTYLES[pi % len(LINESTYLES)], pi))
        for k in ("pooled", "maxmin"):
            for g in sorted(d.loc[d["kind"] == k, G].unique()):
                s = d[(d["kind"] == k) & (d[G] == g)].groupby("context")["index_bytes_per_token"].first()
                col = "#0072B2" if k == "pooled" else "#D55E00"
                series.append((f"{k} G={g}, {p}", s, col, gm[g], LINESTYLES[pi % len(LINESTYLES)], pi))
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.8), gridspec_kw={"width_ratios": [1.3, 1]})
    # A request's index: bytes per token x its length, the measured mean (below T under workload.length_spread).
    mean_tokens = df.groupby("context")["tokens"].mean()
    fills = ("full", "left", "bottom", "right", "top", "none")
    for lab, s, col, m, ls, pi in series:
        hollow = lab.startswith("maxmin")  # hollow and larger: an exact or pooled point of equal size shows inside
        tok = mean_tokens.reindex(s.index).to_numpy(dtype=float)
        tok = np.where(np.isfinite(tok) & (tok > 0), tok, s.index.to_numpy(dtype=float))
        x = dodge(s.index, pi, len(precs), step=0.12) if multi else s.index
        style = dict(mfc="none") if hollow else dict(fillstyle=fills[pi % len(fills)], mfc=col,
                                                     mfcalt="white") if multi else dict(mfc=col)
        a.plot(x, s.values * tok / MiB, color=col, marker=m, ls=ls, label=lab, lw=1.3, ms=9 if hollow else 6,
               mew=1.4, **style)
    context_axis(a, df["context"])
    logy(a)
    a.margins(y=0.08)  # the smallest index clear of the frame
    a.set_ylabel("index memory per request (MiB)")
    a.set_title("(a) index memory vs context length")
    # (b) bytes per token by precision: exact vs each pooled G
    labels = ["exact"] + [f"pooled G={g}" for g in sorted(df.loc[df["kind"] == "pooled", G].unique())]
    if (df["kind"] == "maxmin").any():
        labels += [f"maxmin G={g}" for g in sorted(df.loc[df["kind"] == "maxmin", G].unique())]
    width = 0.8 / len(precs)
    for pi, p in enumerate(precs):
        d = df[df[PREC] == p]
        vals = [d["exact_bytes_per_token"].iloc[0]]
        for lab in labels[1:]:
            k, g = lab.split(" G=")
            v = d.loc[(d["kind"] == k) & (d[G] == int(g)), "index_bytes_per_token"]
            vals.append(v.iloc[0] if len(v) else np.nan)
        x = np.arange(len(labels)) + (pi - (len(precs) - 1) / 2) * width
        bars = b.bar(x, vals, width=width * 0.95, color=color_of(pi + 1), label=p, edgecolor="black", lw=0.4,
                     hatch=["", "//", "..", "xx", "\\\\"][pi % 5])
        # Whole bytes as they are, fractions kept: int8 at G = 8 stores 8.5 B a token (scales included).
        b.bar_label(bars, fmt=lambda v: f"{v:.0f}" if v >= 100 or v == round(v) else f"{v:.3g}", fontsize=6.5,
                    padding=1)
    b.set_xticks(np.arange(len(labels)), labels, rotation=20, ha="right")
    logy(b)
    b.set_ylabel("index bytes per context token (B)")
    b.set_title("(b) bytes per token by precision")
    b.legend(title="precision", loc="upper right")
    n = caption(fig, "Index sizes are exact byte counts (no error bars); pooled = any pooled weighting (all store "
                     "one composite per group); maxmin stores two rows per group. (a): bytes per token × the "
                     "requests' mean length (T unless workload.length_spread or workload.append_per_step changes "
                     "it). " + (f"Slice: {note}. " if note else "")
                + "Index keys: " + constants(df, ["workload.dim", "workload.index_heads"]) + ".", (), sources(df),
                skipped=skipped_note(res, df, ("context",), (W, G, PREC)))
    handles = [h for h in a.get_legend_handles_labels()[0]]
    return finish(fig, "Index memory: exact vs pooled", n, (handles, a.get_legend_handles_labels()[1]), 4)


# --------------------------------------------------------------------------------------------- latency
def _reference_g(df):
    gs = sorted(df.loc[df[W] != schema.EXACT, G].unique())
    return 4 if 4 in gs else (gs[len(gs) // 2] if gs else None)


def _at_g(df, g):
    """Pooled rows at G = g, and the exact indexer's rows once (at G = g when swept, else its smallest G:
    the exact indexer does not pool, so the G axis only repeats it)."""
    ex = df[df[W] == schema.EXACT]
    if len(ex):
        ex = ex[ex[G] == (g if (ex[G] == g).any() else ex[G].min())]
    return pd.concat([ex, df[(df[W] != schema.EXACT) & (df[G] == g)]])


def stage_time_label(col, name):
    """The y label of a stage's time: pool_ms is the median over the steps that built or updated the index
    (experiments/results.cc), the others the median over decode steps."""
    return f"{name} time per index build or update (ms)" if col == "pool_ms" else f"{name} time per step (ms)"


def attended_tokens(rows, context):
    """Tokens the sparse attention reads per step at each context: the exact indexer's k = select.topk_tokens, a
    pooled scheme's ceil(k/G) whole groups of G tokens; never more than the context (rows: one series)."""
    k = float(rows[schema.TOPK].iloc[0])
    g = 1 if rows[W].iloc[0] == schema.EXACT else float(rows[G].iloc[0])
    return np.minimum(np.ceil(k / g) * g, np.asarray(context, dtype=float))


def fig_latency(res):
    """Median time per decode step of each stage, and the stage throughput, vs context length and backend."""
    cols = [c for c, _ in schema.STAGES]
    df = ok_rows(res, "latency", ["context", W, G, RUN] + cols)
    df, bnote = per_request_times(df, "latency")
    g = _reference_g(df)
    df = _at_g(df, g)
    df, note = fix_others(df, keep=("context", W, G, "backend", RUN, "attr.sweep_id"))
    note = "; ".join(x for x in (note, bnote) if x)
    backends = sorted(df[RUN].unique())  # the backend each point ran on (run_backend), not the configured one
    fig, axes = plt.subplots(2, 4, figsize=(14, 7.2), sharex=True)
    kinds = set()
    ws = sorted(df[W].unique(), key=weighting_sort_key)
    for si, (col, name) in enumerate(schema.STAGES):
        for bi, be in enumerate(backends):
            for wi, w in enumerate(ws):
                d = df[(df[RUN] == be) & (df[W] == w)]
                d = d[d[col] > 0]
                if d.empty:
                    continue
                s, k = summarize(res, d, ["context"], col)
                kinds |= k
                lab = f"{w}" + (f" G={g}" if w != schema.EXACT else "") + (f" [{be}]" if len(backends) > 1 else "")
                style = dict(color=color_of(wi, w), marker=MARKERS[wi % len(MARKERS)], ls=LINESTYLES[bi % len(LINESTYLES)],
                             label=lab)
                x = dodge(s["context"], bi * len(ws) + wi, len(ws) * len(backends))
                errorbar(axes[0, si], x, s, **style)
                # Attention reads only the selected tokens: its rate is of attended tokens, the others' of context.
                # The requests' measured mean length, not the nominal T (they differ under workload.length_spread).
                ctx = d.groupby("context")["tokens"].mean().reindex(s["context"]).to_numpy(dtype=float)
                ctx = np.where(np.isfinite(ctx) & (ctx > 0), ctx, s["context"].to_numpy(dtype=float))
                tok = attended_tokens(d, ctx) if col == "attention_ms" else ctx
                tput = s.assign(center=tok / (s["center"] / 1e3), lo=tok / (s["hi"] / 1e3), hi=tok / (s["lo"] / 1e3))
                errorbar(axes[1, si], x, tput, **style)
        axes[0, si].set_title(f"{name}")
        # Wrapped: a long label is taller than its panel and ran into the one below.
        axes[0, si].set_ylabel(textwrap.fill(stage_time_label(col, name), 30))
        axes[1, si].set_ylabel(textwrap.fill(f"{name} throughput ({'attended' if col == 'attention_ms' else 'context'} "
                                             "tokens/s)", 30))
        for r in (0, 1):
            logy(axes[r, si])
            context_axis(axes[r, si], df["context"])
        axes[0, si].set_xlabel("")
    if not any(ax.lines for ax in axes.flat):
        raise NoData("latency: no stage time is positive")
    n = caption(fig, "Times are medians over decode steps on the backend named (pooling: over the steps that built or "
                     "updated the index); series at one T are offset sideways. Throughput: pooling, scoring and "
                     "top-k: the requests' mean context length (T unless workload.length_spread or "
                     "workload.append_per_step changes it) / stage time (they go over the whole index); attention: "
                     "attended tokens / attention time, the k = select.topk_tokens tokens it reads (pooled schemes: "
                     "whole groups, ⌈k/G⌉·G), not the context. " + (f"Slice: {note}. " if note else "")
                + constants(df, [RUN, PREC, "select.topk_tokens"], note), kinds, sources(df),
                skipped=skipped_note(res, df, ("context",), (W,)))
    return finish(fig, f"Latency and throughput per stage (G = {g} for pooled schemes)", n, _legend(fig), 8)


def fig_backend_latency(res):
    """Stage times per backend the points ran on (run_backend: CPU vs CUDA) vs context length; needs points that
    ran on the cuda backend."""
    cols = [c for c, _ in schema.STAGES]
    df = ok_rows(res, "backends", ["context", W, G, RUN] + cols)
    df, bnote = per_request_times(df, "backends")
    if not df[RUN].isin(schema.GPU_BACKENDS).any():
        raise NoData(f"backends: no finished point ran on a GPU backend (column '{RUN}' in "
                     f"{list(schema.GPU_BACKENDS)}); found {RUN} {sorted(df[RUN].unique())}")
    g = _reference_g(df)
    ref = next((w for w in schema.REFERENCE_WEIGHTINGS if w in set(df[W])), None)
    df = _at_g(df[df[W].isin([schema.EXACT, ref])], g)
    df, note = fix_others(df, keep=("context", W, G, "backend", RUN, "attr.sweep_id"))
    note = "; ".join(x for x in (note, bnote) if x)
    fig, axes = plt.subplots(1, 4, figsize=(14, 4.2))
    kinds = set()
    for si, (col, name) in enumerate(schema.STAGES):
        for bi, be in enumerate(sorted(df[RUN].unique())):
            for wi, w in enumerate(sorted(df[W].unique(), key=weighting_sort_key)):
                d = df[(df[RUN] == be) & (df[W] == w) & (df[col] > 0)]
                if d.empty:
                    continue
                s, k = summarize(res, d, ["context"], col)
                kinds |= k
                errorbar(axes[si], s["context"], s, color=color_of(bi), ls=LINESTYLES[wi % len(LINESTYLES)],
                         marker=MARKERS[wi % len(MARKERS)], label=f"{be}: {w}" + (f" G={g}" if w != "exact" else ""))
        axes[si].set_title(name)
        logy(axes[si])
        axes[si].set_ylabel(stage_time_label(col, name))
        context_axis(axes[si], df["context"])
    n = caption(fig, "Median over decode steps; series by the backend each point ran on (run_backend); CUDA times "
                     "from CUDA events. " + (f"Slice: {note}." if note else ""),
                kinds, sources(df),
                skipped=skipped_note(res, df, ("context",), (W, RUN)))
    return finish(fig, "Stage time per backend", n, _legend(fig), 6)


# ------------------------------------------------------------------------------------------------ macs
def fig_macs(res):
    """Scoring multiply-adds per query: every scheme and G vs context, and the reduction against exact."""
    df = ok_rows(res, "macs", ["macs_per_query", "exact_macs_per_query", "context", W, G])
    df, note = fix_others(df, keep=("context", W, G, "attr.sweep_id", "backend", RUN, PREC))
    df = df.drop_duplicates(subset=["context", W, G])
    pooled = (df[W] != schema.EXACT).any()  # without a pooled scheme there is no reduction to draw: panel (a) only
    fig, axes = plt.subplots(1, 2 if pooled else 1, figsize=(11, 4.6) if pooled else (6.5, 4.6), squeeze=False)
    a, b = axes[0][0], (axes[0][1] if pooled else None)
    ws = sorted(df[W].unique(), key=weighting_sort_key)
    gm = _g_marker(df[G].unique())
    ex = df.groupby("context")["exact_macs_per_query"].first()
    a.plot(ex.index, ex.values, color="black", marker="o", lw=1.6, ms=5, label="exact indexer")
    # Every pooled weighting does the same scoring work (one composite per group); maxmin scores two rows.
    kind = np.where(df[W] == "maxmin", "maxmin", "pooled")
    for ki, k in enumerate(("pooled", "maxmin")):
        d = df[(kind == k) & (df[W] != schema.EXACT)]
        for gi, g in enumerate(sorted(d[G].unique())):
            s = d[d[G] == g].groupby("context")["macs_per_query"].mean()
            hollow = k == "maxmin"
            a.plot(s.index, s.values, color="#0072B2" if k == "pooled" else "#D55E00", marker=gm[g],
                   ls=LINESTYLES[gi % len(LINESTYLES)], lw=1.2, ms=9 if hollow else 5, mfc="none" if hollow else None, mew=1.4,
                   label=f"{k} G={g}")
    context_axis(a, df["context"])
    logy(a)
    a.set_ylabel("scoring multiply-adds per query (MAC)")
    a.set_title(("(a) " if pooled else "") + "multiply-adds per query vs context length")
    T = df["context"].max()
    if pooled:
        _macs_reduction(b, df, ws, T)
    n = caption(fig, "Multiply-adds are exact counts of the scoring stage (no error bars); every pooled weighting "
                     "does the same work, maxmin scores two rows per group. " +
                ("" if pooled else "No panel of the reduction against the exact indexer: the results hold no pooled "
                                   "scheme, only the exact indexer. ") +
                (f"Slice: {note}. " if note else "") + constants(df, ["workload.dim", "workload.index_heads"]),
                (), sources(df),
                skipped=skipped_note(res, df, ("context",), (W, G)))
    h, lab = a.get_legend_handles_labels()
    return finish(fig, "Scoring work per query", n, (h, lab), 7)


def _macs_reduction(b, df, ws, T):
    """Panel (b) of fig_macs: each pooled scheme's reduction in multiply-adds against the exact indexer at T."""
    d = df[(df["context"] == T) & (df[W] != schema.EXACT)]
    gs = sorted(d[G].unique())
    pw = [w for w in ws if w != schema.EXACT]
    width = 0.8 / max(1, len(pw))
    for wi, w in enumerate(pw):
        vals = [100 * (1 - d.loc[(d[W] == w) & (d[G] == g), "macs_per_query"].mean() /
                       d.loc[(d[W] == w) & (d[G] == g), "exact_macs_per_query"].mean()) for g in gs]
        x = np.arange(len(gs)) + (wi - (len(pw) - 1) / 2) * width
        bars = b.bar(x, vals, width=width * 0.95, color=color_of(wi, w), edgecolor="black", lw=0.4, label=w)
        b.bar_label(bars, fmt="%.0f", fontsize=6, padding=1)
    for gi, g in enumerate(gs):
        b.hlines(100 * (1 - 1 / g), gi - 0.45, gi + 0.45, colors="black", linestyles="--", lw=1)
    b.set_xticks(np.arange(len(gs)), [f"G = {g}" for g in gs])
    b.set_ylabel("fewer multiply-adds than exact (%)")
    b.set_ylim(0, 125)
    b.set_yticks(range(0, 101, 20))
    b.set_title(f"(b) reduction at T = {int(T):,} tokens (dashed: 1 − 1/G)")
    b.legend(loc="upper center", ncol=3)


# -------------------------------------------------------------------------------------------- ablation
ABLATION_METRICS = (("token_recall", "token recall (fraction)", False),
                    ("mass_recall", "attention-mass recall (fraction)", False),
                    ("output_error", "attention output error (relative L2)", True))
BLOCK_RECALL = ("block_recall", "block recall (fraction)", False)


def quality_rows(res, family, keys):
    """ok_rows of `keys` and the ABLATION_METRICS, with the metrics to draw. Where no finished point has a value of
    the attention metrics (a workload with no attention stage), the metrics that have values (token recall, and
    block recall in their place) and a note saying what is not drawn and why. Returns (rows, metrics, note)."""
    cols = [m for m, _, _ in ABLATION_METRICS]
    try:
        return ok_rows(res, family, keys + cols), ABLATION_METRICS, ""
    except NoData:
        df = res.ok if hasattr(res, "ok") else res
        gone = [c for c in cols if c in ATTENTION_COLUMNS and c in df.columns and df[c].isna().all()]
        if not gone or any(c not in df.columns for c in cols):
            raise
    extra = (BLOCK_RECALL,) if BLOCK_RECALL[0] in df.columns and df[BLOCK_RECALL[0]].notna().any() else ()
    metrics = tuple(m for m in ABLATION_METRICS if m[0] not in gone) + extra
    rows = ok_rows(res, family, keys + [m for m, _, _ in metrics])
    return rows, metrics, f"Not drawn: {no_value(res, rows, gone, 'the finished points')}. "


def fig_ablation(res):
    """Heat maps of token recall, attention-mass recall and output error for every weighting x G."""
    df, metrics, missing = quality_rows(res, "ablation", [W, G])
    df, note = fix_others(df, keep=(W, G, "attr.sweep_id", "backend", RUN))
    if not (df[W] != schema.EXACT).any():
        raise NoData("ablation: no pooled scheme among the finished points, only the exact indexer (which does not "
                     "pool: its recalls are 1 at every G, so there is no weighting × G to compare)")
    ws = sorted(df[W].unique(), key=weighting_sort_key)
    gs = sorted(df[G].unique())
    fig, axes = plt.subplots(1, len(metrics), figsize=(13, 0.45 * len(ws) + 2.6))
    kinds = set()
    for ax, (m, label, lower_better) in zip(axes, metrics):
        s, k = summarize(res, df, [W, G], m)
        kinds |= k
        grid = np.full((len(ws), len(gs)), np.nan)
        err = np.full_like(grid, np.nan)
        for _, r in s.iterrows():
            i, j = ws.index(r[W]), gs.index(r[G])
            grid[i, j] = r["center"]
            err[i, j] = (r["hi"] - r["lo"]) / 2
        cmap = SEQUENTIAL_CMAP + ("_r" if lower_better else "")
        im = ax.imshow(grid, cmap=cmap, aspect="auto")
        lo, hi = np.nanmin(grid), np.nanmax(grid)
        for i in range(len(ws)):
            for j in range(len(gs)):
                if np.isfinite(grid[i, j]):
                    frac = (grid[i, j] - lo) / (hi - lo) if hi > lo else 0.5
                    light = frac > 0.55 if not lower_better else frac < 0.45
                    nd = 3 if hi - lo > 0.02 else 4  # enough digits to tell neighbouring cells apart
                    txt = f"{grid[i, j]:.{nd}f}" + (f"\n±{err[i, j]:.{nd}f}" if err[i, j] > 0 else "")
                    ax.text(j, i, txt, ha="center", va="center", fontsize=7,
                            color="black" if light else "white")
        ax.set_xticks(range(len(gs)), [str(g) for g in gs])
        ax.set_yticks(range(len(ws)), ws)
        ax.set_xlabel("group size G (keys per composite)")
        ax.set_ylabel("index scheme")
        ax.grid(False)
        ax.set_title(label)
        cb = fig.colorbar(im, ax=ax, fraction=0.05, pad=0.02)
        # Plain tick values: an offset ("1e-5+9.893e-1") is drawn above the bar, over the panel's title.
        cb.ax.yaxis.set_major_formatter(ScalarFormatter(useOffset=False))
        cb.ax.yaxis.get_major_formatter().set_scientific(False)
        unit = label[label.index("("):]
        cb.set_label(f"{unit}, {'lower' if lower_better else 'higher'} is better", fontsize=7)
    exact = ("the exact indexer does not pool, so its row repeats across G. " if schema.EXACT in ws else "")
    n = caption(fig, "Cells: value ± error bar (below); " + exact + missing + (f"Slice: {note}. " if note else "") +
                constants(df, ["context", PREC, "select.topk_tokens"], note), kinds, sources(df),
                skipped=skipped_note(res, df, (W, G), ()))
    return finish(fig, "Ablation: weighting × group size", n)


# --------------------------------------------------------------------------------------------- quality
QUALITY_AXES = (("context", "context length T (tokens)"),
                ("select.topk_tokens", "selection budget k = select.topk_tokens (tokens)"))


def fig_quality(res):
    """Selection quality vs context length and vs selection budget: token recall, attention-mass recall and output
    error, one row per axis the results vary (T, k), one series per weighting at the reference G."""
    df0, metrics, missing = quality_rows(res, "quality", [W, G])
    g = _reference_g(df0)
    rows, notes, skipped_rows = [], [], []
    for axis, xlabel in QUALITY_AXES:
        if axis not in df0.columns or df0[axis].nunique() < 2:
            continue
        other = next(a for a, _ in QUALITY_AXES if a != axis)
        # The other axis at its largest value among those this axis varies at (the budget a sweep over T runs at
        # is usually its default, 2048; a T sweep and a k sweep may come from different files).
        d = _where_varies(_at_g(df0, g), axis, other)
        # The other axis held at one value (it varies elsewhere in the results): the caption says which.
        held = (f"{SHORT.get(other, other)} = {fmt_value(other, d[other].iloc[0])}"
                if other in d.columns and df0[other].nunique() > 1 and d[other].nunique() == 1 else "")
        d, note = fix_others(d, keep=(axis, W, G, "attr.sweep_id", "backend", RUN),
                             largest=("context", "select.topk_tokens"))
        note = ", ".join(x for x in (held, note) if x)  # several sweeps at one x: summarize's note says which
        if d[axis].nunique() < 2:
            skipped_rows.append(f"{SHORT.get(axis, axis)} takes one value in the slice ({note})")
            continue
        rows.append((axis, xlabel, d))
        if note:
            notes.append(f"{SHORT.get(axis, axis)} row: {note}")
    if not rows:
        a, b = (a for a, _ in QUALITY_AXES)
        zipped = all(x in df0.columns and df0[x].nunique() > 1 for x in (a, b)) and \
            df0.groupby(a)[b].nunique().max() <= 1 and df0.groupby(b)[a].nunique().max() <= 1
        if zipped:
            raise NoData(f"quality: context length and select.topk_tokens move together ({df0[a].nunique()} pairs, "
                         "e.g. [sweep] zip), so neither can be drawn with the other held at one value; a sweep over "
                         "one of them at a fixed value of the other draws this figure")
        raise NoData("quality: the finished points have one context length and one select.topk_tokens; a sweep over "
                     "workload.tokens (e.g. configs/context_scaling.ini) or select.topk_tokens (configs/hybrid.ini) "
                     "draws this figure" + (f" ({'; '.join(skipped_rows)})" if skipped_rows else ""))
    fig, axes = plt.subplots(len(rows), len(metrics), figsize=(13, 3.9 * len(rows) + 0.6), squeeze=False)
    kinds = set()
    for row, (axis, xlabel, df) in enumerate(rows):
        ws = sorted(df[W].unique(), key=weighting_sort_key)
        for col, (m, label, lower_better) in enumerate(metrics):
            ax = axes[row, col]
            for wi, w in enumerate(ws):
                s, k = summarize(res, df[df[W] == w], [axis], m)
                kinds |= k
                errorbar(ax, dodge(s[axis], wi, len(ws)), s, color=color_of(wi, w), marker=MARKERS[wi % len(MARKERS)],
                         ls=LINESTYLES[wi % len(LINESTYLES)], label=w + ("" if w == schema.EXACT else f" G={g}"))
            log2_axis(ax, df[axis].astype(float))
            ax.set_xlabel(xlabel)
            ax.set_ylabel(label)
            if row == 0:
                ax.set_title(f"{label.split(' (')[0]} ({'lower' if lower_better else 'higher'} is better)")
    sel = pd.concat([d for _, _, d in rows])
    drawn = [a for a, _, _ in rows]
    what = " and ".join({"context": "context length", "select.topk_tokens": "selection budget"}[a] for a in drawn)
    grows = " and as ".join({"context": "the context grows", "select.topk_tokens": "the selection budget k grows"}[a]
                            for a in drawn)
    fixed = [k for k in ("context", "select.topk_tokens") if k not in drawn]
    n = caption(fig, "Selection quality against the fidelity reference (the exact indexer on fp32 keys and dense "
                     f"attention, per decode step) as {grows}; pooled schemes at G = {g}, series offset sideways. "
                     + (f"Slice: {'; '.join(notes)}. " if notes else "")
                     + (f"Not drawn: {'; '.join(skipped_rows)}. " if skipped_rows else "") + missing
                + constants(sel, [*fixed, PREC, RUN], "; ".join(notes)), kinds, sources(sel),
                skipped=skipped_note(res, sel, tuple(drawn), (W,)))
    return finish(fig, f"Selection quality vs {what}", n, _legend(fig), 6)


# ------------------------------------------------------------------------------------------- precision


def _paired_change(res, d, base, p, metric):
    """Per-step change of `metric` at precision p against precision `base`, over the decode steps both ran: for
    each point of d at p, the one point at `base` with every other setting equal (seed, context, backend, the
    config keys of schema.KEY_DEFAULTS), their steps matched by request and step; points of one sweep only, the
    sweep with the most points in d (as summarize() draws). Returns the differences (empty when no point pairs)."""
    SW = "attr.sweep_id"
    if SW in d.columns and d[SW].nunique() > 1:
        d = d[d[SW] == max(d[SW].unique(), key=lambda sw: (int((d[SW] == sw).sum()), str(sw)))]
    keys = [k for k in dict.fromkeys((*schema.KEY_DEFAULTS, "context", RUN, SW)) if k in d.columns and k != PREC]
    bases = d[d[PREC] == base]
    # Each point at base under its settings (NaN equal to NaN, as the settings of a point are compared), once.
    at = {}
    for i, key in enumerate(_setting_keys(bases, keys)):
        at.setdefault(key, []).append(i)
    pairs = []
    rows = d[d[PREC] == p]
    for (f, idx), key in zip(zip(rows["file"], rows["index"]), _setting_keys(rows, keys)):
        m = at.get(key, ())
        if len(m) != 1:  # none, or several that differ in a setting not listed: no pair rather than a wrong one
            continue
        pairs.append(((f, idx), (bases["file"].iloc[m[0]], bases["index"].iloc[m[0]])))
    steps = step_groups(res, [k for pair in pairs for k in pair])  # the paired points' steps only
    out = []
    for ka, kb in pairs:
        a, b = steps.get(ka), steps.get(kb)
        if a is None or b is None or metric not in a.columns:
            continue
        out.append(_step_change(a, b, metric))
    return pd.concat(out) if out else pd.Series(dtype=float)


_NA = object()  # a missing setting, in a tuple of settings (NaN is not equal to itself)


def _setting_keys(df, keys):
    """One tuple per row of df: its values of `keys`, a missing value as _NA."""
    cols = [[_NA if pd.isna(v) else v for v in df[k].tolist()] for k in keys]
    return list(zip(*cols)) if cols else [()] * len(df)


def _step_change(a, b, metric):
    """a's `metric` minus b's over the steps both ran (rows matched by request and step, in a's order, as an
    inner merge of a with b on them gives), as floats, NaN left out."""
    at = {}
    for j, key in enumerate(zip(b["request"].tolist(), b["step"].tolist())):
        at.setdefault(key, []).append(j)
    li, ri = [], []
    for i, key in enumerate(zip(a["request"].tolist(), a["step"].tolist())):
        for j in at.get(key, ()):
            li.append(i)
            ri.append(j)
    av, bv = a[metric].to_numpy(), b[metric].to_numpy()
    return pd.Series(av[li] - bv[ri]).astype(float).dropna()


def _where_varies(df, axis, key):
    """df at the largest value of `key` among those at which `axis` takes several values (df itself when `key`
    is not a column or no value of it qualifies): the slice a figure over `axis` can draw."""
    if key not in df.columns or axis not in df.columns:
        return df
    n = df.groupby(key)[axis].nunique()
    ok = n[n > 1].index
    return df[df[key] == max(ok)] if len(ok) else df


def fig_precision(res):
    """Selection quality against stored bytes for every index precision: token recall, attention-mass recall and
    output error vs the index's bytes per context token (top row), and their change against the same scheme at
    the widest precision, paired over the same decode steps (bottom row); one series per weighting and G, a point
    per precision."""
    df, metrics, missing = quality_rows(res, "precision", [W, G, PREC, "index_bytes_per_token"])
    df, note = fix_others(_where_varies(df, PREC, "context"), keep=(W, G, PREC, "attr.sweep_id", "backend", RUN))
    precs = sorted(df[PREC].unique(), key=precision_sort_key)
    if len(precs) < 2:
        raise NoData(f"precision: the finished points have one index precision ({', '.join(precs)}); a sweep over "
                     f"{PREC} (e.g. configs/precision.ini) draws this figure")
    base = precs[0]
    # The exact indexer does not pool: one series at its smallest G, not the same points for every G.
    ex = df[df[W] == schema.EXACT]
    df = pd.concat([ex[ex[G] == ex[G].min()], df[df[W] != schema.EXACT]])
    series = [(w, g) for w in sorted(df[W].unique(), key=weighting_sort_key)
              for g in sorted(df.loc[df[W] == w, G].unique())]
    gm = _g_marker(df.loc[df[W] != schema.EXACT, G].unique())
    several_g = df.loc[df[W] != schema.EXACT, G].nunique() > 1
    xs = df["index_bytes_per_token"].astype(float)
    ticks = [2.0 ** e for e in range(int(np.floor(np.log2(xs.min()))), int(np.ceil(np.log2(xs.max()))) + 1)]
    fig, axes = plt.subplots(2, len(metrics), figsize=(13, 7.4), sharex=True, squeeze=False)
    kinds, changes = set(), 0
    for col, (m, label, lower_better) in enumerate(metrics):
        top, bottom = axes[0, col], axes[1, col]
        for si, (w, g) in enumerate(series):
            d = df[(df[W] == w) & (df[G] == g)]
            s, k = summarize(res, d, [PREC], m)
            kinds |= k
            nbytes = d.groupby(PREC)["index_bytes_per_token"].first()
            s = s.assign(bytes=s[PREC].map(nbytes)).sort_values(["bytes", PREC], ascending=[False, True])
            # Precisions of equal size (bf16 and fp16, int8 and fp8) side by side, not on top of each other.
            same = s.groupby("bytes")[PREC].transform(lambda c: list(range(len(c))))
            count = s.groupby("bytes")[PREC].transform("size")
            s = s.assign(x=[dodge([b], i, n, 0.12)[0] for b, i, n in zip(s["bytes"], same, count)], side=same,
                         pair=count).sort_values("x")
            style = dict(color=color_of(si, w), marker="o" if w == schema.EXACT else gm[g], ls=LINESTYLES[si % len(LINESTYLES)],
                         label=w if w == schema.EXACT or not several_g else f"{w} G={g}")
            errorbar(top, s["x"], s, **style)
            for _, r in s.iterrows():  # of a side-by-side pair, the left one's name to its left
                left = r["pair"] > 1 and r["x"] < r["bytes"]
                top.annotate(r[PREC], (r["x"], r["center"]), textcoords="offset points", xytext=(-3 if left else 3, 3),
                             ha="right" if left else "left", fontsize=6.5, color=style["color"])
            ch = []
            for _, r in s.iterrows():
                if r[PREC] == base:
                    ch.append((r["x"], 0.0, 0.0, 0.0))
                    continue
                diff = _paired_change(res, d, base, r[PREC], m)
                if len(diff):
                    sd = float(diff.std(ddof=1)) if len(diff) > 1 else 0.0
                    ch.append((r["x"], float(diff.mean()), float(diff.mean()) - sd, float(diff.mean()) + sd))
                    changes = max(changes, len(diff))
            if len(ch) > 1:
                c = pd.DataFrame(ch, columns=["x", "center", "lo", "hi"])
                errorbar(bottom, c["x"], c, **style)
        bottom.axhline(0, color="grey", lw=0.8)
        for ax in (top, bottom):
            log2_axis(ax, ticks, bytes_label)
        top.set_ylabel(label)
        top.set_title(f"{label.split(' (')[0]} ({'lower' if lower_better else 'higher'} is better)")
        bottom.set_ylabel(f"change vs {base} ({label[label.index('(') + 1:-1]})")
        bottom.set_xlabel("index bytes per context token (B)")
    n = caption(fig, "Each point is one stored precision of the index (named beside it; precisions of equal size "
                     "are set side by side): x is the index's bytes per context token (payload and per-row scales, an "
                     "exact count), y the selection's quality against the fidelity reference, the exact indexer on the "
                     f"unquantized fp32 keys and dense attention. Bottom row: the change against the same scheme and G "
                     f"stored at {base}, per decode step over the steps both ran (same seed, request and step), mean "
                     "± 1 s.d. of those differences: the differences the top row's bars hide. " + missing
                     + (f"Slice: {note}. " if note else "") + constants(df, ["context", "select.topk_tokens"], note),
                kinds, sources(df), skipped=skipped_note(res, df, (PREC,), (W, G)))
    return finish(fig, "Index precision: selection quality vs stored bytes", n, _legend(fig), 6)


# ----------------------------------------------------------------------------------------------- cache
TIERS = (("cache_l1_hit_rate", "L1"), ("cache_l2_hit_rate", "L2"), ("cache_l3_hit_rate", "L3"),
         (schema.CACHE_HIT_RATE, "overall"))


def _tier_names(df):
    lv = str(df["cache.levels"].iloc[0]).split()
    return {f"L{i + 1}": f"L{i + 1} {spec}" for i, spec in enumerate(lv)}


def _finite(df, col):
    return col in df.columns and np.isfinite(pd.to_numeric(df[col], errors="coerce")).any()


def _cache_accesses(df):
    """What one access of the cache trace is, by the points' cache.object (experiments/cache_model.cc)."""
    what = {"kv": "each selected group's keys and values (cache.object = kv)",
            "index": "each selected group's stored index entry (cache.object = index)"}
    kinds = sorted(set(df["cache.object"].astype(str))) if "cache.object" in df.columns else ["kv"]
    return "; ".join(what.get(k, f"cache.object = {k}") for k in kinds)


def fig_cache(res):
    """Hit rate per cache tier vs context length and vs concurrent requests, with Belady's OPT: the same
    hierarchy with OPT at every level (a reference, not a bound) and OPT on one cache of the total capacity
    (the upper bound on the overall hit rate). The panel vs concurrent requests is left out when the slice has
    one request count (it would repeat the first panel)."""
    df = ok_rows(res, "cache", ["context", "workload.requests", W, G, schema.CACHE_HIT_RATE])
    # The reference pooled scheme; with none, the exact indexer (its selections make a trace as well).
    ref = next((w for w in schema.REFERENCE_WEIGHTINGS + (schema.EXACT,) if w in set(df[W])), None)
    if ref is None:
        raise NoData(f"cache: no point of a pooled weighting or of the exact indexer has a "
                     f"{schema.CACHE_HIT_RATE} value")
    df = df[df[W] == ref]
    names = _tier_names(df)
    B = "workload.requests"
    panels = [("context", None, "(a) vs context length"),
              (B, "concurrent requests B (requests)", "(b) vs concurrent requests")]
    slices = [fix_others(df, keep=(x, W, "attr.sweep_id", "backend", RUN)) for x, _, _ in panels]
    dropped = ""
    if slices[1][0][B].nunique() <= 1:  # one request count: panel (b) would only repeat panel (a)
        dropped = (f"No panel vs concurrent requests: every point of the slice has B = "
                   f"{fmt_value(B, slices[1][0][B].iloc[0])}. ")
        panels, slices = panels[:1], slices[:1]
        panels[0] = ("context", None, "vs context length")
    levels = _detail_of(res, schema.CACHE_LEVELS, [k for d, _ in slices for k in point_keys(d)])
    fig, axes = plt.subplots(1, len(panels), figsize=(11.5 if len(panels) > 1 else 8, 4.6),
                             sharey=True, squeeze=False)
    axes = axes[0]
    kinds, gs_used, skipped = set(), set(), []
    drew_ref = drew_bound = False
    # Every series has its own sideways offset: per tier the measured rate, then its OPT reference; the bound last.
    nslots = 2 * len(TIERS) + 1

    def at(xs, slot):
        return dodge(xs, slot, nslots, 0.06)

    for ax, (x, xlabel, title), (d, note) in zip(axes, panels, slices):
        for ti, (col, tier) in enumerate(TIERS):
            dd = d.dropna(subset=[col])
            if dd.empty:
                continue
            s, k = summarize(res, dd, [x], col)
            kinds |= k
            errorbar(ax, at(s[x], 2 * ti), s, color=color_of(ti), marker=MARKERS[ti], label=names.get(tier, tier))
            # Belady's OPT at every level of the same hierarchy (a reference, not a bound): per tier from
            # cache_levels, overall from the table.
            o = None
            if tier == "overall":
                if _finite(dd, schema.CACHE_OPT_HIT_RATE):
                    o, _ = summarize(res, dd.dropna(subset=[schema.CACHE_OPT_HIT_RATE]), [x], schema.CACHE_OPT_HIT_RATE)
            elif len(levels) and schema.LEVEL_OPT_HIT_RATE in levels.columns:
                lvl = levels[levels[schema.LEVEL] == ti + 1][["file", "index", schema.LEVEL_OPT_HIT_RATE]]
                m = dd.merge(lvl, on=["file", "index"]).dropna(subset=[schema.LEVEL_OPT_HIT_RATE])
                o = summarize(res, m, [x], schema.LEVEL_OPT_HIT_RATE)[0] if len(m) else None
            if o is not None and len(o):
                drew_ref = True
                ax.plot(at(o[x], 2 * ti + 1), o["center"], color=color_of(ti), ls="--",
                        marker=MARKERS[ti], mfc="none", lw=1, ms=7, label=f"{tier} OPT hierarchy (reference)")
            # The true bound on the overall hit rate: OPT on one cache of all levels' capacity.
            if tier == "overall" and _finite(dd, schema.CACHE_OPT_SINGLE_HIT_RATE):
                b, _ = summarize(res, dd.dropna(subset=[schema.CACHE_OPT_SINGLE_HIT_RATE]), [x],
                                 schema.CACHE_OPT_SINGLE_HIT_RATE)
                if len(b):
                    drew_bound = True
                    ax.plot(at(b[x], nslots - 1), b["center"], color="black", ls=":", marker="_",
                            lw=1.3, ms=12, mew=2, label="overall upper bound (OPT, one cache of total capacity)")
        if x == "context":
            context_axis(ax, d[x])
        else:
            log2_axis(ax, d[x].unique(), lambda v, _pos=None: f"{v:g}")
            ax.set_xlabel(xlabel)
        ax.set_ylabel("hit rate (fraction of accesses)")
        gs_used.update(d[G].unique())
        ax.set_ylim(0, 1.02)
        ax.set_title(title + (f" ({note})" if note else ""))
        sk = skipped_note(res, d, (x,), ())
        if sk:
            skipped.append((f"Panel {title.split()[0]}: " if len(panels) > 1 else "") + sk)
    single = [lab for ax, lab in zip(axes, ("context length", "request count")) if len(ax.get_xticks()) <= 1]
    opt = []
    if drew_ref:
        opt.append("dashed, hollow: the same hierarchy with Belady's OPT at every level, a reference and not a "
                   "bound (per-level OPT is not optimal for a hierarchy; other policies can beat it)")
    if drew_bound:
        opt.append("black bar (—) at each x, joined by a dotted line: Belady's OPT on one cache of all tiers' total "
                   "capacity, an upper bound on the overall hit rate for any policies")
    scheme = ("the exact indexer (one cache object per selected token)" if ref == schema.EXACT else
              f"{ref} (G = {', '.join(str(g) for g in sorted(gs_used))})")
    n = caption(fig, f"Scheme: {scheme}. Tier hit rate = "
                     "hits / accesses reaching that tier; overall = accesses that hit any tier"
                + "".join(f"; {o}" for o in opt) + "; every series at one x is offset sideways (the OPT reference "
                "just right of its tier, the bound rightmost). Accesses: " + _cache_accesses(df) + ". " + dropped
                + (f"Only one {' and one '.join(single)} in the data. " if single else ""), kinds, sources(df),
                skipped=" ".join(skipped))
    h, lab = _legend(fig)
    order = sorted(range(len(lab)), key=lambda i: (lab[i].split()[0].replace("overall", "L9"), "OPT" in lab[i],
                                                   "bound" in lab[i]))
    return finish(fig, "Cache hierarchy hit rates", n, ([h[i] for i in order], [lab[i] for i in order]),
                  3 if len(panels) > 1 else 2)


def _object_bytes(row, levels=None):
    """Bytes of one cache object of the point's access trace (experiments/cache_model.cc): cache.object = kv: the
    K and V of the tokens one selection unit covers, G tokens for a pooled scheme but one token for the exact
    indexer, which selects tokens; index: the stored index entry of that unit. Where the point's
    cache_levels hold the first level's bytes read from below over its misses, that measured size is used
    for index objects (its scale bytes included). None when neither is known."""
    g = 1 if row[W] == schema.EXACT else row[G]
    if row["cache.object"] == "kv":
        return float(g * (row["workload.attn_dim"] + row["workload.value_dim"]) * row["cache.kv_bytes"])
    if levels is not None and len(levels) and "bytes_from_below" in levels.columns:
        l1 = levels[(levels["file"] == row["file"]) & (levels["index"] == row["index"]) & (levels[schema.LEVEL] == 1)]
        if len(l1) and float(l1["misses"].iloc[0]) > 0:
            return float(l1["bytes_from_below"].iloc[0]) / float(l1["misses"].iloc[0])
    b = row.get("index_bytes_per_token", np.nan)
    return float(b * g) if np.isfinite(b) and b > 0 else None


def _detail_of(res, name, keys):
    """res.detail(name) of the points `keys` only (the whole table where res reads no subsets; an empty frame
    where res has no detail)."""
    if not hasattr(res, "detail"):
        return pd.DataFrame()
    if hasattr(res, "detail_keys"):
        return res.detail(name, keys=keys)
    return res.detail(name)


def bytes_label(v, _pos=None):
    """Binary byte units: 512 -> '512 B', 16384 -> '16 KiB', 2**23 -> '8 MiB'."""
    return binary_label(v, " ", "B")


def fig_mrc(res):
    """Exact LRU miss-ratio curves of the selection traces, one panel per G, with the tier capacities; every
    curve against the cache capacity in bytes (its object count times its own object size)."""
    df = ok_rows(res, "mrc", ["context", W, G])
    if hasattr(res, "detail_keys"):  # which points have curves; only the drawn ones are read (below)
        have = res.detail_keys(schema.CACHE_MRC)
        mrc = None
    else:
        mrc = res.detail(schema.CACHE_MRC) if hasattr(res, "detail") else pd.DataFrame()
        have = list(dict.fromkeys(point_keys(mrc)))
    if not have:
        # Which switch was off, from each file's resolved config (both default to true).
        off = [k for k in ("cache.enabled", "cache.mrc")
               if getattr(res, "files", None) and all(
                   not any(str(v).lower() in schema.TRUE_WORDS for v in f.settings.get(k, ["true"])) for f in res.files)]
        why = " and ".join(f"{k} = false" for k in off) or "cache.enabled = false or cache.mrc = false?"
        raise NoData(f"mrc: no point has a point_NNNNNN/{schema.CACHE_MRC} dataset ({why})")
    df = df[df.set_index(["file", "index"]).index.isin(pd.MultiIndex.from_tuples(have, names=["file", "index"]))]
    df, note = fix_others(df, keep=(W, G, "attr.sweep_id", "backend", RUN))
    df = df[df["workload.seed"] == df["workload.seed"].min()]
    exact_only = not (df[W] != schema.EXACT).any()
    if exact_only:  # the exact indexer selects tokens whatever G says: one panel, not the same curve per G
        df = df[df[G] == df[G].min()]
    gs = sorted(df[G].unique())
    drawn = point_keys(df.drop_duplicates([G, W]))  # the point each curve is drawn from (the first of its G, W)
    if mrc is None:
        mrc = res.detail(schema.CACHE_MRC, keys=drawn)
    levels = _detail_of(res, schema.CACHE_LEVELS, drawn)
    fig, axes = plt.subplots(1, len(gs), figsize=(4.2 * len(gs) + 1, 4.3), sharey=True, squeeze=False)
    sizes, unknown, xs_all = {}, [], []  # sizes: {G (None: exact): {weighting: object bytes}}
    for ax, g in zip(axes[0], gs):
        d = df[df[G] == g]
        for wi, w in enumerate(sorted(d[W].unique(), key=weighting_sort_key)):
            r = d[d[W] == w].iloc[0]
            c = mrc[(mrc["file"] == r["file"]) & (mrc["index"] == r["index"])]
            ob = _object_bytes(r, levels)
            if not ob:
                unknown.append(f"{w} G={g}")
                continue
            sizes.setdefault(None if w == schema.EXACT else g, {})[w] = ob
            x = c["capacity_entries"].to_numpy(dtype=float) * ob
            xs_all.extend(x[x > 0])
            ax.plot(x, c["miss_ratio"], color=color_of(wi, w), ls=LINESTYLES[wi % len(LINESTYLES)], lw=1.4, label=w)
        total = 0
        for i, spec in enumerate(str(d["cache.levels"].iloc[0]).split()):
            total += parse_size(re.sub(r"B$", "", spec.split(":")[-1])) or 0
            xs_all.append(total)
            ax.axvline(total, color="grey", lw=0.8, ls=":")
            ax.text(total, 0.98, f" L1..L{i + 1}", rotation=90, va="top", ha="right", fontsize=7,
                    color="#444444", transform=ax.get_xaxis_transform())
        ax.set_xlabel("LRU capacity (bytes)")
        ax.set_title("exact indexer (G does not apply)" if exact_only else f"G = {g}")
        ax.set_ylim(0, 1.02)
    if not any(ax.lines for ax in axes[0]):
        raise NoData("mrc: the size of the cache objects is unknown for every curve (" + ", ".join(unknown) + ")")
    if xs_all:  # the same byte ticks in every panel, one per power of two from the smallest to the largest
        lo, hi = int(np.floor(np.log2(min(xs_all)))), int(np.ceil(np.log2(max(xs_all))))
        for ax in axes[0]:
            log2_axis(ax, [2.0 ** e for e in range(lo, hi + 1)], bytes_label)
    axes[0, 0].set_ylabel("miss ratio (fraction of accesses)")
    obj = []
    for g, per in sorted(sizes.items(), key=lambda kv: -1 if kv[0] is None else kv[0]):
        if g is None:
            obj.append(f"exact indexer {bytes_label(per[schema.EXACT])}")
        elif len(set(per.values())) == 1:
            obj.append(f"G = {g}: {bytes_label(next(iter(per.values())))}")
        else:
            obj.append(f"G = {g}: " + ", ".join(f"{w} {bytes_label(b)}" for w, b in per.items()))
    obj = "; ".join(obj)
    kind = str(df["cache.object"].iloc[0])
    what = ("the keys and values of the tokens it covers (cache.object = kv)" if kind == "kv" else
            "its stored index entry (cache.object = index)")
    n = caption(fig, "Exact LRU miss-ratio curve of each point's access trace (one seed, every request interleaved "
                     "step by step). x: capacity in bytes, each curve's object count times its own object size: an "
                     f"object is one selected unit's data, {what}; the exact indexer selects single tokens, the "
                     f"pooled schemes groups of G tokens. Object sizes: {obj}. Dotted: cumulative capacity of the "
                     "configured tiers (bytes). No error bars (one trace per curve). "
                + ("Only the exact indexer in the results: one panel (its trace is the same at every G). "
                   if exact_only else "")
                + (f"Not drawn (object size unknown): {', '.join(unknown)}. " if unknown else "")
                + (f"Slice: {note}. " if note else ""), (), sources(df),
                skipped=skipped_note(res, df, (), (W, G)))
    return finish(fig, "Miss-ratio curves", n, _legend(fig), 7)


# -------------------------------------------------------------------------------- hybrid and re-pooling
def with_budget(df):
    """df with schema.TOKEN_BUDGET: the tokens the layer is given per step, select.topk_tokens for pure sparse
    attention and select.topk_tokens + hybrid.window for the hybrid (matched budget: hybrid at k - W vs
    sparse at k)."""
    hyb = df[schema.HYBRID_ENABLED].astype(bool)
    budget = df[schema.TOPK].astype(float) + np.where(hyb, df[schema.HYBRID_WINDOW].astype(float), 0.0)
    return df.assign(**{schema.TOKEN_BUDGET: budget})


def hybrid_rows(res, family="hybrid"):
    """The ok points of a hybrid-vs-sparse comparison: the backends (and sweeps) that ran both settings of
    hybrid.enabled, with the layer columns, and the token budget column. NoData naming what is missing."""
    need = [schema.HYBRID_ENABLED, schema.TOPK, schema.HYBRID_WINDOW, schema.LAYER_MS, schema.LAYER_OUTPUT_ERROR,
            schema.LAYER_MASS_RECALL]
    df = ok_rows(res, family, need)
    modes = set(df[schema.HYBRID_ENABLED].astype(bool))
    if modes != {False, True}:
        raise NoData(f"{family}: needs points with {schema.HYBRID_ENABLED} = false (pure sparse) and true "
                     f"(hybrid layer) and the column {schema.LAYER_MS}; found {schema.HYBRID_ENABLED} = "
                     f"{', '.join(fmt_value(schema.HYBRID_ENABLED, m) for m in sorted(modes))}")
    n = df.groupby([RUN, "attr.sweep_id"])[schema.HYBRID_ENABLED].transform("nunique")
    df = df[n >= 2]
    if df.empty:
        raise NoData(f"{family}: no backend (and sweep) ran both {schema.HYBRID_ENABLED} = false and true")
    return with_budget(df)


def combine_text(rule):
    """'gate:0.25' -> 'gate:0.25, i.e. 0.75·o_sparse + 0.25·o_local'."""
    rule = str(rule)
    if rule == "sum":
        return "sum, i.e. o_sparse + o_local"
    if rule.startswith("gate:"):
        try:
            g = float(rule.split(":", 1)[1])
            return f"{rule}, i.e. {1 - g:g}·o_sparse + {g:g}·o_local"
        except ValueError:
            pass
    return rule


def matched_speedup(df):
    """Per matched token budget: sparse layer_ms / hybrid layer_ms (medians over replicate points), both from
    one sweep: points of different sweeps are not repeats of one another, so where several sweeps ran both
    layers at a budget, the sweep with the most points in df (as summarize() chooses)."""
    SW = "attr.sweep_id"
    sweep = df[SW].astype(str) if SW in df.columns else pd.Series("", index=df.index)
    hyb = df[schema.HYBRID_ENABLED].astype(bool)
    med = df[schema.LAYER_MS].astype(float).groupby([sweep, hyb, df[schema.TOKEN_BUDGET]]).median()
    rank = sweep.value_counts()
    out = {}
    for b in sorted(df[schema.TOKEN_BUDGET].unique()):
        both = [sw for sw in rank.index if (sw, False, b) in med.index and (sw, True, b) in med.index]
        if both:
            sw = max(both, key=lambda s: (rank[s], s))
            out[b] = med[(sw, False, b)] / med[(sw, True, b)]
    return pd.Series(out, dtype=float).dropna()


def fig_hybrid(res):
    """Hybrid layer vs pure sparse attention at matched token budget: layer time, speed-up, output error
    and attention-mass recall vs the tokens the layer is given per step."""
    df = hybrid_rows(res)
    df, note = fix_others(df, keep=(schema.TOPK, schema.HYBRID_ENABLED, schema.HYBRID_WINDOW, "attr.sweep_id"))
    hyb = df[df[schema.HYBRID_ENABLED].astype(bool)]
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.6))
    axes = axes.ravel()
    kinds = set()
    df = df.assign(**{schema.HYBRID_ENABLED: df[schema.HYBRID_ENABLED].astype(bool)})
    # One hybrid series per window W: at one token budget, different windows are different layers (k - W
    # sparse tokens + W local), not repeats. The pure sparse points ignore hybrid.window and form one series.
    SERIES_W = "series_window"
    df = df.assign(**{SERIES_W: np.where(df[schema.HYBRID_ENABLED], df[schema.HYBRID_WINDOW].astype(float), -1.0)})
    windows_drawn = sorted(w for w in df[SERIES_W].unique() if w >= 0)
    series = [(False, -1.0)] + [(True, w) for w in windows_drawn]

    def name(mode, w):
        if not mode:
            return "pure sparse (k tokens)"
        return "hybrid (k − W sparse + W local)" + (f", W = {int(w)}" if len(windows_drawn) > 1 else "")

    for ax, m in zip(axes[[0, 2, 3]], (schema.LAYER_MS, schema.LAYER_OUTPUT_ERROR, schema.LAYER_MASS_RECALL)):
        # Both layers summarized together: where several sweeps ran a budget, every curve takes the same one.
        both, k = summarize(res, df, [schema.TOKEN_BUDGET, schema.HYBRID_ENABLED, SERIES_W], m)
        kinds |= k
        for mi, (mode, w) in enumerate(series):
            s = both[(both[schema.HYBRID_ENABLED] == mode) & (both[SERIES_W] == w)]
            errorbar(ax, dodge(s[schema.TOKEN_BUDGET], mi, len(series)), s, color=color_of(mi),
                     marker=MARKERS[mi % len(MARKERS)], ls=LINESTYLES[mi % len(LINESTYLES)], label=name(mode, w))
    any_sp = False
    for wi, w in enumerate(windows_drawn):
        sp = matched_speedup(df[~df[schema.HYBRID_ENABLED] | (df[SERIES_W] == w)])
        if len(sp):
            any_sp = True
            axes[1].plot(sp.index, sp.values, color="black" if len(windows_drawn) == 1 else color_of(wi + 1),
                         marker=MARKERS[(wi + 1) % len(MARKERS)],
                         label="sparse ÷ hybrid layer time" + (f", W = {int(w)}" if len(windows_drawn) > 1 else ""))
    if not any_sp:
        axes[1].text(0.5, 0.5, "no token budget that both layers ran", ha="center", va="center",
                     transform=axes[1].transAxes, color="#555555")
    axes[1].axhline(1, color="grey", lw=0.8)
    axes[1].axhline(2.3, color="#D55E00", lw=0.9, ls="--", label="article's claim, 2.3×")
    axes[0].set_ylabel("attention layer time per step (ms)")
    logy(axes[0])
    axes[1].set_ylabel("speed-up of hybrid over sparse (×)")
    axes[1].set_ylim(bottom=0)
    axes[2].set_ylabel("layer output error vs dense (relative L2)")
    axes[3].set_ylabel("dense attention mass covered (fraction)")
    budgets = df[schema.TOKEN_BUDGET]
    for ax, t in zip(axes, ("(a) layer time", "(b) speed-up at matched budget", "(c) output error",
                            "(d) attention-mass recall")):
        context_axis(ax, budgets)
        ax.set_xlabel("tokens per step given to the layer (sparse: k; hybrid: k − W + W)")
        ax.set_title(t)
    windows = ", ".join(str(int(w)) for w in sorted(hyb[schema.HYBRID_WINDOW].unique()))
    rules = "; ".join(combine_text(c) for c in sorted(hyb[schema.HYBRID_COMBINE].astype(str).unique()))
    cov = hyb[schema.LAYER_TOKENS_PER_STEP] / hyb[schema.TOKEN_BUDGET] if schema.LAYER_TOKENS_PER_STEP in hyb else None
    cov_text = (f" The hybrid's measured tokens per step (layer_tokens_per_step, the union: window and selection "
                f"can overlap) are {100 * cov.min():.0f}–{100 * cov.max():.0f}% of its budget."
                if cov is not None and cov.notna().any() else "")
    runs = ", ".join(sorted(set(df[RUN])))
    text = (f"Hybrid layer: gated linear attention over the last W = {windows} tokens plus sparse attention over the "
            f"k − W tokens IndexPool selects (select.topk_tokens), combined by hybrid.combine = {rules}; pure sparse "
            f"attends to k selected tokens. Matched token budget: the same x. Layer time: median per decode step "
            f"of scoring + top-k + sparse attention + local branch (layer_ms; {runs} wall clock), the attention "
            f"layer only, not end-to-end; (b) is the ratio of the medians where both layers ran the budget in one sweep. "
            f"Errors and recalls: mean over steps against dense softmax attention (an untrained local branch: "
            f"not perplexity).{cov_text} Series are offset sideways. " + (f"Slice: {note}." if note else ""))
    n = caption(fig, text, kinds, sources(df),
                skipped=skipped_note(res, df, (schema.TOPK, schema.HYBRID_WINDOW), (schema.HYBRID_ENABLED,)))
    return finish(fig, "Hybrid layer vs pure sparse attention at matched token budget", n, _legend(fig), 4)


def fig_repool(res):
    """Incremental re-pooling: fraction of groups re-pooled per step, and token recall, vs threshold tau;
    the full rebuild (tau = -1) drawn as a reference line."""
    df = ok_rows(res, "repool", [schema.REPOOL_TAU, schema.REPOOLED_FRACTION_MEAN, "token_recall", W])
    if not (df[schema.REPOOL_TAU] >= 0).any():
        raise NoData(f"repool: needs points with {schema.REPOOL_TAU} >= 0 (incremental re-pooling) and the column "
                     f"{schema.REPOOLED_FRACTION_MEAN}; every point has {schema.REPOOL_TAU} = -1 (full rebuilds)")
    # Only the sweeps (and backends) that ran incremental re-pooling; their tau = -1 points are the reference.
    has = (df[schema.REPOOL_TAU] >= 0).groupby([df[RUN], df["attr.sweep_id"]]).transform("any")
    df = df[has]
    df, note = fix_others(df, keep=(schema.REPOOL_TAU, W, "attr.sweep_id"))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6))
    kinds, dashed = set(), False
    taus = sorted(t for t in df[schema.REPOOL_TAU].unique() if t >= 0)
    for wi, w in enumerate(sorted(df[W].unique(), key=weighting_sort_key)):
        d = df[df[W] == w]
        inc, full = d[d[schema.REPOOL_TAU] >= 0], d[d[schema.REPOOL_TAU] == schema.FULL_REBUILD_TAU]
        col = color_of(wi, w)
        for ax, m in zip(axes, (schema.REPOOLED_FRACTION_MEAN, "token_recall")):
            if len(inc):
                s, k = summarize(res, inc, [schema.REPOOL_TAU], m)
                kinds |= k
                errorbar(ax, s[schema.REPOOL_TAU], s, color=col, marker=MARKERS[wi % 8], label=f"{w}, τ ≥ 0")
            if len(full):
                dashed = True
                f, k = summarize(res, full, [schema.REPOOL_TAU], m)
                kinds |= k
                ax.axhline(float(f["center"].iloc[0]), color=col, ls="--", lw=1.1, label=f"{w}, full rebuild (τ = −1)")
    axes[0].set_ylabel("groups re-pooled per step (fraction)")
    axes[1].set_ylabel("token recall (fraction)")
    axes[0].set_ylim(-0.02, 1.05)
    lin = min([t for t in taus if t > 0], default=0.01)
    for ax, t in zip(axes, ("(a) re-pooled fraction", "(b) token recall")):
        ax.set_xscale("symlog", linthresh=lin, linscale=0.5)
        ax.set_xticks(taus)
        ax.set_xlim(-0.3 * lin, max(taus[-1], lin) * 1.4)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.tick_params(axis="x", labelrotation=45 if len(taus) > 6 else 0)
        ax.set_xlabel("re-pooling threshold τ (relative L1 weight movement, no unit)")
        ax.set_title(t)
    text = ("A group is re-pooled when its weight vector moved by more than τ (relative L1) since it was last "
            "pooled; τ = 0 gives the full rebuild's bits. Re-pooled fraction: groups re-pooled / groups, mean "
            "over the decode steps after the first (repooled_fraction_mean). "
            + ("Dashed: the same weighting with full rebuilds every step (τ = −1), a reference at no τ. "
               if dashed else "No point with full rebuilds (τ = −1) in the slice: no reference line. ")
            + "x axis linear below τ = "
            f"{lin:g}, logarithmic above. " + (f"Slice: {note}." if note else ""))
    n = caption(fig, text, kinds, sources(df),
                skipped=skipped_note(res, df, (schema.REPOOL_TAU,), (W,)))
    return finish(fig, "Re-pooled fraction vs τ", n, _legend(fig), 4)


def _counters_missing(res):
    """Why no point has counters, from the points' counters_status / counters_reason attributes."""
    what = f"counters: no finished point has a point_NNNNNN/{schema.COUNTERS} table"
    if not hasattr(res, "point_attrs"):
        return what
    pa = res.point_attrs([schema.COUNTERS_STATUS, schema.COUNTERS_REASON], res.ok)
    pa = pa.dropna(subset=[schema.COUNTERS_STATUS])
    if pa.empty:
        return what + f" (and no {schema.COUNTERS_STATUS} attribute: profile.counters was never asked for)"
    parts = []
    for (status, reason), g in pa.fillna("").groupby([schema.COUNTERS_STATUS, schema.COUNTERS_REASON], sort=False):
        n = f"{len(g)} point" + ("s" if len(g) != 1 else "")
        if status == "off":
            parts.append(f"{schema.COUNTERS_STATUS} = off in {n} (profile.counters = off)")
        else:
            parts.append(f"{schema.COUNTERS_STATUS} = {status} in {n}" + (f": {reason}" if reason else ""))
    return what + "; " + "; ".join(parts)


def _stage_order(stages):
    known = [st for st in schema.PROFILE_STAGES if st in set(stages)]
    return known + sorted(set(stages) - set(known))


def _metric_label(m):
    lab = schema.METRIC_LABELS.get(m)
    return f"{lab} ({m})" if lab else m


def _bars(ax, frame, stages, metrics, colours):
    """Horizontal bars: one group per stage, one bar per metric; mean over points, error ±1 s.d."""
    h = 0.8 / max(1, len(metrics))
    sd_used = False
    for mi, m in enumerate(metrics):
        g = frame[frame["metric"] == m].groupby("stage")["y"]
        mean, sd = g.mean().reindex(stages), g.std(ddof=1).reindex(stages).fillna(0)
        sd_used = sd_used or bool((sd > 0).any())
        y = np.arange(len(stages)) + (mi - (len(metrics) - 1) / 2) * h
        bars = ax.barh(y, mean, height=h * 0.95, xerr=sd if (sd > 0).any() else None, color=colours[mi],
                       edgecolor="black", lw=0.4, label=_metric_label(m), capsize=2)
        ax.bar_label(bars, fmt=lambda v: f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}", fontsize=6.5, padding=2)
    top = np.nanmax(frame.groupby(["metric", "stage"])["y"].mean().to_numpy()) if len(frame) else 0
    ax.set_xlim(0, top * 1.15 if top > 0 else 1)  # room for the labels
    ax.set_yticks(range(len(stages)), stages)
    ax.invert_yaxis()  # pipeline order from the top
    ax.set_ylabel("stage")
    return sd_used


def fig_counters(res):
    """Hardware counters per stage (CUPTI, point_NNNNNN/counters): every percent metric (utilization as % of
    peak, hit rates), and DRAM traffic per stage (GB per stage call, or GB/s against the stage's kernel time
    when kernel records are present)."""
    c = res.detail(schema.COUNTERS) if hasattr(res, "detail") else pd.DataFrame()
    if c.empty:
        raise NoData(_counters_missing(res))
    missing = [k for k in schema.COUNTER_COLUMNS if k not in c.columns]
    if missing:
        raise NoData(f"counters: point_NNNNNN/{schema.COUNTERS} lacks the columns {', '.join(missing)} (found "
                     f"{', '.join(x for x in c.columns if x not in ('file', 'index'))})")
    df = ok_rows(res, "counters", [W, G])
    df = df[df.set_index(["file", "index"]).index.isin(c.set_index(["file", "index"]).index.unique())]
    df, note = fix_others(df, keep=("attr.sweep_id",))
    c = c.merge(df[["file", "index"]], on=["file", "index"])
    npts = len(c[["file", "index"]].drop_duplicates())
    unit = c["unit"].fillna("").str.lower()
    pct = c[(unit == schema.UNIT_PERCENT)].assign(y=lambda x: x["value"].astype(float))
    dram = c[c["metric"].str.startswith(schema.DRAM_BYTES_PREFIX) & unit.isin(schema.UNIT_BYTE)].copy()
    if pct.empty and dram.empty:
        raise NoData(f"counters: the {schema.COUNTERS} tables hold no metric in percent and no DRAM bytes "
                     f"({schema.DRAM_BYTES_PREFIX}*); metrics found: {', '.join(sorted(c['metric'].unique()))}")
    # DRAM bytes of all the stage's calls in the point ("sum": as stored; "mean": times the calls).
    dram["total"] = np.where(dram["aggregate"] == "mean", dram["value"] * dram["calls"], dram["value"]).astype(float)
    rate = False
    if len(dram):
        k = res.detail(schema.KERNELS) if hasattr(res, "detail") else pd.DataFrame()
        if len(k) and all(col in k.columns for col in schema.KERNEL_COLUMNS):
            kt = (k[k["pass"] == 0].groupby(["file", "index", "stage"])["duration_ns"].sum()
                  .rename("kernel_ns").reset_index())
            dram = dram.merge(kt, on=["file", "index", "stage"], how="left")
            rate = bool((dram["kernel_ns"] > 0).all())
        if rate:
            dram["y"] = dram["total"] / dram["kernel_ns"]  # bytes per ns = GB/s
        else:
            dram["y"] = dram["total"] / dram["calls"].clip(lower=1) / 1e9
    panels = [p for p in (("pct", pct), ("dram", dram)) if len(p[1])]
    stages = _stage_order(pd.concat([p[1]["stage"] for p in panels]).unique())
    metrics_of = {name: sorted(fr["metric"].unique(), key=lambda m: (m not in schema.METRIC_LABELS, m))
                  for name, fr in panels}
    nbars = max(len(metrics_of[n]) for n, _ in panels)
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels) + 1, 0.38 * len(stages) * nbars + 3.2),
                             squeeze=False)
    sd_used = False
    ci = 0
    for ax, (name, fr) in zip(axes[0], panels):
        ms = metrics_of[name]
        sd_used |= _bars(ax, fr, stages, ms, [color_of(ci + i) for i in range(len(ms))])
        ci += len(ms)
        if name == "pct":
            ax.set_xlabel("percent (%)")
            ax.set_xlim(0, 108)
            ax.set_title("(a) metrics in percent, per stage")
        else:
            ax.set_xlabel("DRAM bandwidth (GB/s)" if rate else "DRAM traffic per stage call (GB)")
            ax.set_title(("(b) " if len(panels) > 1 else "") +
                         ("DRAM bandwidth per stage" if rate else "DRAM traffic per stage call"))
    texts = []
    if len(pct):
        texts.append("Percent metrics: CUPTI's values averaged over each stage's calls in a point (aggregate mean); "
                     "% of peak for throughput and occupancy, a hit rate for the L2 sector hit rate.")
    if len(dram):
        if rate:
            texts.append("DRAM: bytes of all of a stage's calls divided by the summed duration of that stage's "
                         f"kernels in the run itself (pass 0 of point_NNNNNN/{schema.KERNELS}), in GB/s (10⁹ B/s); "
                         "not against the *_ms stage times, which include the counter replay passes.")
        else:
            texts.append("DRAM: bytes per stage call (the stage's bytes over its calls), in GB (10⁹ B); no GB/s "
                         "because no kernel records (profile.kernel_records) give the stage's kernel time, and "
                         "the *_ms stage times include the counter replay passes.")
    texts.append(f"Bars: mean over the {npts} point{'s' if npts != 1 else ''} of the slice"
                 + (", error ±1 s.d. over them." if sd_used else "."))
    if hasattr(res, "point_attrs"):
        pa = res.point_attrs([schema.COUNTERS_CHIP, schema.COUNTERS_PASSES], df)
        chips = sorted({str(x) for x in pa[schema.COUNTERS_CHIP].dropna()})
        passes = sorted({int(x) for x in pa[schema.COUNTERS_PASSES].dropna()})
        if chips:
            texts.append(f"Chip {', '.join(chips)}" + (f", {', '.join(map(str, passes))} replay passes per call."
                                                         if passes else "."))
    if note:
        texts.append(f"Slice: {note}.")
    n = caption(fig, " ".join(texts), (), sources(df))
    return finish(fig, "Hardware counters per stage", n, _legend(fig), 2)


def fig_batched(res):
    """Batched decode (select.batched on a GPU backend): the time of one decode step of the whole batch, per
    stage, and the decode rate, vs the number of requests B decoded together."""
    B = "workload.requests"
    stages = [(c, n) for c, n in schema.STAGES if c != "pool_ms"] + [(schema.LAYER_MS, "whole step")]
    df = ok_rows(res, "batched", [B, "context", W, PREC, RUN] + [c for c, _ in stages])
    df = df[batched_gpu(df)]
    if df.empty:
        raise NoData("batched: no point ran with select.batched = true on a GPU backend (run_backend "
                      f"in {list(schema.GPU_BACKENDS)})")
    df, note = fix_others(df, keep=(B, W, PREC, RUN, "attr.sweep_id"))
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.4))
    kinds = set()
    series = sorted({(w, p) for w, p in zip(df[W], df[PREC])}, key=lambda x: (weighting_sort_key(x[0]), x[1]))
    for i, (w, p) in enumerate(series):
        d = df[(df[W] == w) & (df[PREC] == p)]
        lab = f"{w} {p}"
        s, k = summarize(res, d, [B], schema.LAYER_MS)
        kinds |= k
        style = dict(color=color_of(i, w), marker=MARKERS[i % len(MARKERS)], label=lab)
        errorbar(axes[0], s[B], s, **style)
        rate = s.assign(center=s[B] / (s["center"] / 1e3), lo=s[B] / (s["hi"] / 1e3), hi=s[B] / (s["lo"] / 1e3))
        errorbar(axes[1], s[B], rate, **style)
        if i == 0:  # the stages of the first series
            for si, (col, name) in enumerate(stages[:-1]):
                st, k2 = summarize(res, d, [B], col)
                kinds |= k2
                errorbar(axes[2], st[B], st, color=color_of(si), ls=LINESTYLES[si % len(LINESTYLES)], marker=MARKERS[si],
                         label=f"{name} ({lab})")
    axes[0].set_ylabel("batch step time (ms)")
    axes[0].set_title("one decode step of all B requests")
    axes[1].set_ylabel("decode rate (request-steps/s)")
    axes[1].set_title("B / step time")
    axes[2].set_ylabel("stage time per batch step (ms)")
    axes[2].set_title("stages (first series)")
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("requests decoded together B (requests)")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p=None: f"{v:g}"))
        logy(ax)
    n = caption(fig, "select.batched on a GPU: each step is one score, one top-k and one attention launch for all B "
                     "requests (kernels/batched_decode.h); times are CUDA-event medians over decode steps, of the whole "
                     "batch. " + (f"Slice: {note}. " if note else "")
                + constants(df, [RUN, "select.topk_tokens"], note), kinds, sources(df),
                skipped=skipped_note(res, df, ("workload.requests",), (W, PREC)))
    return finish(fig, "Batched decode: step time and rate vs batch size", n, _legend(fig), 6)


# ------------------------------------------------------------------------------------------ kernel forms
FORM_ORDER = {"kernels.score_math": ["auto", "fp32", "split", "bf16"],
              "kernels.topk": ["auto", "chain", "single", "cluster", "block"],
              "kernels.attention": ["auto", "tiles", "lanes"],
              "kernels.linear_attention": ["auto", "sequential", "chunked"]}


def fig_forms(res):
    """Stage times per kernel form ([kernels] axes, points on a GPU backend): for each form key that varies, the
    median scoring, top-k and attention time per step of each form, one bar per weighting (and batch)."""
    B = "workload.requests"
    stages = [(c, n) for c, n in schema.STAGES if c != "pool_ms"]
    df = ok_rows(res, "forms", [W, RUN] + [c for c, _ in stages])
    df = df[df[RUN].isin(schema.GPU_BACKENDS)]
    keys = [k for k in schema.KERNEL_FORM_KEYS if k in df.columns and df[k].nunique() > 1]
    if df.empty or not keys:
        raise NoData("forms: no kernels.* key takes several values among points that ran on a GPU backend (run_backend "
                     f"in {list(schema.GPU_BACKENDS)}); configs/kernel_forms.ini is such a sweep")
    fig, axes = plt.subplots(len(keys), len(stages), figsize=(4.6 * len(stages), 3.4 * len(keys) + 0.6), squeeze=False)
    kinds, notes, used = set(), [], []
    for ki, key in enumerate(keys):
        d0, note = fix_others(df, keep=(W, key, RUN, schema.BATCHED, B, "attr.sweep_id"))
        if note:
            notes.append(f"{SHORT.get(key, key)} row: {note}")
        used.append(d0)
        forms = sorted(d0[key].unique(), key=lambda v: (FORM_ORDER[key].index(v) if v in FORM_ORDER[key] else 99, v))
        batched = batched_gpu(d0)
        d0 = d0.assign(_series=[f"{w}" + (f" [batched B={int(b)}]" if bt else "")
                                for w, b, bt in zip(d0[W], d0[B], batched)])
        series = sorted(d0["_series"].unique(), key=lambda x: (weighting_sort_key(x.split(" ")[0]), x))
        width = 0.8 / max(1, len(series))
        for si, (col, name) in enumerate(stages):
            ax = axes[ki, si]
            for j, ser in enumerate(series):
                d = d0[(d0["_series"] == ser) & (d0[col] > 0)]
                if d.empty:
                    continue
                st, k = summarize(res, d, [key], col)
                kinds |= k
                x = np.array([forms.index(v) for v in st[key]], dtype=float) + (j - (len(series) - 1) / 2) * width
                c = np.asarray(st["center"], dtype=float)
                err = np.vstack([c - np.asarray(st["lo"], dtype=float), np.asarray(st["hi"], dtype=float) - c])
                ax.bar(x, c, width, yerr=np.where(np.isfinite(err), err, 0), capsize=2,
                       color=color_of(j, ser.split(" ")[0]), label=ser)
            ax.set_xticks(range(len(forms)))
            ax.set_xticklabels(forms)
            ax.set_xlabel(key)
            ax.set_ylabel(f"{name} time per step (ms)")
            if ki == 0:
                ax.set_title(name)
    if not any(ax.patches for ax in axes.flat):
        raise NoData("forms: no stage time is positive")
    sel = pd.concat(used)
    n = caption(fig, "Median over decode steps on the GPU backend, on the host clock around each stage's backend call "
                     "(its uploads, downloads and synchronization included); batched points: CUDA events of the "
                     "whole batch's launch. " + (f"Slice: {'; '.join(notes)}. " if notes else "")
                + constants(sel, [RUN, PREC, "select.topk_tokens", "workload.index_heads"], "; ".join(notes)), kinds,
                sources(sel),
                skipped=skipped_note(res, sel, tuple(keys), (W,)))
    return finish(fig, "Stage time per kernel form", n, _legend(fig), 6)


# name -> (function, one-line description). Order = the order `figures` makes them.
FAMILIES = {
    "memory": (fig_memory, "index memory vs context length, exact vs pooled, every precision"),
    "latency": (fig_latency, "time and throughput per stage vs context length and backend"),
    "backends": (fig_backend_latency, "stage time CPU vs CUDA backend (needs points with run_backend = cuda)"),
    "macs": (fig_macs, "scoring multiply-adds per query"),
    "ablation": (fig_ablation, "recall, mass recall, output error for every weighting x G"),
    "quality": (fig_quality, "recall, mass recall, output error vs context length T and vs the selection budget k "
                             "(needs points at several T or k)"),
    "precision": (fig_precision, "recall, mass recall, output error vs index bytes per token for every stored "
                                 "precision (needs points with several pool.precision values)"),
    "cache": (fig_cache, "hit rate per tier vs context length and vs concurrent requests, with the OPT "
                         "reference and the OPT bound"),
    "mrc": (fig_mrc, "exact LRU miss-ratio curves vs cache capacity in bytes"),
    "hybrid": (fig_hybrid, "hybrid layer vs pure sparse attention at matched token budget (needs points with "
                           "hybrid.enabled = false and true: layer_ms, layer_output_error, layer_mass_recall)"),
    "repool": (fig_repool, "re-pooled fraction and token recall vs tau (needs pool.repool_tau >= 0 points: "
                           "repooled_fraction_mean)"),
    "counters": (fig_counters, "hardware counters per stage: percent metrics and DRAM traffic (needs "
                               "point_*/counters: profile.counters = on, cuda backend)"),
    "batched": (fig_batched, "batched decode: step time and rate vs the requests decoded together (needs "
                             "select.batched = true points on the cuda backend)"),
    "forms": (fig_forms, "stage time per kernel form (needs [kernels] axes, e.g. configs/kernel_forms.ini, on the "
                         "cuda backend)"),
}
