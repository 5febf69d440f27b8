"""Checks a `kernel_bench --smoke --json FILE` run (test emu.KernelBench.SmokeRunsEveryCase).

usage: check_kernel_bench.py KERNEL_BENCH_PROGRAM OUTPUT_JSON

Runs the program with --smoke --json, then checks that it exited 0, that every case group ran, that no
case ended in an error or was skipped, that every timed case has positive times in order
(min <= median <= max) and positive declared bytes, that the summary agrees with the cases, and that the
JSON says how the run was made (command line, start time). Then runs the form the Nsight Compute script
uses (--runs 1 --warmup 0 --no-hold) on one group and checks that it runs and the JSON says no warm-up
and one run (whether it held the stream cannot show: the emulator never does).
"""
import json
import math
import re
import shlex
import subprocess
import sys

GROUPS = {"copy", "pool", "score", "indexer", "topk", "decode", "attention", "gla", "stats"}


def main() -> int:
    prog, out = sys.argv[1], sys.argv[2]
    run = subprocess.run([prog, "--smoke", "--json", out], capture_output=True, text=True)
    sys.stdout.write(run.stdout[-6000:])
    sys.stderr.write(run.stderr[-3000:])
    problems = []
    if run.returncode != 0:
        problems.append(f"exit status {run.returncode}")
    with open(out, encoding="utf-8") as f:
        d = json.load(f)
    if d.get("skipped"):
        problems.append(f"skipped: {d['skipped']}")
    if d.get("smoke") is not True:
        problems.append("the JSON does not say smoke: true")
    # how the run was made: its command line as given, when it started
    want = " ".join(shlex.quote(a) for a in (prog, "--smoke", "--json", out))  # the same quoting (no ' here)
    if d.get("command") != want:
        problems.append(f"command {d.get('command')!r}, expected {want!r}")
    if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", d.get("started", "")):
        problems.append(f"started {d.get('started')!r} is not a UTC time (YYYY-MM-DDTHH:MM:SSZ)")
    cases = d.get("cases", [])
    seen = {c["group"] for c in cases}
    if seen != GROUPS:
        problems.append(f"groups run: {sorted(seen)}, expected {sorted(GROUPS)}")
    for c in cases:
        what = f"{c['group']} / {c['name']} ({c['params']})"
        if c["verdict"] in ("error", "skipped"):
            problems.append(f"{what}: {c['verdict']}: {c['note']}")
            continue
        if c["name"] == "setup":
            continue
        if c["runs"] != d["runs"]:
            problems.append(f"{what}: {c['runs']} runs, the run says {d['runs']}")
        if not (0 < c["min_ms"] <= c["median_ms"] <= c["max_ms"]):
            problems.append(f"{what}: times out of order: {c['min_ms']} {c['median_ms']} {c['max_ms']} ms")
        if not c.get("sync_median_ms", 0) > 0:
            problems.append(f"{what}: no time from an idle GPU (sync_median_ms)")
        if not (c["bytes"] and c["bytes"] > 0 and math.isfinite(c["gbs"]) and c["gbs"] > 0):
            problems.append(f"{what}: declared bytes {c['bytes']}, GB/s {c['gbs']}")
        if c["verdict"] in ("met", "not met"):
            problems.append(f"{what}: a smoke run judged its target ({c['verdict']})")
    s = d.get("summary", {})
    if s.get("cases") != len(cases) or s.get("errors") != 0 or s.get("targets") != 0:
        problems.append(f"summary {s} vs {len(cases)} cases")
    if "kernel_bench: summary:" not in run.stdout:
        problems.append("no summary line on stdout (scripts/gpu-check.sh reads it)")
    # The profiler's form (scripts/gpu-ncu-summary.sh): no warm-up when asked for none, no blocking kernel.
    out2 = out + ".ncu-form.json"
    run2 = subprocess.run([prog, "--smoke", "--only", "stats", "--runs", "1", "--warmup", "0", "--no-hold", "--json",
                           out2], capture_output=True, text=True)
    if run2.returncode != 0:
        problems.append(f"--warmup 0 --no-hold: exit status {run2.returncode}: {run2.stderr[-500:]}")
    else:
        with open(out2, encoding="utf-8") as f:
            d2 = json.load(f)
        # (The emulator never queues behind a blocking kernel, so --no-hold is only accepted here.)
        if d2.get("warmup") != 0 or d2.get("runs") != 1:
            problems.append(f"--runs 1 --warmup 0 --no-hold: the JSON says runs {d2.get('runs')}, warmup "
                            f"{d2.get('warmup')}")
    for p in problems:
        print("FAILED:", p)
    print(f"{len(cases)} cases in {len(seen)} groups; {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
