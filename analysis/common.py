"""What the figure families share: style, series labels, slicing, error bars, saving (and write_output, which
every file the package writes goes through)."""
import os
import re
import secrets

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator  # noqa: E402

from . import schema  # noqa: E402
from .load import AnalysisError, NoData  # noqa: E402

# Okabe & Ito's colour-blind-safe palette; every series also differs by marker or line style.
OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442"]
WEIGHTING_COLOR = dict(zip(schema.WEIGHTING_ORDER, ["#000000", "#0072B2", "#E69F00", "#009E73", "#D55E00",
                                                    "#CC79A7", "#56B4E9"]))
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
# Dash patterns told apart at a glance: more than 4, so five precisions (or weightings) never share one.
LINESTYLES = ["-", "--", ":", "-.", (0, (3, 1, 1, 1, 1, 1)), (0, (9, 3)), (0, (5, 1, 1, 1))]
SEQUENTIAL_CMAP = "cividis"  # colour-blind safe, monotone lightness

plt.rcParams.update({
    "figure.dpi": 100, "savefig.dpi": 150, "font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9,
    "legend.fontsize": 8, "axes.grid": True, "grid.alpha": 0.3, "pdf.fonttype": 42,
    "axes.prop_cycle": matplotlib.cycler(color=OKABE_ITO),
})

W, G, PREC = "pool.weighting", "pool.group_size", "pool.precision"


def color_of(i, key=None):
    if key in WEIGHTING_COLOR:
        return WEIGHTING_COLOR[key]
    return OKABE_ITO[i % len(OKABE_ITO)]


def binary_label(v, sep="", unit=""):
    """A count in binary multiples: binary_label(65536) -> '64Ki', binary_label(2**23, ' ', 'B') -> '8 MiB'."""
    v = float(v)
    for prefix, n in (("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
        if v >= n:
            x = v / n
            return f"{x:.0f}{sep}{prefix}{unit}" if abs(x - round(x)) < 1e-9 else f"{x:.3g}{sep}{prefix}{unit}"
    return f"{v:.0f}{sep}{unit}" if unit else f"{v:.0f}"


def tokens_label(v, _pos=None):
    """65536 -> '64Ki', 2097152 -> '2Mi'."""
    return binary_label(v)


def log2_axis(ax, values, fmt=tokens_label):
    """A log2 x axis with a tick at each value and limits set from the values and the data drawn (the x of
    every line, dodged series included), never left to autoscaling: error-bar collections' data limits would
    otherwise stretch the range far to the left. Call after drawing."""
    ax.set_xscale("log", base=2)
    vals = sorted(set(float(v) for v in values if np.isfinite(v) and v > 0))
    if not vals:
        return
    ax.set_xticks(vals)
    ax.xaxis.set_major_formatter(FuncFormatter(fmt))
    ax.xaxis.set_minor_locator(NullLocator())
    xs = [float(x) for ln in ax.lines if ln.get_transform() is ax.transData  # not axhline's axes fractions
          for x in np.asarray(ln.get_xdata(), dtype=float).ravel() if np.isfinite(x) and x > 0]
    lo, hi = min(vals + xs), max(vals + xs)
    pad = 1.6 if hi / lo < 1.5 else 1.25  # one value: some room either side; several: a margin
    ax.set_xlim(lo / pad, hi * pad)
    ax._ip_log2_ticks = len(vals)  # finish() thins the labels if they would run together


def _overlapping(labels, renderer, gap=3):
    boxes = sorted((t.get_window_extent(renderer) for t in labels), key=lambda b: b.x0)
    return any(b.x0 < a.x1 + gap for a, b in zip(boxes, boxes[1:]))


def _label_phase(ticks, k):
    """Which ticks every k-th label keeps: the phase (ticks i with (n - 1 - i) % k == phase) that labels the most
    powers of two (1Ki, 2Ki, 4Ki rather than 1.5Ki, 2.5Ki), then the one that labels the largest tick."""
    n = len(ticks)

    def pow2(v):
        return v > 0 and float(v).is_integer() and (int(v) & (int(v) - 1)) == 0

    return max(range(k), key=lambda ph: (sum(pow2(ticks[i]) for i in range(n) if (n - 1 - i) % k == ph), -ph))


def thin_tick_labels(fig):
    """On the log2 axes of log2_axis: when the tick labels would run together, label every k-th tick only, the
    smallest k that leaves a gap between labels, in the phase that labels the most powers of two (else the
    largest value). Measured, not guessed."""
    axes = [ax for ax in fig.axes if getattr(ax, "_ip_log2_ticks", 0) >= 2]
    if not axes:
        return
    fig.canvas.draw()  # tick labels exist only once drawn
    renderer = fig.canvas.get_renderer()

    def crowded(ax):
        return _overlapping([t for t in ax.get_xticklabels() if t.get_visible() and t.get_text()], renderer)

    for ax in axes:
        n, orig = ax._ip_log2_ticks, ax.xaxis.get_major_formatter()
        ticks = sorted(float(v) for v in ax.get_xticks())[:n]
        k = 1
        while crowded(ax) and k < n - 1:
            k += 1
            ph = _label_phase(ticks, k)
            ax.xaxis.set_major_formatter(FuncFormatter(
                lambda v, pos, k=k, n=n, ph=ph, f=orig: f(v, pos) if pos is None or (n - 1 - pos) % k == ph else ""))
            fig.canvas.draw()


def context_axis(ax, values):
    log2_axis(ax, values)
    ax.set_xlabel("context length T (tokens)")


def weighting_sort_key(w):
    return schema.WEIGHTING_ORDER.index(w) if w in schema.WEIGHTING_ORDER else len(schema.WEIGHTING_ORDER)


def ok_rows(res, family, columns):
    """The ok points having every column, or NoData naming the family and what is missing."""
    df = res.ok if hasattr(res, "ok") else res
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise NoData(f"{family}: the results have no column {', '.join(missing)}")
    if df.empty and hasattr(res, "points") and len(res.points):
        raise NoData(f"{family}: {skipped_summary(res.points)}")
    full = df.dropna(subset=list(columns))
    if full.empty:
        raise NoData(f"{family}: {no_value(res, df, columns, 'the finished points')}")
    return full


# Columns the runner leaves NaN for a reason the data show: the cache model's rates where it did not run, the
# attention metrics where the workload has no attention stage.
CACHE_COLUMNS = ("cache_l1_hit_rate", "cache_l2_hit_rate", "cache_l3_hit_rate", schema.CACHE_HIT_RATE,
                 schema.CACHE_OPT_HIT_RATE, schema.CACHE_OPT_SINGLE_HIT_RATE)
ATTENTION_COLUMNS = ("mass_recall", "output_error", "layer_output_error", "layer_mass_recall")


def setting_values(res, rows, key, default):
    """The values (text) a config key has at rows: its column where it is one (a sweep axis), else each row's
    file's setting (config text and --set in argv), else the default."""
    if key in rows.columns:
        return {str(v) for v in rows[key]}
    settings = {f.path: f.settings for f in getattr(res, "files", [])}
    paths = rows["file"].unique() if "file" in rows.columns else []
    return {v for p in paths for v in settings.get(p, {}).get(key, [default])} or {default}


def no_value(res, rows, columns, where):
    """Why none of `rows` (at `where`: 'the 4 finished points of uniform') has a value in every one of `columns`:
    'no value of mass_recall, output_error at ...: the workload has no attention stage (...)'. Names only the
    columns without a value at any of the rows (else those with a NaN somewhere: no row has all of them at once),
    and why, where the data show it."""
    n = f"{len(rows)} " if len(rows) > 1 else ""
    where = where.replace("the finished points", f"the {n}finished point{'s' if len(rows) != 1 else ''}")
    empty = [c for c in columns if rows[c].isna().all()]
    if not empty:
        some = [c for c in columns if rows[c].isna().any()]
        return f"none of {where} has a value of all of {', '.join(some)}"
    why = []
    if any(c in CACHE_COLUMNS for c in empty):
        adaptive = rows[schema.ADAPTIVE_ENABLED] if schema.ADAPTIVE_ENABLED in rows.columns else pd.Series(False)
        if all(v.strip().lower() in schema.FALSE_WORDS for v in setting_values(res, rows, "cache.enabled", "true")):
            why.append("the cache model was off (cache.enabled = false)")
        elif adaptive.astype(bool).all():
            why.append("the cache model does not run with adaptive.enabled = true (group sizes vary from step to step)")
        elif schema.CACHE_HIT_RATE not in empty and "cache.levels" in rows.columns:
            levels = ", ".join(sorted(set(rows["cache.levels"].astype(str))))
            why.append(f"the cache hierarchy has fewer tiers (cache.levels = {levels})")
    no_attention = "attention_ms" in rows.columns and (rows["attention_ms"] == 0).all()
    if no_attention and any(c in ATTENTION_COLUMNS for c in empty):
        why.append("the workload has no attention stage (no attention keys, values and queries: an import without "
                   "them, or workload.attn_dim = 0; attention_ms is 0)")
    return f"no value of {', '.join(empty)} at {where}" + (f": {'; '.join(why)}" if why else "")


def skipped_summary(points):
    """'0 of 2 points finished; 2 skipped: select.topk_tokens = 4096 exceeds a request's context of 2048 tokens': why
    nothing can be drawn when no point finished (the skip reasons said once, as reason_summary says them)."""
    st = points["status"] if "status" in points.columns else pd.Series("?", index=points.index)
    reasons = points.loc[st != "ok", "reason"] if "reason" in points.columns else []
    why = reason_summary(reasons) or "no reason given"
    return f"0 of {len(points)} points finished; {int((st != 'ok').sum())} not finished: {why}"


RUN = schema.RUN_BACKEND


def batched_gpu(df):
    """Mask of the rows whose stage times are of a whole batch: select.batched on a GPU backend."""
    if schema.BATCHED not in df.columns or RUN not in df.columns:
        return pd.Series(False, index=df.index)
    return df[schema.BATCHED].astype(bool) & df[RUN].isin(schema.GPU_BACKENDS)


def per_request_times(df, family):
    """df without the batched GPU rows (their *_ms are the batch's), or NoData when nothing else is left.
    Returns (rows, note)."""
    b = batched_gpu(df)
    if not b.any():
        return df, ""
    if b.all():
        raise NoData(f"{family}: every point with times ran batched on a GPU (select.batched), whose times are "
                     "of the whole batch; see the batched figure")
    return df[~b], f"{int(b.sum())} batched GPU points left out (their times are of the whole batch)"


# Setting columns that distinguish points (beyond the ones a figure plots); fix_others picks one value
# of each that varies and says which.
SLICE_KEYS = ("backend", RUN, "threads", "threads_per_request", "workload.source", "workload.dim",
              "workload.index_heads", PREC, "select.topk_tokens",
              "workload.requests", "context", W, G, "cache.object", "cache.levels", schema.HYBRID_ENABLED,
              schema.HYBRID_WINDOW, schema.HYBRID_COMBINE, schema.REPOOL_TAU, schema.ADAPTIVE_ENABLED,
              schema.BATCHED) + schema.KERNEL_FORM_KEYS + ("attr.sweep_id",)
# Other figures show the plain pipeline: pure sparse attention, full rebuilds, fixed group sizes.
PREFER = {PREC: ["fp32", "bf16", "fp16", "fp8", "int8"], G: [4], W: list(schema.REFERENCE_WEIGHTINGS),
          "backend": ["cuda", "auto", "cpu"], RUN: ["cuda", "cpu"], schema.HYBRID_ENABLED: [False],
          schema.REPOOL_TAU: [schema.FULL_REBUILD_TAU], schema.ADAPTIVE_ENABLED: [False], schema.BATCHED: [False],
          **{k: ["auto"] for k in schema.KERNEL_FORM_KEYS}}
SHORT = {RUN: "ran on", PREC: "precision", G: "G", W: "weighting", "select.topk_tokens": "k", "workload.requests": "B",
         "context": "T", "workload.index_heads": "H", "workload.dim": "D", "attr.sweep_id": "sweep",
         schema.HYBRID_ENABLED: "hybrid", schema.HYBRID_WINDOW: "W", schema.HYBRID_COMBINE: "combine",
         schema.REPOOL_TAU: "τ", schema.ADAPTIVE_ENABLED: "adaptive", schema.BATCHED: "batched",
         "kernels.score_math": "score math", "kernels.topk": "top-k form", "kernels.attention": "attention form",
         "kernels.linear_attention": "linear attention form"}


def fmt_value(key, v):
    if key == "context":
        return tokens_label(v)
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, float) and v == int(v):
        return str(int(v))
    return str(v)


# A config key's column ("workload.topic_weight"): a sweep axis, or a KEY_DEFAULTS setting.
_CONFIG_KEY = re.compile(r"[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+")
# Config keys drawn under another column: workload.tokens is "context".
_DRAWN_AS_OTHER = ("workload.tokens",)


def other_settings(df):
    """The config-key columns of df that no figure draws as such (not SLICE_KEYS, not a replicate key):
    sweep axes such as workload.topic_weight or workload.append_per_step, sorted by name."""
    return sorted(c for c in df.columns if isinstance(c, str) and _CONFIG_KEY.fullmatch(c) and not c.startswith("attr.")
                  and c not in SLICE_KEYS and c not in schema.REPLICATE_KEYS and c not in _DRAWN_AS_OTHER)


def fix_others(df, keep, largest=("context",)):
    """Restricts df to one value of every setting column not in `keep` that varies (SLICE_KEYS, then every
    other config key's column, e.g. a sweep axis the figure does not draw): the preferred value when present
    (PREFER), the largest for keys in `largest`, else the most common. Only replicate keys (workload.seed) are
    left to vary, so the points a figure pools are repeats. Where the figure keeps sweeps apart (attr.sweep_id
    in `keep`), an other setting is fixed within each sweep, not across them (a sweep is never dropped for
    it). Returns (subset, text)."""
    notes = []
    SW = "attr.sweep_id"
    per_sweep = SW in keep and SW in df.columns and df[SW].nunique() > 1

    def pick(d, k):
        vals = d[k].dropna().unique().tolist()
        p = next((p for p in PREFER.get(k, []) if p in vals), None)
        if p is None:
            p = max(vals) if k in largest else d[k].value_counts().idxmax()
        return p

    for k in SLICE_KEYS + tuple(other_settings(df)):
        if k in keep or k not in df.columns or df[k].nunique(dropna=False) <= 1:
            continue
        if k in (schema.HYBRID_WINDOW, schema.HYBRID_COMBINE) and schema.HYBRID_ENABLED in df.columns and \
                not df[schema.HYBRID_ENABLED].astype(bool).any():
            continue  # the hybrid layer's settings do not act on pure sparse points
        if k not in SLICE_KEYS:
            kept = [c for c in keep if c in df.columns]
            if kept and df.groupby(kept, dropna=False)[k].nunique(dropna=False).max() <= 1:
                continue  # the kept columns determine it (a key zipped with one of them): no series to collapse
        if per_sweep and k not in SLICE_KEYS:
            if df.groupby(SW)[k].nunique(dropna=False).max() <= 1:
                continue  # differs only between sweeps, which the figure keeps apart (summarize never pools them)
            # A sweep in which the key is no column (NaN: another file's axis, at its default here) keeps its rows.
            picks = {sw: pick(g, k) for sw, g in df.groupby(SW, sort=True) if g[k].notna().any()}
            df = df[[sw not in picks or picks[sw] == v for sw, v in zip(df[SW], df[k])]]
            shown = sorted({fmt_value(k, v) for v in picks.values()})
            notes.append(f"{SHORT.get(k, k)} = {shown[0]}" if len(shown) == 1 else
                         f"{SHORT.get(k, k)} = " + ", ".join(f"{fmt_value(k, v)} (sweep {str(sw)[:8]})"
                                                            for sw, v in picks.items()))
            continue
        p = pick(df, k)
        df = df[df[k] == p]
        notes.append(f"{SHORT.get(k, k)} = {fmt_value(k, p)}")
    return df, ", ".join(notes)


_NUMBER = re.compile(r"\d+(?:\.\d+)?(?:\s?(?:[KMGT]iB|B|[KMGT]i)\b)?")
_SCALE = {"B": 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40}


def _number_value(text):
    """'858.2 MiB' -> 858.2 * 2**20; '3' -> 3.0 (to order the numbers of several reasons)."""
    m = re.match(r"(\d+(?:\.\d+)?)\s?([KMGT]i)?B?$", text.strip())
    return float(m.group(1)) * _SCALE.get(m.group(2) or "B", 1) if m else float("nan")


def reason_summary(reasons):
    """The runner's reasons of several points, said once: reasons that differ only in their numbers become one
    with each differing number as its range ('estimated memory 1.7 MiB–8.5 MiB exceeds the limit 3.0 MiB')."""
    groups = {}
    for r in reasons:
        r = str(r).strip()
        if not r:
            continue
        nums = _NUMBER.findall(r)
        groups.setdefault(_NUMBER.sub("\0", r), []).append(nums)
    out = []
    for template, lists in groups.items():
        pieces = template.split("\0")
        text = pieces[0]
        for i, piece in enumerate(pieces[1:]):
            vals = sorted({nums[i] for nums in lists}, key=_number_value)
            text += (vals[0] if len(vals) == 1 else f"{vals[0]}–{vals[-1]}") + piece
        out.append(text)
    return "; ".join(out)


def skipped_note(res, drawn, axes=("context",), series=()):
    """What the runner did not finish among the points a figure would have drawn: the points of the drawn files
    and sweeps whose status is not "ok" and whose settings are among the drawn ones, except the figure's x axes
    (`axes`, where the lost points are) and the keys it draws every value of as series (`series`). Returns
    'Not drawn: 4 points skipped at T = 8Ki, 16Ki (estimated memory ... exceeds the limit ...).' or ''."""
    pts = getattr(res, "points", None)
    if pts is None or drawn is None or drawn.empty or "status" not in pts.columns or "file" not in drawn.columns:
        return ""
    sk = pts[(pts["status"] != "ok") & pts["file"].isin(drawn["file"].unique())]
    SW = "attr.sweep_id"
    if SW in sk.columns and SW in drawn.columns:
        sk = sk[sk[SW].isin(drawn[SW].unique())]
    for k in SLICE_KEYS + tuple(other_settings(drawn)):
        if sk.empty:
            break
        if k in axes or k in series or k not in sk.columns or k not in drawn.columns:
            continue
        sk = sk[sk[k].isin(drawn[k].dropna().unique()) | (sk[k].isna() & drawn[k].isna().any())]
    if sk.empty:
        return ""
    parts = []
    for status, g in sk.groupby("status", sort=True):
        at = "; ".join(f"{SHORT.get(a, a)} = {', '.join(fmt_value(a, v) for v in sorted(g[a].dropna().unique()))}"
                       for a in axes if a in g.columns and g[a].notna().any())
        why = reason_summary(g["reason"].fillna("")) if "reason" in g.columns else ""
        parts.append(f"{len(g)} point{'s' if len(g) != 1 else ''} {status} by the runner" + (f" at {at}" if at else "")
                     + (f" ({why})" if why else ""))
    return "Not drawn: " + "; ".join(parts) + "."


def constants(df, keys, besides=""):
    """'k = 2048, precision = fp32' for the keys that are constant in df, except those `besides` (a slice note
    such as fix_others gives) already names."""
    out = []
    for k in keys:
        if f"{SHORT.get(k, k)} = " in besides:
            continue
        if k in df.columns and df[k].nunique(dropna=False) == 1:
            out.append(f"{SHORT.get(k, k)} = {fmt_value(k, df[k].iloc[0])}")
    return ", ".join(out)


def step_groups(res, keys=None):
    """{(file, index): that point's steps} (built once per results object). keys: only these points
    ((file, index) pairs) need be there: their steps are read (once) and the others are not; a point without
    steps is absent either way."""
    if not hasattr(res, "detail"):
        return {}
    cache = res._detail.get("#steps_by_point")
    if cache is None and (keys is None or schema.STEPS in res._detail or not hasattr(res, "detail_keys")):
        steps = res.detail(schema.STEPS)
        cache = {k: g for k, g in steps.groupby(["file", "index"])} if len(steps) else {}
        res._detail["#steps_by_point"] = cache
    if cache is not None:
        return cache
    part = res._detail.setdefault("#steps_by_point_part", {"read": set(), "groups": {}})
    todo = [k for k in dict.fromkeys(_point_key(f, i) for f, i in keys) if k is not None and k not in part["read"]]
    if todo:
        steps = res.detail(schema.STEPS, keys=todo)
        if len(steps):
            part["groups"].update({(f, i): g for (f, i), g in steps.groupby(["file", "index"])})
        part["read"].update(todo)
    return part["groups"]


def _point_key(file, index):
    """(file, index) as detail() keys a point: (str, int); None when index is no integer (a row without one)."""
    try:
        return str(file), int(index)
    except (TypeError, ValueError):
        return None


def point_keys(df):
    """The (file, index) pairs of df's rows (none when df lacks either column)."""
    if "file" not in df.columns or "index" not in df.columns:
        return []
    return list(zip(df["file"], df["index"]))


def summarize(res, df, by, metric):
    """Center and error bar of `metric` per group of `by` columns.

    Points of different sweeps (attr.sweep_id) are never pooled: where a group holds several sweeps, only the
    points of the sweep with the most points in df are used, and the caption says so.
    Several points per group (seeds, or other replicate axes): mean over them, bars +-1 s.d. (times: the
    median, bars the range, so that they stay positive on log axes and as rates).
    One point: its own value; for per-step metrics, bars from its decode steps (times: the table holds the
    median, bars the 25th-75th percentile; recalls and errors: the mean, bars +-1 s.d.). Otherwise no bars.
    Returns a frame: by..., center, lo, hi, n, and the set of bar kinds used (for the caption)."""
    rows, kinds = [], set()
    SW = "attr.sweep_id"
    split = SW in df.columns and SW not in by and df[SW].nunique() > 1
    rank = df[SW].value_counts() if split else None
    groups = []
    for keys, g in df.groupby(list(by), sort=True, dropna=False):
        keys = keys if isinstance(keys, tuple) else (keys,)
        if split and g[SW].nunique() > 1:  # different sweeps are not repeats of one another
            keep = max(g[SW].unique(), key=lambda sw: (rank[sw], sw))
            g = g[g[SW] == keep]
            at = ", ".join(f"{SHORT.get(k, k)} = {fmt_value(k, v)}" for k, v in zip(by, keys))
            kinds.add(f"not pooled across sweeps: at {at} several sweeps have points, drawn: sweep {str(keep)[:8]} "
                      f"(the series' main sweep)")
        vals = g[metric].astype(float).dropna()
        if not vals.empty:
            groups.append((keys, g, vals))
    one = [k for _, g, vals in groups if len(vals) == 1 for k in point_keys(g.iloc[:1])]
    # The steps of the groups of one point (their bars), read together; no other point's.
    steps = step_groups(res, one) if metric in schema.STEP_METRICS and one else {}
    for keys, g, vals in groups:
        if len(vals) >= 2:
            reps = [k for k in schema.REPLICATE_KEYS if g[k].nunique() > 1]
            what = f"{len(vals)} " + ("seeds" if reps else "repeated points")
            if metric.endswith("_ms"):  # times stay positive (log axes, rates): median and range
                c, lo, hi = vals.median(), vals.min(), vals.max()
                kinds.add(f"times: median and range over {what}")
            else:
                c, s = vals.mean(), vals.std(ddof=1)
                lo, hi = c - s, c + s
                kinds.add(f"±1 s.d. over {what}")
        elif metric in schema.STEP_METRICS:
            r = g.iloc[0]
            st = steps.get((r["file"], r["index"]))
            col = schema.STEP_COLUMN.get(metric, metric)
            if st is not None and metric in schema.AFTER_FIRST_STEP:
                st = st[st["step"] > st.groupby("request")["step"].transform("min")]
            if st is not None and metric.endswith("_ms") and bool(batched_gpu(g.iloc[:1]).iloc[0]):
                st = st[st["request"] == st["request"].min()]  # a batched step's time repeats in every request's row
            st = pd.Series(st[col] if st is not None and col in st.columns else [], dtype=float).dropna()
            if metric.endswith("_ms"):
                st = st[st > 0]
            c = float(vals.iloc[0])
            if len(st) >= 2 and metric in schema.AFTER_FIRST_STEP:  # fractions that jump: the range, in [0, 1]
                lo, hi = st.min(), st.max()
                kinds.add(f"range over {len(st)} decode steps after the first")
            elif len(st) >= 2 and metric.endswith("_ms"):
                lo, hi = st.quantile(0.25), st.quantile(0.75)
                kinds.add(f"25th–75th percentile over {len(st)} decode steps")
            elif len(st) >= 2:
                s = st.std(ddof=1)
                lo, hi = c - s, c + s
                kinds.add(f"±1 s.d. over {len(st)} decode steps")
            else:
                lo = hi = c
        else:
            c = float(vals.iloc[0])
            lo = hi = c
        rows.append(dict(zip(by, keys), center=c, lo=min(lo, c), hi=max(hi, c), n=len(vals)))
    return pd.DataFrame(rows), kinds


def logy(ax):
    ax.set_yscale("log")
    plain_log_ticks(ax)


def dodge(x, i, n, step=0.07):
    """x moved sideways (on a log2 axis) so that n series at the same x do not hide each other."""
    return np.asarray(x, dtype=float) * 2 ** ((i - (n - 1) / 2) * step)


def errorbar(ax, x, s, **kw):
    yerr = np.vstack([s["center"] - s["lo"], s["hi"] - s["center"]])
    has = np.any(yerr > 0)
    return ax.errorbar(x, s["center"], yerr=yerr if has else None, capsize=2.5, lw=1.3, ms=4.5, **kw)


def caption(fig, text, kinds=(), sources="", skipped=""):
    """A caption along the bottom edge: what the figure shows, the points the runner did not finish (skipped:
    skipped_note's text), what the error bars are, where the data came from. finish() lays the axes out above
    it."""
    import textwrap
    text = text.rstrip()
    if text and not text.endswith("."):  # captions end their sentence with constants(), which has no period
        text += "."
    parts = [text + (" " + skipped if skipped else "")]
    if kinds:
        parts.append("Error bars: " + "; ".join(sorted(kinds)) + ".")
    if sources:
        parts.append("Data: " + sources)
        fig._ip_files = getattr(sources, "files", ())
    width = int(fig.get_figwidth() * 72 / (7 * 0.52))  # characters of 7-pt text per line, a first guess
    renderer = fig.canvas.get_renderer()
    room = 0.98 * fig.get_figwidth() * fig.dpi  # pixels from the caption's left edge to the figure's right
    while True:  # narrower until the widest line fits (long words and wide letters beat the guess)
        wrapped = "\n".join(textwrap.fill(p, width) for p in parts if p)
        t = fig.text(0.01, 0.01, wrapped, ha="left", va="bottom", fontsize=7, color="#333333")
        if t.get_window_extent(renderer).width <= room or width <= 40:
            break
        t.remove()
        width = int(width * 0.95)
    fig._ip_caption = t
    return wrapped.count("\n") + 1


def plain_log_ticks(ax, axis="y"):
    """Log-scale tick labels as plain numbers (30, 300, 3k) instead of 3x10^1."""
    def f(v, _pos=None):
        if v <= 0:
            return ""
        for unit, n in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
            if v >= n:
                return f"{v / n:g}{unit}"
        return f"{v:g}"
    a = ax.yaxis if axis == "y" else ax.xaxis
    a.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    a.set_major_formatter(FuncFormatter(f))
    a.set_minor_formatter(FuncFormatter(lambda *_: ""))


def finish(fig, title, _ncaption_lines=0, legend_handles=None, legend_cols=6, legend_title=None):
    """Title on top, caption at the bottom, the shared legend (if any) just above the caption, and the axes
    in the space left; sizes measured, not guessed."""
    fig.suptitle(title, fontsize=11)
    H = fig.get_figheight()
    renderer = fig.canvas.get_renderer()
    cap = getattr(fig, "_ip_caption", None)
    bottom_in = 0.1 + (cap.get_window_extent(renderer).height / fig.dpi if cap is not None else 0)
    if legend_handles and legend_handles[1]:
        handles, labels = legend_handles
        ncol = min(legend_cols, len(labels))
        leg = fig.legend(handles, labels, loc="lower center", ncol=ncol, bbox_to_anchor=(0.5, bottom_in / H),
                         frameon=False, title=legend_title)
        bottom_in += leg.get_window_extent(renderer).height / fig.dpi
    fig.tight_layout(rect=(0, min(0.6, (bottom_in + 0.05) / H), 1, 1 - 0.4 / H))
    thin_tick_labels(fig)
    return fig


class Sources(str):
    """The caption's "Data:" text; .files: per file (path, git revision, tool version, config with --set
    overrides, sweep id), which save() writes into the PNG and PDF metadata."""
    files = ()


def _attr(r, key):
    v = r.get(key, "") if hasattr(r, "get") else ""
    return "" if v is None or (isinstance(v, float) and np.isnan(v)) else str(v)


def sources(df):
    """'q.h5 (config configs/quickstart.ini, sweep fabe401a); cpu on CPU ...': the files, the configs they ran
    (with --set overrides) and sweep ids, and the backends and devices of df's rows."""
    from .load import config_text
    files, names = [], []
    for path, g in sorted(df.groupby("file"), key=lambda x: os.path.basename(x[0])):
        r = g.iloc[0]
        cfg = config_text(_attr(r, "attr.config_path"), _attr(r, "attr.argv"))
        sweep = _attr(r, "attr.sweep_id")
        names.append(f"{os.path.basename(path)} (config {cfg}" + (f", sweep {sweep[:8]}" if sweep else "") + ")")
        files.append(dict(path=str(path), git_revision=_attr(r, "attr.git_revision") or "?",
                          tool_version=_attr(r, "attr.tool_version") or "?", config=cfg, sweep_id=sweep or "?"))
    devs = sorted({f"{b} on {d}" if d else b for b, d in zip(df[RUN], df[schema.RUN_DEVICE])})
    out = Sources(f"{', '.join(names)}; " + "; ".join(devs))
    out.files = tuple(files)
    return out


def metadata(fig, name):
    """(PNG, PDF) metadata of a figure: its name, and the source files with their git revision, tool version,
    config and sweep id (from the caption's sources)."""
    files = getattr(fig, "_ip_files", ())
    if not files:
        return {}, {}
    src = "; ".join(f"{f['path']} (git revision {f['git_revision']}, {f['tool_version']}, config {f['config']}, "
                    f"sweep {f['sweep_id']})" for f in files)
    revs = ", ".join(sorted({f["git_revision"] for f in files}))
    title = f"IndexPool figure {name}"
    return ({"Title": title, "Source": src, "Comment": f"git revision {revs}"},
            {"Title": title, "Subject": f"Data: {src}", "Keywords": f"git revision {revs}"})


class OutputError(AnalysisError):
    """A file could not be written: "cannot write 'PATH': REASON" (the command line prints it as one line)."""

    def __init__(self, path, err, about=None):
        super().__init__(f"cannot write '{path}': {err.strerror or err}" + (f": '{about}'" if about else ""))
        self.path, self.oserror = path, err


def _oserror_in(e):
    """e if it is an OSError, else the first OSError it was raised from or while handling (matplotlib's PDF
    backend, its disk full, raises an AttributeError while closing the half-written stream); None if none."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, OSError):
            return e
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return None


def write_output(path, write, binary=False):
    """Writes path with write(f), f a file open for writing (text, UTF-8; bytes if binary), through a temporary
    file in path's folder that is renamed over path only once complete and flushed to disk: a failed write
    leaves no partial or empty file, an existing file unchanged and no temporary. Any OSError while writing
    (a full disk: also one matplotlib raises another error while handling) is raised as OutputError naming
    path and the OS reason. Returns path."""
    target = os.path.realpath(path)  # a symlink is written through, not replaced
    folder = os.path.dirname(target)
    tmp = name = None
    try:
        os.makedirs(folder, exist_ok=True)
        name = os.path.join(folder, f".{os.path.basename(target)}.{os.getpid()}.{secrets.token_hex(6)}.tmp")
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # 0666 less the umask, as open() gives
        tmp = name
        with (os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8")) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        if os.path.exists(target):
            os.chmod(tmp, os.stat(target).st_mode & 0o7777)
        os.replace(tmp, target)
        tmp = None
    except Exception as e:
        err = _oserror_in(e)
        if err is None:
            raise
        about = getattr(err, "filename", None)  # named when it is another file than the one written (a folder)
        raise OutputError(path, err, about if about not in (None, path, target, tmp, name) else None) from e
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return path


def save(fig, out_dir, name):
    """Writes NAME.png and NAME.pdf under out_dir (each through write_output), with the source files and their
    git revision in the metadata; returns their paths. The figure is closed, written or not."""
    paths = []
    png_meta, pdf_meta = metadata(fig, name)
    try:
        for ext, meta in (("png", png_meta), ("pdf", pdf_meta)):
            p = os.path.join(out_dir, f"{name}.{ext}")
            write_output(p, lambda f, ext=ext, meta=meta: fig.savefig(f, format=ext, metadata=meta or None),
                         binary=True)
            paths.append(p)
    finally:
        plt.close(fig)
    return paths
