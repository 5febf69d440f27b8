#!/usr/bin/python3
"""What ptxas reports for every CUDA kernel of the kernels library: registers, the occupancy they allow,
stack frame, spill stores and loads, static shared memory, per architecture.

The kernels build (kernels/CMakeLists.txt) compiles with --resource-usage through cmake/ptxas_resources.sh,
which keeps ptxas's report beside each object as <object>.resources.txt. This script reads those files;
it needs no GPU and nothing beyond the Python standard library (c++filt, when present, demangles).

  scripts/kernel_resources.py BUILD_DIR                  the table, one row per kernel and architecture
  scripts/kernel_resources.py BUILD_DIR --spills         only the kernels that spill
  scripts/kernel_resources.py BUILD_DIR --check ALLOWED --expect a.cu,b.cu
        exit 1 when a kernel spills registers and ALLOWED (kernels/spills_allowed.txt) does not list it,
        when an ALLOWED entry no longer matches a spilling kernel, when a kernel of one of ALLOWED's
        `min-warps sm_NN <kernel> <warps>` lines takes so many registers that an SM holds fewer warps
        (or no such kernel was built), or when an expected source has no report (a source without kernels
        has an empty one). Only the architectures of ALLOWED's `architectures` line that the build
        compiled are judged.

Registers bound occupancy: a warp is given its registers in units of 256 (8 per thread), and an SM of
sm_80/sm_90 has 65,536 registers and at most 64 resident warps, so "warps/SM" is
min(64, floor(65536 / (32 * ceil(regs / 8) * 8))) before block size and shared memory are counted.
"""

import argparse
import glob
import os
import re
import shutil
import signal
import subprocess
import sys

ENTRY = re.compile(r"^ptxas info\s+: Compiling entry function '([^']+)' for '(sm_\d+a?)'")
PROPS = re.compile(r"^ptxas info\s+: Function properties for (\S+)")
FRAME = re.compile(r"^\s+(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
USED = re.compile(r"^ptxas info\s+: Used (\d+) registers")
SMEM = re.compile(r"(\d+) bytes smem")

REGS_PER_SM = 65536
MAX_WARPS_PER_SM = 64


def warps_by_registers(regs):
    per_warp = 32 * (-(-max(regs, 1) // 8) * 8)
    return min(MAX_WARPS_PER_SM, REGS_PER_SM // per_warp)


def parse(path):
    """Entry kernels of one report: dicts with source, arch, mangled name, regs, stack, spills, smem."""
    source = os.path.basename(path)
    source = source[: source.index(".o.resources.txt")] if ".o.resources.txt" in source else source
    out, cur, frame = [], None, None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = ENTRY.match(line)
            if m:
                cur = {"source": source, "mangled": m.group(1), "arch": m.group(2)}
                frame = None
                continue
            m = PROPS.match(line)
            if m:
                frame = m.group(1) if cur and m.group(1) == cur["mangled"] else None
                continue
            m = FRAME.match(line)
            if m and cur and frame == cur["mangled"]:
                cur["stack"], cur["spill_st"], cur["spill_ld"] = (int(g) for g in m.groups())
                continue
            m = USED.match(line)
            if m and cur:
                cur["regs"] = int(m.group(1))
                s = SMEM.search(line)
                cur["smem"] = int(s.group(1)) if s else 0
                cur.setdefault("stack", 0)
                cur.setdefault("spill_st", 0)
                cur.setdefault("spill_ld", 0)
                out.append(cur)
                cur = None
    return out


def demangle(names):
    tool = shutil.which("c++filt")
    if not tool or not names:
        return {n: n for n in names}
    r = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True, text=True, check=False)
    got = r.stdout.splitlines()
    return dict(zip(names, got)) if r.returncode == 0 and len(got) == len(names) else {n: n for n in names}


PRECISIONS = ("fp32", "fp16", "bf16", "int8", "fp8")  # core/quant.h's enum Precision, in order


def short(name):
    name = re.sub(r"^void ", "", name)
    name = name.replace("ip::cuda::detail::", "").replace("ip::cuda::", "")
    name = re.sub(r"\(ip::Precision\)(\d)", lambda m: PRECISIONS[int(m.group(1))], name)
    return re.sub(r"\([^()]*\)$", "", name)  # the parameter list (no kernel here is overloaded)


def load(build_dir):
    pattern = os.path.join(build_dir, "kernels", "CMakeFiles", "indexpool_kernels.dir", "*.o.resources.txt")
    files = sorted(glob.glob(pattern))
    rows = [k for f in files for k in parse(f)]
    names = demangle(sorted({k["mangled"] for k in rows}))
    for k in rows:
        k["name"] = short(names[k["mangled"]])
    rows.sort(key=lambda k: (k["source"], k["name"], k["arch"]))
    return files, rows


def read_allowed(path):
    """One line `architectures sm_NN ...` (those the file judges), then lines `sm_NN <kernel as this
    script prints it>  # why` and `min-warps sm_NN <kernel> <warps>  # why`; blank lines and # comments
    ignored. Returns (architectures, spill entries, floor entries)."""
    allowed, floors, judged = [], [], None
    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            text = line.split("#", 1)[0].strip()
            if not text:
                continue
            if text.startswith("architectures"):
                judged = set(text.split()[1:])
                if not judged or not all(re.fullmatch(r"sm_\d+a?", x) for x in judged):
                    sys.exit(f"{path}:{no}: expected 'architectures sm_NN ...', got: {line.rstrip()}")
                continue
            floor = text.startswith("min-warps ")
            if floor:
                m = re.fullmatch(r"min-warps\s+(sm_\d+a?)\s+(.+?)\s+(\d+)", text)
                if not m:
                    sys.exit(f"{path}:{no}: expected 'min-warps sm_NN <kernel> <warps>  # why', got: {line.rstrip()}")
                arch, name, warps = m.group(1), m.group(2), int(m.group(3))
            else:
                arch, _, name = text.partition(" ")
            if not re.fullmatch(r"sm_\d+a?", arch) or not name.strip():
                sys.exit(f"{path}:{no}: expected 'sm_NN <kernel>  # why', got: {line.rstrip()}")
            if "#" not in line:
                sys.exit(f"{path}:{no}: say why after a '#'")
            if judged is None or arch not in judged:
                sys.exit(f"{path}:{no}: {arch} is not in the file's 'architectures' line, which must come first")
            if floor:
                floors.append((path, no, arch, name.strip(), warps))
            else:
                allowed.append((path, no, arch, name.strip()))
    if judged is None:
        sys.exit(f"{path}: no 'architectures sm_NN ...' line (the architectures whose spills it judges)")
    return judged, allowed, floors


def table(rows):
    head = ("source", "arch", "kernel", "regs", "warps/SM", "stack B", "spill st B", "spill ld B", "smem B")
    body = [(k["source"], k["arch"], k["name"], str(k["regs"]), str(warps_by_registers(k["regs"])), str(k["stack"]),
             str(k["spill_st"]), str(k["spill_ld"]), str(k["smem"])) for k in rows]
    width = [max(len(r[i]) for r in [head] + body) for i in range(len(head))]
    lines = []
    for r in [head] + body:
        cells = [r[i].ljust(width[i]) if i < 3 else r[i].rjust(width[i]) for i in range(len(r))]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends the table quietly
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("build_dir", help="the CMake build directory (holds kernels/CMakeFiles/indexpool_kernels.dir)")
    ap.add_argument("--spills", action="store_true", help="list only the kernels that spill registers")
    ap.add_argument("--check", metavar="ALLOWED",
                    help="fail on a spill that ALLOWED does not list (and on stale entries)")
    ap.add_argument("--expect", metavar="A.cu,B.cu", default="",
                    help="with --check: the CUDA sources that must have a report")
    a = ap.parse_args()
    files, rows = load(a.build_dir)
    if not files:
        sys.exit(f"kernel_resources: no *.o.resources.txt under {a.build_dir}/kernels/CMakeFiles/indexpool_kernels.dir "
                 "(a build with CUDA makes them; rebuild the kernels library if it predates cmake/ptxas_resources.sh)")
    spilling = [k for k in rows if k["spill_st"] or k["spill_ld"]]
    shown = spilling if a.spills else rows
    archs = sorted({k["arch"] for k in rows})
    print(f"# {len(rows)} kernel builds ({len({k['mangled'] for k in rows})} kernels x {', '.join(archs)}) "
          f"from {len(files)} sources; {len(spilling)} spill registers to local memory")
    if shown:
        print(table(shown))
    if not a.check:
        return 0
    problems = []
    have = {os.path.basename(f)[: -len(".o.resources.txt")] for f in files}
    for src in filter(None, a.expect.split(",")):
        if src not in have:
            problems.append(f"{src}: no ptxas report (expected {src}.o.resources.txt beside its object)")
    judged, allowed, floors = read_allowed(a.check)
    # Only the architectures ALLOWED judges, and of those only the ones this build compiled: a build for
    # sm_90 alone (CMAKE_CUDA_ARCHITECTURES=90) or for another device passes on what it cannot judge.
    checked = judged & set(archs)
    unchecked = sorted(set(archs) - checked)
    if unchecked:
        print(f"note: {a.check} does not judge {', '.join(unchecked)}; spills there are shown, not judged")
    allowed = [e for e in allowed if e[2] in checked]
    used = set()
    for k in (k for k in spilling if k["arch"] in checked):
        hit = [e for e in allowed if e[2] == k["arch"] and e[3] == k["name"]]
        if hit:
            used.update((e[0], e[1]) for e in hit)
        else:
            problems.append(f"{k['arch']} {k['name']} ({k['source']}): spills {k['spill_st']} B stores, "
                            f"{k['spill_ld']} B loads with {k['regs']} registers, and {a.check} does not allow it")
    for path, no, arch, name in allowed:
        if (path, no) not in used:
            problems.append(f"{path}:{no}: '{arch} {name}' matches no spilling kernel any more: remove the entry")
    floors = [e for e in floors if e[2] in checked]
    for path, no, arch, name, warps in floors:
        hit = [k for k in rows if k["arch"] == arch and k["name"] == name]
        if not hit:
            problems.append(f"{path}:{no}: 'min-warps {arch} {name}' matches no kernel of this build")
        for k in hit:
            if warps_by_registers(k["regs"]) < warps:
                problems.append(f"{path}:{no}: {arch} {name} ({k['source']}) takes {k['regs']} registers, so an SM "
                                f"holds {warps_by_registers(k['regs'])} of its warps, fewer than {warps}")
    for p in problems:
        print("FAIL: " + p, file=sys.stderr)
    if problems:
        return 1
    print(f"ok: every spill is one of the {len(allowed)} allowed in {a.check}; "
          f"{len(floors)} kernels keep their warps per SM")
    return 0


if __name__ == "__main__":
    sys.exit(main())
