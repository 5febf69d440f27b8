#!/usr/bin/env python3
"""Checks, from the SASS of a build (no GPU needed), that the tensor-core scoring kernel issues all the
row loads of a stage before its first mma.

kernels/score.cuh loads a stage's chunks (16 bytes a thread, row and m-tile) and only then computes. ptxas
(CUDA 13.0, sm_90) issued the second chunk's loads of bf16 and fp8 rows after the first chunk's mma, which
waits for the first chunk's data: two memory round trips a stage instead of one. The kernel now makes the
first mma depend on every load of the stage (kLoadsTogether). This script reads the first stage of each
kernel below from the build's score.cu object (cuobjdump -sass) and counts the global 128-bit loads
(LDG.E.128) before the first HMMA; it fails when fewer than the stage's loads come first.

Needs cuobjdump and nvdisasm (`pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm`, which `make
sass-counts` does in the venv; found as scripts/pool_sass_counts.py finds them).

  scripts/score_load_order.py [--build build] [--arch 90] [--cuobjdump PATH]
Exit status: 0 when every kernel issues its stage's loads first, 1 when one does not, 2 on a usage problem.
"""
import argparse
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pool_sass_counts import ROOT, find_cuobjdump  # noqa: E402

PRECISION = {"fp32": 0, "fp16": 1, "bf16": 2, "int8": 3, "fp8": 4}  # core/quant.h
# (precision, D, NT, loads a thread issues in a stage: chunks x m-tiles x 2 rows)
KERNELS = [("bf16", 128, 1, 8), ("fp8", 128, 1, 8), ("bf16", 128, 2, 8), ("fp8", 128, 2, 8)]


def mangled(prec, d, nt):
    return f"_ZN2ip4cuda6detail16score_mma_kernelILNS_9PrecisionE{PRECISION[prec]}ELi{d}ELi{nt}EEEvNS1_11ScoreParamsE"


def loads_before_first_mma(sass):
    loads = 0
    for line in sass.splitlines():
        if re.search(r"\bHMMA\.", line):
            return loads
        if re.search(r"\bLDG\.E\.128\b", line):
            loads += 1
    return None  # no mma at all


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--arch", default="90")
    ap.add_argument("--cuobjdump", default=None)
    args = ap.parse_args(argv[1:])
    cuobjdump = find_cuobjdump(args.cuobjdump)
    if not cuobjdump:
        print("score_load_order: cuobjdump not found; `pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm` "
              "or pass --cuobjdump PATH", file=sys.stderr)
        return 2
    obj = os.path.join(args.build, "kernels", "CMakeFiles", "indexpool_kernels.dir", "score.cu.o")
    if not os.path.exists(obj):
        print(f"score_load_order: {obj} does not exist (build the kernels first: make build)", file=sys.stderr)
        return 2
    bad = 0
    print(f"sm_{args.arch}, {os.path.relpath(obj, ROOT)}: 128-bit global loads before the first mma")
    for prec, d, nt, want in KERNELS:
        name = f"score_mma_kernel<{prec}, {d}, {nt}>"
        r = subprocess.run([cuobjdump, "-sass", "-arch", f"sm_{args.arch}", "-fun", mangled(prec, d, nt), obj],
                           capture_output=True, text=True)
        got = loads_before_first_mma(r.stdout) if r.returncode == 0 else None
        if got is None:
            print(f"  {name:32} not found in the object (cuobjdump: {r.stderr.strip()[:120]})")
            bad += 1
            continue
        ok = got >= want
        bad += not ok
        print(f"  {name:32} {got} of the stage's {want}  {'ok' if ok else 'FAIL: loads sunk below the mma'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
