#!/usr/bin/env python3
"""Compares two kernel_bench JSON files (`kernel_bench --json FILE`), case by case.

usage: kernel_bench_compare.py BEFORE.json AFTER.json [--group GROUP] [--min-change PCT]

For every case present in both (matched by group, case and params), prints the two medians, the speed-up
BEFORE / AFTER, and the same ratio taken against each run's own copy bandwidth (the runs' fraction of copy),
which discounts a machine that was slower or faster as a whole; then the cases only one file has, and the
target verdicts that changed. --group keeps one group (pool, score, indexer, topk, decode, attention, gla,
copy); --min-change hides cases whose speed-up is within PCT percent of 1 (default 0: all).
Timing: a file's "timing" is "queued" (launches queued behind a blocking kernel; "sync_median_ms" holds the
runs from an idle GPU) or, in files written before that field existed, "unqueued" (every run from an idle
GPU). A case queued in both files compares the medians; otherwise the runs from an idle GPU.
Standard library only. Exit status 2 on bad arguments or files, else 0.
"""
import argparse
import json
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


def key(case):
    return (case["group"], case["name"], case["params"])


def timing(data):
    return data.get("timing", "unqueued")


def fmt_time(ms):
    return f"{ms:.3f} ms" if ms >= 1 else f"{ms * 1000:.1f} us"


def compare(before, after, group=None, min_change=0.0, out=sys.stdout):
    b = {key(c): c for c in before["cases"] if c.get("runs", 0) > 0}
    a = {key(c): c for c in after["cases"] if c.get("runs", 0) > 0}
    cb, ca = before.get("copy_gbs", 0) or 0, after.get("copy_gbs", 0) or 0
    print(f"before: git {before.get('git_revision', '?')}, {before.get('device', '?')}, copy {cb:.0f} GB/s", file=out)
    print(f"after:  git {after.get('git_revision', '?')}, {after.get('device', '?')}, copy {ca:.0f} GB/s", file=out)
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


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("--group")
    p.add_argument("--min-change", type=float, default=0.0, metavar="PCT")
    args = p.parse_args(argv[1:])
    try:
        compare(load(args.before), load(args.after), args.group, args.min_change)
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
