#!/usr/bin/env python3
"""Compares two kernel_bench JSON files (`kernel_bench --json FILE`), case by case.

usage: kernel_bench_compare.py BEFORE.json AFTER.json [--group GROUP] [--min-change PCT]
       kernel_bench_compare.py --variants RUN.json [--group GROUP]
       kernel_bench_compare.py --size-copy RUN.json [--group GROUP]

For every case present in both (matched by group, case and params), prints the two medians, the speed-up
BEFORE / AFTER, and the same ratio taken against each run's own copy bandwidth (the runs' fraction of copy),
which discounts a machine that was slower or faster as a whole; then the cases only one file has, and the
target verdicts that changed. Runs on different GPUs (the device lines' names differ) are flagged: their
speed-ups compare machines as well as code. --group keeps one group (pool, score, indexer, topk, decode, attention, gla,
copy); --min-change hides cases whose speed-up is within PCT percent of 1 (default 0: all).
Timing: a file's "timing" is "queued" (launches queued behind a blocking kernel; "sync_median_ms" holds the
runs from an idle GPU) or, in files written before that field existed, "unqueued" (every run from an idle
GPU). A case queued in both files compares the medians; otherwise the runs from an idle GPU.
--variants compares within one run instead: each case whose name ends in a parenthesized variant
("top-2048 (one launch)", "uniform bf16 keys (pipelined)") with its base case, the same group and params
and the name without that suffix ("top-2048"); a suffix without such a base ("compressed (G=4)") is no
variant. Prints both medians and base / variant (above 1: the variant is faster), on the queued medians
when both cases were queued, else on the runs from an idle GPU.
--size-copy reads each bandwidth case of one run (a '% copy' figure) against the float4 copy kernel timed at
the cases' sizes ("float4 copy kernel (case-sized)", 1-256 MiB each way, kernel_bench since 2026-12-05): the
copy's GB/s at the case's bytes (interpolated in log bytes between the two nearest sizes, the nearest one
outside them) and case / that. Near 1 or above: the case streams as well as a plain kernel of its size,
and what it lacks of the 2 GiB reference is the size's. A run without those rows says so.
Standard library only. Exit status 2 on bad arguments or files, else 0.
"""
import argparse
import json
import math
import sys


def load(path):
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise SystemExit(f"kernel_bench_compare: cannot read '{path}': {e}") from None
    if data.get("tool") != "kernel_bench" or "cases" not in data:
        raise SystemExit(f"kernel_bench_compare: '{path}' is not a kernel_bench JSON file (no tool/cases)")
    if data.get("skipped"):
        raise SystemExit(f"kernel_bench_compare: '{path}' is a skipped run ({data['skipped']})")
    return data


def note_stopped(data, label, out):
    """A run its hang guard stopped holds only the cases finished before it (kernel_bench --case-timeout)."""
    if data.get("stopped"):
        print(f"  {label}run stopped early, only its {len(data['cases'])} finished cases are here: {data['stopped']}",
              file=out)


def key(case):
    return (case["group"], case["name"], case["params"])


def device_name(data):
    """The GPU's name, the device line up to its first comma ("NVIDIA H200")."""
    return str(data.get("device", "?")).split(",")[0].strip()


def started(data):
    """', started T' for files that record when the run started (kernel_bench since 2026-12-05), else ''."""
    return f", started {data['started']}" if data.get("started") else ""


def timing(data):
    return data.get("timing", "unqueued")


def fmt_time(ms):
    return f"{ms:.3f} ms" if ms >= 1 else f"{ms * 1000:.1f} us"


def compare(before, after, group=None, min_change=0.0, out=sys.stdout):
    b = {key(c): c for c in before["cases"] if c.get("runs", 0) > 0}
    a = {key(c): c for c in after["cases"] if c.get("runs", 0) > 0}
    cb, ca = before.get("copy_gbs", 0) or 0, after.get("copy_gbs", 0) or 0
    print(f"before: git {before.get('git_revision', '?')}, {before.get('device', '?')}, copy {cb:.0f} GB/s"
          f"{started(before)}", file=out)
    print(f"after:  git {after.get('git_revision', '?')}, {after.get('device', '?')}, copy {ca:.0f} GB/s"
          f"{started(after)}", file=out)
    note_stopped(before, "before: ", out)
    note_stopped(after, "after: ", out)
    db, da = device_name(before), device_name(after)
    if db != da:
        print(f"DEVICES DIFFER ({db} before, {da} after): the speed-ups compare the machines as well as the code; "
              "'vs copy' discounts the copy bandwidth only (not clocks, SMs or L2). Compare code on one device.",
              file=out)
    print("speed-up = before median / after median; vs copy: the same with each run's time scaled by its own copy "
          "bandwidth", file=out)
    if timing(before) != timing(after):
        print(f"timing differs (before {timing(before)}, after {timing(after)}): comparing the runs from an idle GPU "
              "(median_ms of an unqueued file, sync_median_ms of a queued one)", file=out)

    def queued(data, case):  # a case whose blocking kernel timed out was timed from an idle GPU
        return timing(data) == "queued" and case.get("queued") is not False

    def unqueued(case):  # files without sync_median_ms timed every run from an idle GPU
        return case.get("sync_median_ms") or case["median_ms"]

    rows = []
    for k in b:
        if k not in a or (group and k[0] != group):
            continue
        if queued(before, b[k]) and queued(after, a[k]):
            tb, ta = b[k]["median_ms"], a[k]["median_ms"]
        else:
            tb, ta = unqueued(b[k]), unqueued(a[k])
        if tb <= 0 or ta <= 0:
            continue
        speedup = tb / ta
        if abs(speedup - 1) * 100 < min_change:
            continue
        vs_copy = speedup * (cb / ca) if cb > 0 and ca > 0 else float("nan")
        rows.append((k, tb, ta, speedup, vs_copy))
    for (g, name, params), tb, ta, s, v in rows:
        print(f"  {g:9} {name[:26]:26} {params[:44]:44} {fmt_time(tb):>11} -> {fmt_time(ta):>11}  {s:5.2f}x"
              f"  (vs copy {v:5.2f}x)", file=out)
    only_b = [k for k in b if k not in a and (not group or k[0] == group)]
    only_a = [k for k in a if k not in b and (not group or k[0] == group)]
    for label, ks in (("only before", only_b), ("only after", only_a)):
        for g, name, params in ks:
            print(f"  {label}: {g} {name} {params}", file=out)
    for k in b:
        if k in a and (not group or k[0] == group) and b[k].get("verdict") != a[k].get("verdict"):
            print(f"  verdict {k[0]} {k[1]} {k[2]}: {b[k].get('verdict')} -> {a[k].get('verdict')}", file=out)
    return rows


def variants(data, group=None, out=sys.stdout):
    """Each variant case of one run against its base case: rows (group, variant, base, params, t_base,
    t_variant, base / variant)."""
    cases = {key(c): c for c in data["cases"] if c.get("runs", 0) > 0}
    print(f"run: git {data.get('git_revision', '?')}, {data.get('device', '?')}", file=out)
    note_stopped(data, "", out)
    print("speed-up = base median / variant median (above 1: the variant is faster)", file=out)
    rows = []
    for (g, name, params), c in cases.items():
        if (group and g != group) or not name.endswith(")") or " (" not in name:
            continue
        base_name = name[: name.rindex(" (")]
        base = cases.get((g, base_name, params))
        if base is None:
            continue
        both_queued = timing(data) == "queued" and c.get("queued") is not False and base.get("queued") is not False
        if both_queued:
            tb, tv = base["median_ms"], c["median_ms"]
        else:
            tb, tv = base.get("sync_median_ms") or base["median_ms"], c.get("sync_median_ms") or c["median_ms"]
        if tb <= 0 or tv <= 0:
            continue
        rows.append((g, name, base_name, params, tb, tv, tb / tv))
    for g, name, base_name, params, tb, tv, s in rows:
        print(f"  {g:9} {name[:34]:34} {params[:36]:36} base {fmt_time(tb):>11}  variant {fmt_time(tv):>11}  "
              f"{s:5.2f}x", file=out)
    if not rows:
        print("  no variant cases", file=out)
        return rows
    # By variant (the name's last parenthesised part): how many cases, the slowest and fastest speed-up and
    # their geometric mean; what a session deciding a default reads first.
    by = {}
    for g, name, base_name, params, tb, tv, sp in rows:
        by.setdefault(name[len(base_name) + 1:], []).append(sp)
    print("by variant (speed-up over its base cases: cases, min .. max, geometric mean):", file=out)
    for suffix, sps in sorted(by.items(), key=lambda kv: -math.prod(kv[1]) ** (1 / len(kv[1]))):
        gm = math.prod(sps) ** (1 / len(sps))
        print(f"  {suffix[:36]:36} {len(sps):3d} case{'s' if len(sps) > 1 else ' '}  {min(sps):5.2f}x .. {max(sps):5.2f}x"
              f"  mean {gm:5.2f}x", file=out)
    return rows


SIZE_COPY = "float4 copy kernel (case-sized)"


def copy_at(points, nbytes):
    """GB/s of the copy at `nbytes` moved, from points [(bytes, GB/s)] sorted by bytes: interpolated in
    log(bytes) between the two around it, the nearest point's outside them."""
    if nbytes <= points[0][0]:
        return points[0][1]
    if nbytes >= points[-1][0]:
        return points[-1][1]
    for (b0, g0), (b1, g1) in zip(points, points[1:]):
        if b0 <= nbytes <= b1:
            f = (math.log(nbytes) - math.log(b0)) / (math.log(b1) - math.log(b0))
            return g0 + f * (g1 - g0)
    return points[-1][1]


def size_copy(data, group=None, out=sys.stdout):
    """Each bandwidth case of one run against the copy kernel at its size: rows (group, name, params, bytes,
    case GB/s, copy GB/s at that size, case / copy)."""
    cases = [c for c in data["cases"] if c.get("runs", 0) > 0]
    points = sorted((c["bytes"], c["gbs"]) for c in cases
                    if c["group"] == "copy" and c["name"] == SIZE_COPY and c.get("bytes") and c.get("gbs"))
    print(f"run: git {data.get('git_revision', '?')}, {data.get('device', '?')}, reference copy "
          f"{data.get('copy_gbs', 0) or 0:.0f} GB/s", file=out)
    note_stopped(data, "", out)
    if not points:
        print(f"  no '{SIZE_COPY}' rows in this run (kernel_bench before 2026-12-05)", file=out)
        return []
    print("  copy at size: " + ", ".join(f"{b / 1e6:.1f} MB {g:.0f} GB/s" for b, g in points), file=out)
    print("case / copy: the case's GB/s over the copy kernel's at the same bytes moved (1: as a plain kernel of "
          "its size)", file=out)
    rows = []
    for c in cases:
        if c["group"] == "copy" or (group and c["group"] != group):
            continue
        frac, nbytes, gbs = c.get("frac_of_copy"), c.get("bytes") or 0, c.get("gbs") or 0
        if frac is None or nbytes <= 0 or gbs <= 0:
            continue
        at = copy_at(points, nbytes)
        rows.append((c["group"], c["name"], c["params"], nbytes, gbs, at, gbs / at))
    for g, name, params, nbytes, gbs, at, r in rows:
        print(f"  {g:9} {name[:34]:34} {params[:36]:36} {nbytes / 1e6:9.1f} MB {gbs:6.0f} GB/s  copy {at:6.0f} GB/s"
              f"  {r:5.2f}", file=out)
    return rows


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="+", metavar="FILE", help="BEFORE.json AFTER.json, or RUN.json with --variants")
    p.add_argument("--group")
    p.add_argument("--min-change", type=float, default=0.0, metavar="PCT")
    p.add_argument("--variants", action="store_true", help="compare each variant case of one run with its base")
    p.add_argument("--size-copy", action="store_true",
                   help="read each bandwidth case of one run against the copy kernel at its size")
    args = p.parse_args(argv[1:])
    if args.variants and args.size_copy:
        print("kernel_bench_compare: --variants and --size-copy exclude each other", file=sys.stderr)
        return 2
    one = args.variants or args.size_copy
    if len(args.files) != (1 if one else 2):
        print(f"kernel_bench_compare: {'--variants and --size-copy take one file' if one else 'give two files'}, "
              f"got {len(args.files)}", file=sys.stderr)
        return 2
    try:
        if args.variants:
            variants(load(args.files[0]), args.group)
            return 0
        if args.size_copy:
            size_copy(load(args.files[0]), args.group)
            return 0
        compare(load(args.files[0]), load(args.files[1]), args.group, args.min_change)
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
