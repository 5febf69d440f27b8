"""Checks scripts/emu_memprof_summary.py on a hand-made profile (test emu.MemprofSummary.Figures).

Two launches of one kernel_bench case (a coalesced load and a strided one, a shared-memory access with a
4-way conflict, atomics), one of another case, and a kernel_bench JSON naming their declared bytes. The
summary must print each kernel's requests, sectors a request and efficiency, the worst instruction,
the --case filter's subset and --declared's ratio; a file that is not a profile exits 2.
usage: check_memprof_summary.py SCRIPT WORKDIR
"""
import json
import os
import subprocess
import sys


def row(space, op, requests, lanes, nbytes, units, ideal, addresses=0, pc="0x10"):
    return {"pc": pc, "module": "?", "module_mtime": 0, "space": space, "op": op, "requests": requests,
            "lanes": lanes, "bytes": nbytes, "units": units, "ideal": ideal, "addresses": addresses}


def main():
    script, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    prof = os.path.join(work, "profile.jsonl")
    bench = os.path.join(work, "kernel_bench.json")
    launches = [
        {"profile": "cuemu memory-access profile (emu/cuemu.h)", "command": "hand-made", "started": "now"},
        {"launch": 0, "case": "score | a | T=1", "run": 0, "kernel": "k1", "site": "x:1", "grid": [1, 1, 1],
         "block": [64, 1, 1], "unique_load_sectors": 8, "unique_store_sectors": 8,
         "rows": [row("global", "load", 2, 64, 256, 8, 8, pc="0x10"),
                  row("global", "store", 2, 64, 256, 8, 8, pc="0x20"),
                  row("shared", "load", 1, 32, 128, 4, 1, pc="0x30")]},
        {"launch": 1, "case": "score | a | T=1", "run": 1, "kernel": "k1", "site": "x:1", "grid": [1, 1, 1],
         "block": [32, 1, 1], "unique_load_sectors": 32, "unique_store_sectors": 0,
         "rows": [row("global", "load", 1, 32, 128, 32, 4, pc="0x40"),
                  row("global", "atomic", 1, 32, 128, 1, 1, addresses=1, pc="0x50")]},
        {"launch": 2, "case": "topk | b | n=2", "run": 0, "kernel": "kernel",
         "symbol": "void ip::cuda::detail::k2<(ip::Precision)4, 128>(ip::cuda::detail::P const&)",
         "site": "x:2", "grid": [1, 1, 1],
         "block": [32, 1, 1], "unique_load_sectors": 4, "unique_store_sectors": 0,
         "rows": [row("global", "load", 1, 32, 128, 4, 4, pc="0x60")]},
    ]
    with open(prof, "w") as f:
        for l in launches:
            f.write(json.dumps(l) + "\n")
    with open(bench, "w") as f:
        json.dump({"tool": "kernel_bench", "cases": [{"group": "score", "name": "a", "params": "T=1", "bytes": 1024},
                             {"group": "topk", "name": "b", "params": "n=2", "bytes": 64},
                             {"group": "decode", "name": "c", "params": "-", "bytes": 10}]}, f)
    problems = []

    def run(*args, code=0):
        r = subprocess.run([sys.executable, script, *args], capture_output=True, text=True)
        if r.returncode != code:
            problems.append(f"{args}: exit {r.returncode}, expected {code}: {r.stderr.strip()}")
        return r.stdout

    out = run(prof, "--declared", bench)
    lines = out.splitlines()
    k1 = next((l for l in lines if l.startswith("k1 ")), "")
    # k1: 3 load requests, 40 sectors (13.33 a request), ideal 12 (30.0%); stores 2, 8 sectors, 100%;
    # shared 4 wavefronts for 1 ideal (4.00x); 32 atomic lanes, 1 address a request; distinct loads 40
    # sectors (1280 B), stores 8 (256 B).
    for want in (" 2 ", " 3 ", "13.33", "30.0%", "100.0%", "4.00x", " 32 ", "1.0", "0.001", "0.000"):
        if want not in k1:
            problems.append(f"k1's line lacks {want!r}: {k1!r}")
    worst = [l for l in lines if "global.load" in l or "shared.load" in l]
    if not worst or "global.load" not in worst[0] or "8.00" not in worst[0]:
        problems.append(f"the worst instruction is not k1's strided load (32 sectors for 4, 8.00x): {worst[:1]}")
    if "made by: hand-made at now" not in out:
        problems.append("the header line is not printed")
    # --declared: run 0 of "score | a" moved 16 sectors (512 B) for 1024 declared: 0.50; "topk | b" 128 B
    # for 64: 2.00; "decode | c" has no kernel.
    if not any("score | a | T=1" in l and "0.50" in l for l in lines):
        problems.append("--declared: no 0.50 for score | a")
    if not any("topk | b | n=2" in l and "2.00" in l for l in lines):
        problems.append("--declared: no 2.00 for topk | b")
    if not any("decode | c" in l and "no kernel profiled" in l for l in lines):
        problems.append("--declared: the case without a kernel is not named")
    only = run(prof, "--case", "^topk ", "--declared", bench)
    if "k2<fp8, 128> " not in only or any(l.startswith("k1 ") for l in only.splitlines()):
        problems.append("--case ^topk kept the wrong kernels, or the symbol is not the kernel's name")
    if "score | a" in only or "decode | c" in only:
        problems.append("--case ^topk --declared lists cases the filter left out")
    by_case = run(prof, "--by-case")
    if "topk | b | n=2 :: k2<fp8, 128>" not in by_case:
        problems.append("--by-case does not name case and kernel")
    if "no instruction exceeds" in run(prof, "--worst", "0"):
        problems.append("--worst 0 says no instruction exceeds the ideal (it lists none because it was asked for none)")
    bad = os.path.join(work, "bad.jsonl")
    with open(bad, "w") as f:
        f.write("not json\n")
    run(bad, code=2)
    run(os.path.join(work, "missing.jsonl"), code=2)
    run(prof, "--case", "(", code=2)
    run(prof, "--declared", prof, code=2)  # not a kernel_bench JSON file
    if problems:
        print("\n".join(problems))
        print("--- output ---\n" + out)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
