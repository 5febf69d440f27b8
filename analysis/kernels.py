"""Figures and a table from kernel_bench runs (`kernel_bench --json FILE`, e.g. bench/device-runs/*.json).

    python -m analysis kernels RUN.json [RUN.json ...] --out DIR

Runs are given oldest first; the last is "the newest run". Writes into DIR:
  kernels_targets.png/.pdf   every judged case (issue 5's targets) of every run: achieved / required
                             (1 = the target exactly; right of 1: met), one marker per run
  kernels_copy.png/.pdf      the newest run: each case's GB/s as % of the run's copy bandwidth, its target
                             where it has one in % of copy, and the copy kernel timed at the case's size
                             where the run has those rows (what a plain streaming kernel of that size reaches)
  kernels_variants.png/.pdf  the newest run: each A/B variant ("(one launch)", "(pipelined)", ...) against its
                             base case, base median / variant median (right of 1: the variant is faster)
  kernels.md                 the runs (file, commit, device, timing, copy bandwidth, targets met), every
                             judged case's median and verdict per run, the newest run's variants

The file reading, the variant pairing and the copy at a case's size are scripts/kernel_bench_compare.py's,
so the figures and gpu-check.sh's text comparisons agree.
"""
import importlib.util
import math
import os
import re

from .load import AnalysisError, NoData

_SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts",
                       "kernel_bench_compare.py")


def _kbc():
    spec = importlib.util.spec_from_file_location("kernel_bench_compare", _SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


kbc = _kbc()

_NAME = re.compile(r"^(\d{4}-\d{2}-\d{2})-([A-Za-z0-9_]+)-([0-9a-f]{7,40})-kernel_bench\.json$")


class Run:
    """One kernel_bench JSON file: its cases and what it says of how it was made."""

    def __init__(self, path):
        try:
            self.data = kbc.load(path)
        except SystemExit as e:  # the script's loader reports bad files by SystemExit(message)
            raise AnalysisError(str(e).replace("kernel_bench_compare: ", "")) from None
        self.path = path
        self.file = os.path.basename(path)
        d = self.data
        if d.get("smoke"):
            raise AnalysisError(f"'{path}' is a --smoke run (sizes divided by 256, 2 timed runs): its times say "
                                "nothing of the kernels; use a full or --quick run")
        if isinstance(d.get("shrink"), (int, float)) and d["shrink"] > 1:
            raise AnalysisError(f"'{path}' is a --shrink {d['shrink']} run (sizes divided by {d['shrink']}): its "
                                "cases are not the benchmark's sizes; use a full or --quick run")
        if not isinstance(d.get("cases"), list) or not all(isinstance(c, dict) for c in d["cases"]):
            raise AnalysisError(f"'{path}': 'cases' is not a list of cases")
        for i, c in enumerate(d["cases"]):
            missing = [k for k in ("group", "name", "params", "median_ms") if k not in c]
            if missing:
                raise AnalysisError(f"'{path}': case {i} has no {', '.join(missing)}")
        self.cases = [c for c in d["cases"] if c.get("runs", 0) > 0]  # timed ones (not e.g. decode | setup)
        self.untimed = len(d["cases"]) - len(self.cases)
        self.by_key = {kbc.key(c): c for c in self.cases}
        self.device = d.get("device", "?")
        self.device_short = self.device.split(",")[0]
        self.git = d.get("git_revision", "?")
        m = _NAME.match(self.file)
        self.label = (f"{m.group(1)} {m.group(2)} {m.group(3)[:7]}" if m
                      else f"{self.git[:7]} {self.device_short}")
        self.timing = kbc.timing(d)
        self.copy_gbs = float(d.get("copy_gbs") or 0)
        s = d.get("summary", {})
        self.targets, self.met = s.get("targets"), s.get("targets_met")

    def describe(self):
        mode = "quick" if self.data.get("quick") else "full"
        stopped = f"; STOPPED EARLY: {self.data['stopped']}" if self.data.get("stopped") else ""
        made = f", started {self.data['started']}" if self.data.get("started") else ""
        return (f"{self.file}: git {self.git}, {self.device}, {mode} mode, timing {self.timing}, "
                f"copy {self.copy_gbs:.0f} GB/s{made}{stopped}")


def _readme_rows(folder):
    """{file name: row} of the table in FOLDER/README.md (bench/device-runs/: its runs, newest last)."""
    try:
        with open(os.path.join(folder, "README.md")) as f:
            names = re.findall(r"^\|\s*`([^`]+\.json)`", f.read(), flags=re.M)
    except OSError:
        return {}
    return {n: i for i, n in enumerate(names)}


def load_runs(paths):
    """The runs, oldest first: by their start time ("started") when every file has one, else by the row of
    each in its folder's README.md table (bench/device-runs/) when every file has one, else in the order
    given (a shell glob sorts by name, not by time: a note on stderr says which order was taken)."""
    import sys
    if not paths:
        raise AnalysisError("no kernel_bench JSON files given")
    runs = [Run(p) for p in paths]
    started = [r.data.get("started") for r in runs]
    rows = [_readme_rows(os.path.dirname(os.path.abspath(r.path))).get(r.file) for r in runs]
    if all(started):
        ordered, how = sorted(runs, key=lambda r: r.data["started"]), "their start times"
    elif all(x is not None for x in rows):
        ordered, how = [r for _, r in sorted(zip(rows, runs), key=lambda t: t[0])], "the table of their README.md"
    else:
        ordered, how = runs, None
    if how is None and len(runs) > 1:
        print("analysis kernels: note: the runs are taken oldest first in the order given (not every file has a "
              "start time or a row in its folder's README.md)", file=sys.stderr)
    elif ordered != runs:
        print(f"analysis kernels: note: runs ordered oldest first by {how}, not as given: "
              + ", ".join(r.file for r in ordered), file=sys.stderr)
    return ordered


# ---- targets ------------------------------------------------------------------------------------------

_TERMS = [
    # (pattern of one comma-separated term, achieved / required from the case and the number in the term)
    (re.compile(r"^>=\s*([0-9.]+)\s*% copy$"), lambda c, x: (c.get("frac_of_copy") or 0) * 100 / x),
    (re.compile(r"^>=\s*([0-9.]+)\s*Mtok/s$"), lambda c, x: (c.get("tokens_per_s") or 0) / 1e6 / x),
    (re.compile(r"^<=\s*([0-9.]+)\s*us$"), lambda c, x: x / (c["median_ms"] * 1e3) if c["median_ms"] > 0 else 0),
    (re.compile(r"^>=\s*([0-9.]+)\s*x exact$"), lambda c, x: (c.get("speedup_vs_exact") or 0) / x),
]


def judged(case):
    return case.get("verdict") in ("met", "not met")


def target_ratio(case):
    """Achieved / required for a judged case's target, the smallest over its terms (the one that binds);
    None when the target is not a number kernel_bench states ("B=1024 x 32Ki, one step": ran or not)."""
    ratios = []
    for term in (t.strip() for t in (case.get("target") or "").split(",")):
        for pat, f in _TERMS:
            m = pat.match(term)
            if m:
                ratios.append(f(case, float(m.group(1))))
                break
        else:
            return None
    return min(ratios) if ratios else None


def case_label(c, width=70):
    s = f"{c['group']}: {c['name']} | {c['params']}"
    return s if len(s) <= width else s[: width - 1] + "…"


def _judged_keys(runs):
    """Judged cases over all runs, in the order they first appear (kernel_bench's group order)."""
    keys, seen = [], set()
    for r in runs:
        for c in r.cases:
            k = kbc.key(c)
            if judged(c) and k not in seen:
                seen.add(k)
                keys.append(k)
    return keys


def _runs_per_case(runs):
    n = sorted({c.get("runs") for r in runs for c in r.cases if judged(c) and c.get("runs")})
    return f"{n[0]} timed runs" if len(n) == 1 else f"{', '.join(map(str, n))} timed runs (by run and case)"


# ---- figures ------------------------------------------------------------------------------------------

def _plt():
    from . import common  # matplotlib (Agg) and the house style
    return common


def fig_targets(runs):
    common = _plt()
    plt = common.plt
    keys = [k for k in _judged_keys(runs)]
    rows = []
    for k in keys:
        vals = []
        for r in runs:
            c = r.by_key.get(k)
            vals.append(target_ratio(c) if c is not None and judged(c) else None)
        if any(v is not None for v in vals):
            rows.append((k, vals))
    if not rows:
        raise NoData("no run holds a judged case with a numeric target")
    n = len(rows)
    fig, ax = plt.subplots(figsize=(9, 1.6 + 0.2 * n))
    y = list(range(n))[::-1]
    for i, r in enumerate(runs):
        xs = [(vals[i], yy) for (_, vals), yy in zip(rows, y) if vals[i] is not None]
        if xs:
            ax.scatter([max(x, 1e-3) for x, _ in xs], [yy for _, yy in xs], s=22, marker=common.MARKERS[i % 8],
                       color=common.OKABE_ITO[i % 8], label=r.label, zorder=3, alpha=0.9)
    ax.axvline(1.0, color="#000000", lw=1)
    ax.axvspan(1.0, 100, color="#009E73", alpha=0.08, lw=0)
    ax.set_xscale("log")
    common.plain_log_ticks(ax, "x")
    lo = min(v for _, vals in rows for v in vals if v is not None and v > 0)
    hi = max(v for _, vals in rows for v in vals if v is not None)
    ax.set_xlim(max(1e-3, lo / 1.3), max(2.0, hi * 1.3))
    ax.set_yticks(y)
    ax.set_yticklabels([case_label(dict(zip(("group", "name", "params"), k))) for k, _ in rows], fontsize=7)
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_xlabel("achieved / required (1 = the target; right of the line: met)")
    ax.grid(axis="y", alpha=0.15)
    met = "; ".join(f"{r.label}: {r.met} of {r.targets} met" for r in runs if r.targets is not None)
    n_bin = sum(1 for k in keys if all(target_ratio(r.by_key[k]) is None for r in runs
                                       if k in r.by_key and judged(r.by_key[k])))
    common.caption(fig, "Each judged kernel_bench case against its target (issue 5): % of the run's copy bandwidth "
                        "over the required %, Mtok/s over 100, the required us over the median, or the compressed "
                        "indexer's speed-up over the exact one over 3.6; pooling cases with two terms show the "
                        "smaller. Medians of " + _runs_per_case(runs) + " (CUDA events). "
                   + (f"{n_bin} judged case(s) without a numeric target (the decode step: ran or not) are "
                      "in kernels.md only. " if n_bin else "") + f"Targets met per run: {met}.",
                   sources="; ".join(r.describe() for r in runs))
    h, lab = ax.get_legend_handles_labels()
    return common.finish(fig, "Kernels against their targets", legend_handles=(h, lab), legend_cols=3)


def fig_copy(run):
    common = _plt()
    plt = common.plt
    cases = [c for c in run.cases if c["group"] != "copy" and c.get("frac_of_copy") is not None
             and (c.get("bytes") or 0) > 0]
    if not cases or run.copy_gbs <= 0:
        raise NoData(f"{run.file}: no case with a fraction of copy bandwidth")
    import io
    at = {(g, nm, p): a for g, nm, p, _, _, a, _ in kbc.size_copy(run.data, out=io.StringIO())}
    n = len(cases)
    fig, ax = plt.subplots(figsize=(9, 1.8 + 0.16 * n))
    y = list(range(n))[::-1]
    colors = {"met": "#009E73", "not met": "#D55E00"}
    for c, yy in zip(cases, y):
        # Coloured by its verdict only where the target is a % of copy (the indexer's is a speed-up).
        m = re.search(r">=\s*([0-9.]+)\s*% copy", c.get("target") or "")
        ax.barh(yy, 100 * c["frac_of_copy"], height=0.7,
                color=colors.get(c.get("verdict"), "#999999") if m else "#999999")
        if m:
            ax.plot([float(m.group(1))] * 2, [yy - 0.42, yy + 0.42], color="#000000", lw=1.4)
        a = at.get(kbc.key(c))
        if a:
            ax.plot(100 * a / run.copy_gbs, yy, marker="|", ms=7, mew=1.6, color="#0072B2", ls="none")
    ax.set_yticks(y)
    ax.set_yticklabels([case_label(c, 64) for c in cases], fontsize=6)
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_xlabel(f"GB/s declared (reads + writes) as % of the run's copy bandwidth ({run.copy_gbs:.0f} GB/s = 100%)")
    ax.grid(axis="y", alpha=0.15)
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    handles = [Patch(color="#009E73", label="target met"), Patch(color="#D55E00", label="target not met"),
               Patch(color="#999999", label="no target in % of copy"),
               Line2D([], [], color="#000000", lw=1.4, label="target (% of copy)")]
    if at:
        handles.append(Line2D([], [], color="#0072B2", marker="|", ms=7, mew=1.6, ls="none",
                              label="copy kernel at the case's bytes"))
    common.caption(fig, "Each case's bandwidth (bytes kernel_bench declares it moves, over its median time) as a "
                        "fraction of the copy bandwidth measured in the same run (the faster of cudaMemcpyAsync "
                        "and a float4 copy kernel, 2 GiB each way). Latency-bound kernels (top-k, small "
                        "requests) sit far left by nature; the blue tick, where the run timed it, is what a plain "
                        "copy of the same bytes reaches." + ("" if at else " This run has no case-sized copy rows "
                                                               "(kernel_bench before 2026-12-05)."),
                   sources=run.describe())
    return common.finish(fig, f"Kernels as a fraction of copy bandwidth — {run.label}",
                         legend_handles=(handles, [h.get_label() for h in handles]), legend_cols=5)


def variant_rows(run):
    import io
    return kbc.variants(run.data, out=io.StringIO())


def fig_variants(run):
    common = _plt()
    plt = common.plt
    rows = variant_rows(run)
    if not rows:
        raise NoData(f"{run.file}: no variant case with its base case in the same run")
    n = len(rows)
    fig, ax = plt.subplots(figsize=(9, 1.8 + 0.2 * n))
    y = list(range(n))[::-1]
    for (g, name, base, params, tb, tv, s), yy in zip(rows, y):
        ax.barh(yy, math.log2(s), left=0, height=0.7, color="#009E73" if s >= 1 else "#D55E00")
        ax.text(math.log2(s) + (0.03 if s >= 1 else -0.03), yy, f"{s:.2f}x", va="center",
                ha="left" if s >= 1 else "right", fontsize=6)
    ax.axvline(0, color="#000000", lw=1)
    lim = max(1.0, max(abs(math.log2(r[6])) for r in rows) * 1.25)
    ax.set_xlim(-lim, lim)
    ticks = [t for t in range(-8, 9) if abs(t) <= lim]
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{2.0 ** t:g}x" for t in ticks])
    ax.set_yticks(y)
    ax.set_yticklabels([case_label({"group": g, "name": nm, "params": p}, 70) for g, nm, _, p, *_ in rows],
                       fontsize=6.5)
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_xlabel("speed-up of the variant: base median / variant median (log scale; right: the variant is faster)")
    ax.grid(axis="y", alpha=0.15)
    queued = run.timing == "queued"
    common.caption(fig, "Each A/B case of one run (its name ends in a parenthesised variant) against the case of "
                        "the same group and parameters without that suffix, both timed in the same run on the "
                        "same device. " + ("Queued medians (the GPU's time). " if queued else
                                           "Medians of runs from an idle GPU (this file predates queued timing). ")
                   + "Pairing as scripts/kernel_bench_compare.py --variants.", sources=run.describe())
    return common.finish(fig, f"Kernel variants against their base cases — {run.label}")


# ---- the table ----------------------------------------------------------------------------------------

def _fmt_ms(ms):
    return kbc.fmt_time(ms)


def write_table(runs, path):
    keys = _judged_keys(runs)
    lines = ["# kernel_bench runs", "",
             "Made by `python -m analysis kernels` from the files below (oldest first). Times are medians "
             "(CUDA events); `queued` runs time the GPU's work with the launches queued behind a blocking "
             "kernel, `unqueued` ones each run from an idle GPU.", "",
             "| run | file | git | device | command (started, UTC) | timing | copy (GB/s) | cases timed | targets met |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        stopped = " (stopped early)" if r.data.get("stopped") else ""
        met = f"{r.met} of {r.targets}" if r.targets is not None else "?"
        cmd = str(r.data.get("command", "")).replace("|", "\\|")  # a table cell
        how = (f"`{cmd}` ({r.data.get('started', '?')})" if cmd
               else "not recorded (kernel_bench before 2026-12-05)")
        lines.append(f"| {r.label} | `{r.file}` | {r.git} | {r.device} | {how} | {r.timing} | {r.copy_gbs:.0f} | "
                     f"{len(r.cases)}{f' (+{r.untimed} untimed)' if r.untimed else ''}{stopped} | {met} |")
    lines += ["", "## Judged cases (issue 5's targets)", "",
              "Per run: the median, its verdict, and achieved / required where the target is a number "
              "(1 = the target).", "",
              "| case | params | target | " + " | ".join(r.label for r in runs) + " |",
              "|---|---|---|" + "---|" * len(runs)]
    for k in keys:
        target = ""
        cells = []
        for r in runs:
            c = r.by_key.get(k)
            if c is None:
                cells.append("—")
                continue
            target = c.get("target") or target
            ratio = target_ratio(c) if judged(c) else None
            cells.append(f"{_fmt_ms(c['median_ms'])}, {c.get('verdict', '?')}"
                         + (f" ({ratio:.3g})" if ratio is not None else ""))
        lines.append(f"| {k[0]}: {k[1]} | {k[2]} | {target} | " + " | ".join(cells) + " |")
    newest = runs[-1]
    rows = variant_rows(newest)
    lines += ["", f"## Variants of the newest run ({newest.label})", ""]
    if rows:
        lines += ["Speed-up = base median / variant median (above 1: the variant is faster).", "",
                  "| group | variant | params | base | variant | speed-up |", "|---|---|---|---|---|---|"]
        for g, name, base, params, tb, tv, s in rows:
            lines.append(f"| {g} | {name} | {params} | {_fmt_ms(tb)} | {_fmt_ms(tv)} | {s:.2f}x |")
    else:
        lines.append("No variant case with its base case in this run.")
    text = "\n".join(lines) + "\n"
    return _plt().write_output(path, lambda f: f.write(text))  # through a temporary file, renamed when complete


FIGURES = {
    "kernels_targets": (fig_targets, "all runs"),
    "kernels_copy": (lambda runs: fig_copy(runs[-1]), "the newest run"),
    "kernels_variants": (lambda runs: fig_variants(runs[-1]), "the newest run"),
}
