"""Checks kernel_bench's hang guard on the emulator (test emu.KernelBench.CaseTimeoutStopsTheRun).

usage: check_kernel_bench_guard.py KERNEL_BENCH_PROGRAM OUTPUT_JSON

A run whose case outlives --case-timeout must stop with exit status 3, print the case it stopped in and a
summary line that scripts/gpu-check.sh reads, and leave in --json the rows finished before it (the copy
reference) with "stopped" naming the case. A top-k case on the emulator takes far longer than the 1 ms
limit used here, so the guard stops the run at its first top-k case, as it would stop a device run at a
kernel that never finishes.
Then the same run with --case-timeout 0 (off) must finish. Also --only with several groups (the hang guard's
test is where kernel_bench's argument handling is checked).
"""
import json
import subprocess
import sys


def main() -> int:
    prog, out = sys.argv[1], sys.argv[2]
    problems = []
    run = subprocess.run([prog, "--smoke", "--only", "topk", "--case-timeout", "0.001", "--json", out],
                         capture_output=True, text=True, timeout=240)
    sys.stdout.write(run.stdout[-4000:])
    sys.stderr.write(run.stderr[-2000:])
    if run.returncode != 3:
        problems.append(f"exit status {run.returncode}, expected 3")
    summary = [l for l in run.stdout.splitlines() if l.startswith("kernel_bench: summary: stopped: case 'topk / ")]
    if len(summary) != 1:
        problems.append("no 'kernel_bench: summary: stopped: case 'topk / ...' line")
    with open(out, encoding="utf-8") as f:
        d = json.load(f)
    stopped = d.get("stopped", "")
    if not stopped.startswith("case 'topk / ") or "--case-timeout 0.001" not in stopped:
        problems.append(f"'stopped' is {stopped!r}")
    groups = {c["group"] for c in d.get("cases", [])}
    if groups != {"copy"}:
        problems.append(f"finished rows of groups {sorted(groups)}, expected the copy reference only")
    if not any(c["name"] == "cudaMemcpyAsync D2D" and c["median_ms"] > 0 for c in d.get("cases", [])):
        problems.append("the copy reference row is missing")
    if d.get("summary", {}).get("cases") != len(d.get("cases", [])):
        problems.append(f"summary {d.get('summary')} vs {len(d.get('cases', []))} cases")

    # Off: the same group runs to its end (one case group, a few seconds on the emulator).
    run = subprocess.run([prog, "--smoke", "--only", "topk", "--case-timeout", "0", "--json", out],
                         capture_output=True, text=True, timeout=240)
    if run.returncode != 0:
        problems.append(f"with --case-timeout 0: exit status {run.returncode}")
    with open(out, encoding="utf-8") as f:
        d = json.load(f)
    if "stopped" in d or not any(c["group"] == "topk" for c in d["cases"]):
        problems.append("with --case-timeout 0 the run was stopped or ran no top-k case")

    bad = subprocess.run([prog, "--case-timeout", "-1"], capture_output=True, text=True, timeout=60)
    if bad.returncode != 2 or "--case-timeout" not in bad.stderr:
        problems.append(f"--case-timeout -1: exit {bad.returncode}, stderr {bad.stderr!r}")

    # --only with several groups runs those (and the copy reference) only; an unknown one is refused.
    run = subprocess.run([prog, "--smoke", "--only", "stats,gla", "--json", out], capture_output=True, text=True,
                         timeout=240)
    with open(out, encoding="utf-8") as f:
        groups = {c["group"] for c in json.load(f)["cases"]}
    if run.returncode != 0 or groups != {"copy", "stats", "gla"}:
        problems.append(f"--only stats,gla: exit {run.returncode}, groups {sorted(groups)}")
    bad = subprocess.run([prog, "--only", "topk,bogus"], capture_output=True, text=True, timeout=60)
    if bad.returncode != 2 or "'bogus' is not one of" not in bad.stderr:
        problems.append(f"--only topk,bogus: exit {bad.returncode}, stderr {bad.stderr!r}")
    for p in problems:
        print("FAILED:", p)
    print(f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
