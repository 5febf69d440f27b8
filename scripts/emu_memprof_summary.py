#!/usr/bin/env python3
"""Summary of the emulator's memory-access profile (emu/cuemu.h, "The memory-access profile").

usage: scripts/emu_memprof_summary.py PROFILE.jsonl [--by-case] [--case REGEX] [--worst N] [--min-excess F]
                                     [--csv FILE] [--declared KERNEL_BENCH.json]

PROFILE.jsonl is what a program whose kernels are instrumented (make mem-profile) writes with
CUEMU_MEMPROF=PROFILE.jsonl: one JSON line per launch, per instruction its warp requests, the 32-byte
sectors (device memory) or wavefronts (shared memory) they took, and the fewest their distinct bytes
could take ("ideal"). Prints, per kernel (its function, template arguments included, where the program
has a symbol table; all its launches together; with --by-case, per kernel_bench case and kernel):
  device memory loads and stores: requests, sectors a request, and efficiency = ideal / sectors (100%:
    coalesced; 25%: a quarter of each sector used);
  shared memory: wavefronts against the ideal (bank conflicts), and shared atomics;
  device atomics: lanes and distinct addresses a request;
  each launch's distinct bytes loaded and stored, summed over the launches (MiB; whole sectors,
    atomics left out: a floor on DRAM traffic when nothing stays in L2 from one launch to the next);
then the instructions with the most excess units (sectors or wavefronts above ideal), with their source
lines (addr2line, from the module each row names). --declared takes the kernel_bench JSON of the same
run and sets each case's declared bytes (what its % of copy bandwidth is computed from) beside the
distinct bytes its first timed run's kernels loaded and stored, summed over its launches: a row that
two kernels read counts twice and a row one kernel reads twice counts once (the traffic when nothing
stays in L2 from one launch to the next and everything does within one). The counts are the emulator's, at the sizes the
program ran: a GPU's caches and timing are not modelled. --csv writes one row per kernel, space and op.
Exit status 0; 2 for bad arguments or an unreadable profile.
"""
import argparse
import collections
import csv
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernel_bench_compare as kbc  # noqa: E402  (the kernel_bench JSON loader, beside this script)


def load(path):
    launches, header = [], {}
    try:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    d = json.loads(line)
                except json.JSONDecodeError as e:
                    print(f"{path}:{n}: not a JSON line ({e.msg}); is it a CUEMU_MEMPROF profile?", file=sys.stderr)
                    sys.exit(2)
                if "launch" in d:
                    launches.append(d)
                elif "profile" in d:
                    header.update(d)
    except OSError as e:
        print(f"{path}: {e.strerror}", file=sys.stderr)
        sys.exit(2)
    return launches, header


PRECISIONS = ["fp32", "fp16", "bf16", "int8", "fp8"]  # ip::Precision's values, in order (core/quant.h)


def kernel_name(launch):
    """A launch's kernel: its function (the symbol, without return type, namespaces and parameters, the
    precisions by name), or the launch site's kernel expression where the program had no symbol."""
    sym = launch.get("symbol") or ""
    if not sym:
        return launch["kernel"]
    sym = re.sub(r"^void ", "", sym)
    # the parameter list: the last top-level (...) group
    depth, cut = 0, len(sym)
    for i in range(len(sym) - 1, -1, -1):
        if sym[i] == ")":
            depth += 1
        elif sym[i] == "(":
            depth -= 1
            if depth == 0:
                cut = i
                break
    sym = sym[:cut]
    sym = re.sub(r"\(ip::Precision\)(\d)", lambda m: PRECISIONS[int(m.group(1))] if int(m.group(1)) < 5 else m.group(0),
                 sym)
    for ns in ("(anonymous namespace)::", "ip::cuda::detail::", "ip::cuda::", "ip::kbench::", "ip::"):
        sym = sym.replace(ns, "")
    return sym


def simple_name(func):
    """A C++ function as addr2line prints it, without template arguments, parameters, namespaces or
    lambdas (a lambda's operator() is named by the function it is in)."""
    out, depth = [], 0
    for ch in func:
        if ch in "<({":
            depth += 1
        elif ch in ">)}":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    name = "".join(out).strip()
    if name.endswith(" const"):
        name = name[: -len(" const")]
    parts = [p for p in name.split(" ")[-1].split("::") if p and p != "operator"]
    return parts[-1] if parts else func


def source_lines(rows, mtimes):
    """(module, pc) -> 'file:line in function' via addr2line, where it is installed, for the modules not
    rebuilt since the profile (mtimes: module -> its modification time then); and the modules left out."""
    out, stale = {}, set()
    if not shutil.which("addr2line"):
        return out, stale
    by_module = collections.defaultdict(set)
    for module, pc in rows:
        if not module or module == "?":
            continue
        try:
            if mtimes.get(module) and int(os.stat(module).st_mtime) != mtimes[module]:
                stale.add(module)
                continue
        except OSError:
            stale.add(module)
            continue
        by_module[module].add(pc)
    for module, pcs in by_module.items():
        pcs = sorted(pcs)
        # The hook's return address is just after the call: pc - 1 lies in the instruction's line.
        args = ["addr2line", "-e", module, "-f", "-C", "-i", "-a"] + [hex(int(p, 16) - 1) for p in pcs]
        try:
            res = subprocess.run(args, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired):
            continue
        cur, frames = None, []
        lines = res.stdout.splitlines()
        i = 0
        results = {}
        while i < len(lines):
            line = lines[i]
            if line.startswith("0x"):
                if cur is not None:
                    results[cur] = frames
                cur, frames = int(line, 16), []
                i += 1
                continue
            func = line
            loc = lines[i + 1] if i + 1 < len(lines) else "??"
            frames.append((func, loc))
            i += 2
        if cur is not None:
            results[cur] = frames
        for p in pcs:
            frames = results.get(int(p, 16) - 1, [])
            # innermost first: the first frame outside the emulator's wrappers (__ldg, atomicAdd, ...) is
            # where the access is written; the outermost, the function it was inlined into
            own = [(f, loc) for f, loc in frames if "emu/cuemu.h" not in loc]
            if not own:
                continue
            loc = own[0][1].split(" (discriminator")[0]
            short = loc.split("/work/main/")[-1]
            for root in ("/kernels/", "/bench/", "/core/", "/tests/"):
                if root in short:
                    short = root[1:] + short.split(root, 1)[1]
                    break
            out[(module, p)] = f"{short} in {simple_name(frames[-1][0])}"
    return out, stale


def compare_declared(path, launches, case_rx=None):
    """Each kernel_bench case's declared bytes per run against the distinct bytes of its run 0's launches."""
    try:
        cases = kbc.load(path)["cases"]
    except SystemExit as e:  # kernel_bench_compare's loader reports a bad file by SystemExit(message)
        print(str(e).replace("kernel_bench_compare: ", "emu_memprof_summary: --declared: "), file=sys.stderr)
        sys.exit(2)
    moved = collections.defaultdict(int)
    kernels = collections.defaultdict(int)
    for l in launches:
        if l.get("run") == 0:
            moved[l["case"]] += 32 * (l["unique_load_sectors"] + l["unique_store_sectors"])
            kernels[l["case"]] += 1
    print("\ndeclared bytes per run (kernel_bench, what % of copy is computed from) against the distinct bytes "
          "the first timed run's kernels loaded and stored, summed over its launches (a re-read within one launch "
          "counts once, one in another launch again):")
    print(f'{"case":90} {"declared KB":>11} {"profile KB":>10} {"profile/declared":>16} {"launches":>8}')
    for c in cases:
        label = f'{c["group"]} | {c["name"]} | {c["params"]}'
        if c.get("group") == "copy" or not c.get("bytes") or (case_rx and not case_rx.search(label)):
            continue
        short = label if len(label) <= 90 else label[:87] + "..."
        got = moved.get(label, 0)
        if not kernels.get(label):
            print(f'{short:90} {c["bytes"] / 1e3:11.1f} {"-":>10} {"(no kernel profiled)":>16}')
            continue
        print(f'{short:90} {c["bytes"] / 1e3:11.1f} {got / 1e3:10.1f} {got / c["bytes"]:16.2f} {kernels[label]:8d}')


def pct(a, b):
    return f"{100.0 * a / b:5.1f}%" if b else "    -"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("profile")
    ap.add_argument("--by-case", action="store_true", help="one line per kernel_bench case and kernel")
    ap.add_argument("--case", help="only launches whose kernel_bench case matches this regular expression")
    ap.add_argument("--worst", type=int, default=25, help="instructions listed (default 25)")
    ap.add_argument("--min-excess", type=float, default=1.25,
                    help="list instructions whose units exceed ideal by this factor (default 1.25)")
    ap.add_argument("--csv", help="write per kernel, space and op rows here")
    ap.add_argument("--declared", metavar="KERNEL_BENCH_JSON",
                    help="compare each case's declared bytes with the profile's (kernel_bench --json of the same run)")
    a = ap.parse_args()
    if a.worst < 0 or a.min_excess < 1:
        ap.error("--worst must be >= 0 and --min-excess >= 1")
    launches, header = load(a.profile)
    if a.case:
        try:
            rx = re.compile(a.case)
        except re.error as e:
            ap.error(f"--case {a.case!r}: {e}")
        launches = [l for l in launches if rx.search(l.get("case") or "")]
    if not launches:
        print(f"{a.profile}: no launches profiled")
        return 0

    kern = collections.OrderedDict()
    instr = collections.defaultdict(lambda: collections.Counter())
    mtimes = {}
    for l in launches:
        name = kernel_name(l)
        if a.by_case:
            name = f'{l.get("case") or "(no case)"} :: {name}'
        k = kern.setdefault(name, collections.Counter())
        k["launches"] += 1
        k["unique_load_bytes"] += 32 * l["unique_load_sectors"]
        k["unique_store_bytes"] += 32 * l["unique_store_sectors"]
        for r in l["rows"]:
            mtimes[r["module"]] = r.get("module_mtime", 0)
            key = f'{r["space"]}.{r["op"]}'
            for f in ("requests", "lanes", "bytes", "units", "ideal", "addresses"):
                k[f"{key}.{f}"] += r[f]
            ik = (name, r["module"], r["pc"], r["space"], r["op"])
            for f in ("requests", "lanes", "bytes", "units", "ideal", "addresses"):
                instr[ik][f] += r[f]

    print(f"memory-access profile: {len(launches)} launches of {len(kern)} kernels ({a.profile})")
    if header:
        print(f'made by: {header.get("command", "?")} at {header.get("started", "?")} (CPU emulator, not a GPU)')
    print("device memory: requests (warp), sectors a request, efficiency = ideal sectors / sectors; "
          "shared: wavefronts / ideal; ld/st MiB: each launch's distinct sectors loaded / stored (atomics left "
          "out), x 32 bytes, summed over the launches")
    w = min(100, max(len("kernel"), max(len(n) for n in kern)))
    hdr = (f'{"kernel":{w}} {"launch":>6} {"ld req":>9} {"sec/req":>7} {"ld eff":>6} {"st req":>8} {"sec/req":>7} '
           f'{"st eff":>6} {"sh wf/ideal":>11} {"atom lanes":>10} {"addr/req":>8} {"ld MiB":>8} {"st MiB":>8}')
    print(hdr)
    rows_csv = []
    for name, k in kern.items():
        ld_r, ld_u, ld_i = k["global.load.requests"], k["global.load.units"], k["global.load.ideal"]
        st_r, st_u, st_i = k["global.store.requests"], k["global.store.units"], k["global.store.ideal"]
        sh_u = k["shared.load.units"] + k["shared.store.units"] + k["shared.atomic.units"]
        sh_i = k["shared.load.ideal"] + k["shared.store.ideal"] + k["shared.atomic.ideal"]
        at_l, at_r, at_a = k["global.atomic.lanes"], k["global.atomic.requests"], k["global.atomic.addresses"]
        short = name if len(name) <= w else name[: w - 3] + "..."
        print(f'{short:{w}} {k["launches"]:6d} {ld_r:9d} {ld_u / ld_r if ld_r else 0:7.2f} {pct(ld_i, ld_u):>6} '
              f'{st_r:8d} {st_u / st_r if st_r else 0:7.2f} {pct(st_i, st_u):>6} '
              f'{(f"{sh_u / sh_i:.2f}x" if sh_i else "-"):>11} {at_l:10d} {(f"{at_a / at_r:.1f}" if at_r else "-"):>8} '
              f'{k["unique_load_bytes"] / 2**20:8.3f} {k["unique_store_bytes"] / 2**20:8.3f}')
        for key in ("global.load", "global.store", "global.atomic", "shared.load", "shared.store", "shared.atomic"):
            if k[f"{key}.requests"]:
                sp, op = key.split(".")
                rows_csv.append([name, sp, op] + [k[f"{key}.{f}"] for f in
                                                  ("requests", "lanes", "bytes", "units", "ideal", "addresses")])

    worst = []
    for ik, c in instr.items():
        if c["ideal"] and c["units"] > a.min_excess * c["ideal"]:
            worst.append((c["units"] - c["ideal"], ik, c))
    worst.sort(key=lambda w: -w[0])
    worst = worst[: a.worst]
    if worst and a.worst:
        where, stale = source_lines([(ik[1], ik[2]) for _, ik, _ in worst], mtimes)
        for m in sorted(stale):
            print(f"\n(no source lines for {m}: rebuilt or gone since the profile; its instructions are by address)")
        print(f"\ninstructions whose sectors (device) or wavefronts (shared) exceed {a.min_excess:g}x the ideal, "
              "most excess first:")
        w = min(100, max(len(ik[0]) for _, ik, _ in worst))
        print(f'{"kernel":{w}} {"space.op":14} {"requests":>9} {"units/req":>9} {"x ideal":>7} {"B/lane":>6}  source')
        for excess, ik, c in worst:
            name, module, pc, space, op = ik
            short = name if len(name) <= w else name[: w - 3] + "..."
            print(f'{short:{w}} {space + "." + op:14} {c["requests"]:9d} {c["units"] / c["requests"]:9.2f} '
                  f'{c["units"] / c["ideal"]:7.2f} {c["bytes"] / c["lanes"]:6.1f}  '
                  f'{where.get((module, pc), pc)}')
    elif a.worst:
        print(f"\nno instruction exceeds {a.min_excess:g}x its ideal sectors or wavefronts")
    if a.declared:
        compare_declared(a.declared, launches, rx if a.case else None)
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["kernel", "space", "op", "requests", "lanes", "bytes", "units", "ideal", "addresses"])
            w.writerows(rows_csv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
