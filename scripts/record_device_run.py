#!/usr/bin/env python3
"""Turns what a device call brought back into a draft kernels/DEVICE_RUNS.md entry, and files its
kernel_bench JSON in bench/device-runs/.

usage: record_device_run.py GC [--tag TAG] [--write] [--root DIR]

GC is scripts/gpu-check.sh's output folder, or the archive of it the device call brought back
(gc.tar.gz). Prints a draft entry in the shape of DEVICE_RUNS.md's template, every field taken from the
run's files (summary.txt, kernel_bench.json, nvidia-smi.txt, forms_*.points.tsv): the
device, the commit and bundle, the check's settings, each step's status, the copy bandwidth, the template's
figures, the targets met and not met, the forms through the runner, and the A/B variants. What changed since the last run and what the
figures mean are left for the author (marked TO FILL). A run without benchmark figures (a call with
GPU_CHECK_BENCH=0, such as the second of a split check; a benchmark that skipped or did not start) gets
the same draft without them, saying why. With --write, also copies kernel_bench.json to
bench/device-runs/DATE-TAG-COMMIT-kernel_bench.json (DATE from the run's start, TAG from the device
name, e.g. h100; never over an existing file) and adds its row to bench/device-runs/README.md's table, so
that `make kernel-figures` and the next gpu-check compare with it. --root is the repository (default: this
script's). Standard library only. Exit status 2 when GC holds neither summary.txt nor kernel_bench.json,
when a file is bad, or with --write when the run has no benchmark figures to file.
"""
import argparse
import datetime
import io
import json
import os
import re
import shutil
import sys
import tarfile
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernel_bench_compare as kbc  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Bad(Exception):
    pass


def open_gc(path, tmp):
    """The folder holding the run's files: GC itself, or where its archive was unpacked."""
    if os.path.isdir(path):
        d = path
    elif os.path.isfile(path) and tarfile.is_tarfile(path):
        with tarfile.open(path) as t:
            for m in t.getmembers():
                if m.name.startswith("/") or ".." in m.name.split("/") or not (m.isfile() or m.isdir()):
                    raise Bad(f"'{path}': refusing the archive member '{m.name}'")
            try:
                t.extractall(tmp, filter="data")  # Python 3.12+ asks for a filter; 3.11.4+ has it
            except TypeError:
                t.extractall(tmp)
        d = tmp
    else:
        raise Bad(f"'{path}' is neither a folder nor a tar archive")
    for dirpath, _, files in sorted(os.walk(d)):  # the archive holds gc/...; a folder may be given one level up
        if "kernel_bench.json" in files or "summary.txt" in files:
            return dirpath
    raise Bad(f"neither summary.txt nor kernel_bench.json under '{path}' (is it scripts/gpu-check.sh's output?)")


def load_bench(d):
    """kernel_bench's JSON ({} when there is none) and why it has no figures ('' when it has)."""
    p = os.path.join(d, "kernel_bench.json")
    if not os.path.isfile(p):
        return {}, ("no kernel_bench.json: the benchmark step did not run (GPU_CHECK_BENCH=0, or the check "
                    "stopped before it)")
    try:
        return kbc.load(p), ""
    except SystemExit as e:
        try:
            with open(p) as f:
                raw = json.load(f)
        except (OSError, ValueError):
            raw = {}
        if isinstance(raw, dict) and raw.get("tool") == "kernel_bench" and raw.get("skipped"):
            return raw, f"kernel_bench skipped the run ({raw['skipped']})"
        raise Bad(str(e)) from None


def read(d, name):
    p = os.path.join(d, name)
    return open(p, errors="replace").read() if os.path.isfile(p) else ""


def find(cases, group, name, params_start):
    for c in cases:
        if c["group"] == group and c["name"] == name and c["params"].startswith(params_start):
            return c
    return None


def us(c):
    return kbc.fmt_time(c["median_ms"]) if c else "(not in this run)"


def pct(c):
    f = c.get("frac_of_copy") if c else None
    return f"{100 * f:.1f}% of copy" if f is not None else "-"


def device_tag(device):
    m = re.search(r"\b([A-Z]\d{2,4}[A-Z]?)\b", device)
    return m.group(1).lower() if m else "gpu"


def run_date(data, summary):
    for text in (data.get("started", ""), summary):
        m = re.search(r"(\d{4}-\d{2}-\d{2})T\d\d:\d\d", text)
        if m:
            return m.group(1)
    return datetime.date.today().isoformat()


def summary_device(steps):
    """The GPU's name from the preflight step's figures (gpu-check.sh puts nvidia-smi's name last), or ''."""
    pre = next((line for line in steps if line.startswith("preflight")), "")
    last = pre.split(";")[-1].strip() if ";" in pre else ""
    return last if re.match(r"(NVIDIA|Tesla|Quadro)\b", last) else ""


def draft(d, data, tag, no_figures=""):
    summary = read(d, "summary.txt")
    cases = [c for c in data.get("cases", []) if c.get("runs", 0) > 0]
    steps = [line for line in summary.splitlines()
             if re.match(r"^.{22} (ok|FAIL|skip|partial|not run|stopped) ", line)]
    settings = next((line[len("settings: "):] for line in summary.splitlines() if line.startswith("settings: ")),
                    "not recorded (gpu-check.sh before 2026-12-05)")
    total = next((line for line in summary.splitlines() if line.startswith("total ")), "total: not recorded")
    verdict = next((line for line in summary.splitlines() if line.startswith("gpu-check: ")), "")
    smi = " ".join(read(d, "nvidia-smi.txt").split())
    bundle = next((re.sub(r"\s+", " ", line) for line in steps if line.startswith("bundle")), "")
    m = re.search(r"commit ([0-9a-f]{7,40})", bundle)
    git = data.get("git_revision") or (m.group(1) if m else "?")
    # (a skipped benchmark's "device" is why it found none)
    device = (summary_device(steps) or data.get("device") if no_figures else data.get("device")) or "?"
    date = run_date(data, summary)
    out = io.StringIO()
    w = lambda s="": print(s, file=out)  # noqa: E731
    w(f"### {date} — {device.split(',')[0]} (TO FILL: why this run)")
    w(f"- device: {device}" + (f"; nvidia-smi: {smi}" if smi else ""))
    w(f"- commit: {git}; {bundle or 'bundle: not in summary.txt'}")
    bench = (f"`{data.get('command', 'not recorded')}` ({data.get('timing', 'unqueued')} timing, "
             f"{data.get('runs', '?')} runs)") if not no_figures else f"no figures: {no_figures}"
    w(f"- command: gpu-check.sh with {settings}; {total}; {verdict or 'no verdict line'}; kernel_bench: {bench}")
    w("- steps:" if steps else "- steps: none found (no summary.txt, or none of its lines is a step)")
    for line in steps:
        w(f"  - {re.sub(r'  +', ' ', line.strip())}")
    w("- files of the run: " + ", ".join(sorted(f for f in os.listdir(d) if os.path.isfile(os.path.join(d, f)))))
    if not no_figures:
        copies = [c for c in cases if c["group"] == "copy" and "case-sized" not in c["name"]]
        w(f"- copy bandwidth: {data.get('copy_gbs', 0):.0f} GB/s (" +
          ", ".join(f"{c['name']} {c.get('gbs', 0):.0f} GB/s" for c in copies) + ")")
        w("- figures (median; target):")
        p = find(cases, "pool", "uniform bf16 keys", "T=1Mi")
        mtok = f", {p['tokens_per_s'] / 1e6:.0f} Mtok/s" if p and p.get("tokens_per_s") else ""
        w(f"  - pooling T=1Mi D=128 G=4 bf16 uniform: {us(p)}, {pct(p)} (>= 85%){mtok} (>= 100)")
        s = find(cases, "score", "compressed (G=4)", "T=1Mi D=128 H=64 fp8")
        w(f"  - compressed scoring T=1Mi H=64 fp8: {us(s)}, {pct(s)} (>= 75%)")
        ic = find(cases, "indexer", "compressed score+top-k", "T=1Mi D=128 H=64 fp8")
        ie = find(cases, "indexer", "exact score+top-k", "T=1Mi D=128 H=64 fp8")
        ratio = f" = {ic['speedup_vs_exact']:.2f}x" if ic and ic.get("speedup_vs_exact") else ""
        w(f"  - indexer T=1Mi H=64 fp8: compressed {us(ic)} vs exact {us(ie)}{ratio} (>= 3.6x)")
        t1, t64 = find(cases, "topk", "top-2048", "1 row of 1Mi"), find(cases, "topk", "top-2048", "64 rows of 1Mi")
        w(f"  - top-2048: 1 x 1Mi {us(t1)} (<= 60 us); 64 x 1Mi {us(t64)} (<= 150 us)")
        parts = {n: find(cases, "decode", n, "B=1024") for n in ("whole step", "score (all requests)",
                                                                 "top-k (per request)", "block-sparse attention")}
        w(f"  - decode step B=1024 x 32Ki: {us(parts['whole step'])} (score {us(parts['score (all requests)'])}, top-k "
          f"{us(parts['top-k (per request)'])}, attention {us(parts['block-sparse attention'])})")
        ad, ab = find(cases, "attention", "dense", "T=1024Ki"), find(cases, "attention", "block-sparse", "T=1024Ki")
        w(f"  - attention T=1Mi: dense {us(ad)}, block-sparse {us(ab)}")
        w("  - runner, configs/batched.ini: TO FILL from runner_batched.txt (layer ms column, B = 1 and 64)")
        judged = [c for c in cases if c.get("verdict") in ("met", "not met")]
        met = [c for c in judged if c["verdict"] == "met"]
        not_met = [c for c in judged if c["verdict"] == "not met"]
        groups = []
        for c in judged:
            if c["group"] not in groups:
                groups.append(c["group"])
        by = [(g, sum(c["group"] == g for c in not_met), sum(c["group"] == g for c in judged)) for g in groups]
        w(f"- targets met: {len(met)} of {len(judged)}; not met by group: " +
          (", ".join(f"{g} {n} of {m}" for g, n, m in by if n) or "none") +
          " (each case: `make kernel-figures BENCH_JSON=...`, kernels.md)")
        if data.get("stopped"):
            w(f"- STOPPED EARLY: {data['stopped']} (the cases after it did not run)")
    w("- what changed since the last run: TO FILL")
    w("- problems seen: TO FILL (sanitizer reports, failed or skipped tests: ctest-gpu.log, sanitizer-*.log)")
    forms = forms_lines(d)
    if forms:
        w()
        w("The forms through the runner (GPU_CHECK_FORMS=1; medians per step, ms):")
        w()
        for line in forms:
            w(f"  {line}")
    if no_figures:
        return out.getvalue(), None, date
    rows = kbc.variants(data, out=io.StringIO())
    if rows:
        w()
        w("A/B variants of this run (base median / variant median; above 1: the variant is faster):")
        w()
        for g, name, base, params, tb, tv, sp in rows:
            w(f"  {g} {name} | {params}: {kbc.fmt_time(tb)} -> {kbc.fmt_time(tv)}, {sp:.2f}x")
    name = f"{date}-{tag}-{git.split('-')[0][:7]}-kernel_bench.json"
    return out.getvalue(), name, date


def read_tsv(path):
    """Rows of an `indexpool inspect --table points` TSV as dicts (header: the first line)."""
    lines = [line.rstrip("\n") for line in open(path, errors="replace") if line.strip()]
    if not lines:
        return []
    head = lines[0].split("\t")
    return [dict(zip(head, line.split("\t"))) for line in lines[1:]]


def ms(row, col):
    """A point's milliseconds; nan when the point is missing (skipped) or the column empty."""
    try:
        return float(row.get(col, "nan")) if row else float("nan")
    except ValueError:
        return float("nan")


def forms_lines(d):
    """What DEVICE_RUNS item 27 asks of the forms step: per top-k and scoring form, exact and uniform
    score + top-k and their ratio (kernel_forms.ini); each batched point's stage times (batched.ini)."""
    out = []
    p = os.path.join(d, "forms_kernel_forms.points.tsv")
    if os.path.isfile(p):
        rows = [r for r in read_tsv(p) if r.get("status") == "ok"]
        combos = []
        for r in rows:
            c = (r.get("kernels.topk", "?"), r.get("kernels.score_math", "?"))
            if c not in combos:
                combos.append(c)
        out.append(f"kernel_forms.ini ({len(rows)} points ok): score + top-k, exact vs uniform (G = 4)")
        for topk, math in combos:
            by = {r.get("pool.weighting"): r for r in rows
                  if (r.get("kernels.topk", "?"), r.get("kernels.score_math", "?")) == (topk, math)}
            e, u = by.get("exact"), by.get("uniform")
            te = ms(e, "score_ms") + ms(e, "topk_ms")
            tu = ms(u, "score_ms") + ms(u, "topk_ms")
            ratio = f"{te / tu:.2f}x" if tu == tu and te == te and tu > 0 else "-"
            out.append(f"  topk={topk} score_math={math}: exact {te:.3f} ms (top-k {ms(e, 'topk_ms'):.3f}), "
                       f"uniform {tu:.3f} ms (top-k {ms(u, 'topk_ms'):.3f}): {ratio} (>= 3.6x)")
    p = os.path.join(d, "forms_batched.points.tsv")
    if os.path.isfile(p):
        rows = [r for r in read_tsv(p) if r.get("status") == "ok"]
        out.append(f"batched.ini ({len(rows)} points ok): the batch step's stages")
        for r in rows:
            out.append(f"  {r.get('key', '?')}: score {ms(r, 'score_ms'):.3f}, top-k {ms(r, 'topk_ms'):.3f}, "
                       f"attention {ms(r, 'attention_ms'):.3f}, layer {ms(r, 'layer_ms'):.3f}")
    return out


def write(d, data, name, date, root):
    runs = os.path.join(root, "bench", "device-runs")
    dest = os.path.join(runs, name)
    if os.path.exists(dest):
        raise Bad(f"'{dest}' exists already: not overwritten (another run of the same commit on the same day? "
                  "rename it by hand)")
    readme = os.path.join(runs, "README.md")
    text = open(readme).read()
    lines = text.rstrip("\n").split("\n")
    last = max((i for i, line in enumerate(lines) if line.startswith("| `")), default=None)
    if last is None:
        raise Bad(f"'{readme}' has no table of files to add a row to")
    started = data.get("started", "")
    when = f"{started[:10]}, {started[11:16]}" if started else date
    lines.insert(last + 1, f"| `{name}` | `scripts/gpu-check.sh` step 7, bundle of {data.get('git_revision', '?')}, "
                           f"{data.get('device', '?').split(',')[0]} ({data.get('timing', 'unqueued')} timing) | {when} |")
    shutil.copyfile(os.path.join(d, "kernel_bench.json"), dest)
    with open(readme, "w") as f:
        f.write("\n".join(lines) + "\n")
    return dest, readme


def main(argv):
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))  # the first paragraph
    ap.add_argument("gc", metavar="GC", help="gpu-check.sh's output folder, or its archive (gc.tar.gz)")
    ap.add_argument("--tag", help="device tag in the file name (default: from the device name, e.g. h100)")
    ap.add_argument("--write", action="store_true",
                    help="file kernel_bench.json in bench/device-runs/ and add its row to the README table")
    ap.add_argument("--root", default=ROOT, help="the repository (default: this script's)")
    args = ap.parse_args(argv[1:])
    try:
        with tempfile.TemporaryDirectory() as tmp:
            d = open_gc(args.gc, tmp)
            data, no_figures = load_bench(d)
            tag = args.tag or device_tag(data.get("device", ""))
            if not re.fullmatch(r"[a-z0-9_]+", tag):
                raise Bad(f"--tag '{tag}': lower-case letters, digits and _ only")
            text, name, date = draft(d, data, tag, no_figures)
            print(text, end="")
            if no_figures:
                if args.write:
                    raise Bad(f"nothing to file in bench/device-runs/: {no_figures}")
                print(f"\nrecord_device_run: no kernel_bench figures in this run ({no_figures}); the draft has the "
                      "check's steps")
            elif args.write:
                dest, readme = write(d, data, name, date, args.root)
                print(f"\nrecord_device_run: wrote {dest} and its row in {readme}")
            else:
                print(f"\nrecord_device_run: would file it as bench/device-runs/{name} (--write)")
    except Bad as e:
        print(f"record_device_run: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
