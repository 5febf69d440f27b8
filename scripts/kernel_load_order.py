#!/usr/bin/env python3
"""Checks, from the SASS of a build (no GPU needed), that kernels meant to have several loads in flight
issue them before using any.

Two places where ptxas (CUDA 13.0, sm_90) had put a load behind a use of the one before it, turning one
memory round trip into several (found in the SASS, 2026-12-04):
- tensor-core scoring (kernels/score.cuh): of a load stage's 8 16-byte row loads, 4 came after the first
  chunk's mma, which waits for the first 4: two round trips a stage for bf16 and fp8 rows. The kernel now
  makes the first mma depend on every load of the stage (kLoadsTogether). Checked: the LDG.E.128 before
  the first HMMA number the stage's 8.
- top-k's full-row passes (kernels/topk.cuh): of the 8 score loads a thread meant to have in flight, each
  came after the previous score's key conversion (written `i < end ? topk_key(__ldg(s + i)) : 0`, every
  load sat in a branch with its conversion), and in the compacting loop after the previous key's
  shared-memory histogram atomic: a memory round trip per score instead of one per 8. load_keys now
  loads unconditionally (clamped addresses) and makes every conversion depend on all 8 loads. Checked: in
  the sequence of score loads (L: LDG.E.CONSTANT), key conversions (c: the LOP3 with 0x7fffffff that
  topk_key starts with) and histogram atomics (A: ATOMS), each kernel has at least its expected number of
  runs of 8 consecutive loads (one per unrolled loop).
- decode attention's split kernel (kernels/attention.cuh): a tile's K and V rows, loaded by a strided loop
  (load, store to shared memory, next), one round trip per element a thread: 64 a tile at D = Dv = 128.
  attn_load_tile now issues a thread's 16-byte loads before any store. Checked: from the kernel's first
  16-byte constant load (the q staging's, then the tile's) to each following shared-memory store, the
  most 16-byte loads issued without a store between: the tile's (D + Dv) * 32 / 4 / 128 (16 at 128).
- pooling (kernels/pool.cuh, pool_fast.cuh): a bf16-key warp waited for two round trips of request offsets
  (one per group, the second issued after the first had arrived) before its keys' loads. A batch of one
  request now needs no offset load. Checked: (1) on the fast kernel's body compiled on its own with one
  request (D = 128, G = 4; the built kernel's SASS holds the multi-request path too, ahead of the keys in
  program order), no global load before the first key load (the streaming LDG.E.EF); (2) in the built
  kernel, from its first key load, the warp's key loads (8 for two groups of bf16 keys, 4 for fp32) all
  issued before the first use of one. (2) is read from the built kernel because ptxas schedules the
  stand-alone body differently: with the scheme fixed to uniform it unpacked the first bf16 load with
  PRMT before issuing the other seven.
- the cluster top-k (kernels/topk_cluster.cuh, written 2026-12-05 with the lesson above): each loop over
  the row issues its 4 float4 score loads a thread before converting any (the same dependence on all of
  them as load_keys). Checked like the chain's passes: runs of 4 consecutive 16-byte constant loads, one
  per loop over the row (4); the block launch's kernel (the same search, one block a row) likewise.
- CUDA-core scoring (kernels/score.cuh): a step's row loads (and its scale's) go out together, and the
  pipelined kernel issues two steps' before the first step's arithmetic (it alternates two register
  sets; copying one into the other had made ptxas wait for the first step's loads before issuing the
  second's). Checked: the global loads issued before the first instruction that reads a register one of
  them wrote: a step's N rows + scale, twice that for the pipelined kernel.

- decode attention's lanes kernel (kernels/attention.cuh, 2026-12-05): a tile's loads, the lane's key
  slice (D / 16 16-byte loads) and the thread's value dims of the 32 tokens (32 4-byte loads a value dim),
  went out in two groups, some after the first logits' multiply-adds. The first multiply-add now depends
  on every load. Checked: from the first constant (__ldg) load of the kernel, the global loads issued
  before the first use of one: all of the tile's (40 at D = Dv = 128).

Needs cuobjdump and nvdisasm, and nvcc for the pooling check: the project's venv has the first two (analysis/requirements.txt; `make venv`), found as
scripts/pool_sass_counts.py finds them. CTest runs this as kernels.LoadOrder.LoadsGoOutTogether.

  scripts/kernel_load_order.py [--build build] [--arch 90] [--cuobjdump PATH] [--nvcc PATH]
Exit status: 0 when every kernel passes, 1 when one does not, 2 on a usage problem (no build objects), 3
when cuobjdump is not found (CTest reports the test skipped, with this message).
"""
import argparse
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import shutil  # noqa: E402

from pool_sass_counts import ROOT, compile_sass, find_cuobjdump  # noqa: E402

PRECISION = {"fp32": 0, "fp16": 1, "bf16": 2, "int8": 3, "fp8": 4}  # core/quant.h
# (precision, D, NT, loads a thread issues in a stage: chunks x m-tiles x 2 rows)
SCORE_KERNELS = [("bf16", 128, 1, 8), ("fp8", 128, 1, 8), ("bf16", 128, 2, 8), ("fp8", 128, 2, 8)]
# The f16-parts kernel (math f16x2, automatic for fp8 rows since 2026-12-07): the same load stage.
SCORE_F16_KERNELS = [("fp8", 128, 1, 8), ("fp8", 128, 2, 8)]
# top-k kernels with unrolled score loads: (name, mangled, runs of 8 loads expected: one per unrolled loop)
TOPK_UNROLL = 8  # kCompactUnroll
TOPK_KERNELS = [
    ("topk_hist_kernel<0, false, false>", "_ZN2ip4cuda6detail16topk_hist_kernelILi0ELb0ELb0EEEvNS1_10TopkParamsE", 1),
    ("topk_hist_kernel<0, false, true>", "_ZN2ip4cuda6detail16topk_hist_kernelILi0ELb0ELb1EEEvNS1_10TopkParamsE", 1),
    ("topk_hist_kernel<0, true, false>", "_ZN2ip4cuda6detail16topk_hist_kernelILi0ELb1ELb0EEEvNS1_10TopkParamsE", 2),
    ("topk_hist_kernel<1, false, false>", "_ZN2ip4cuda6detail16topk_hist_kernelILi1ELb0ELb0EEEvNS1_10TopkParamsE", 2),
    ("topk_hist_kernel<2, false, false>", "_ZN2ip4cuda6detail16topk_hist_kernelILi2ELb0ELb0EEEvNS1_10TopkParamsE", 2),
    ("topk_gather_kernel", "_ZN2ip4cuda6detail18topk_gather_kernelENS1_10TopkParamsE", 1),
    ("topk_single_kernel", "_ZN2ip4cuda6detail18topk_single_kernelENS1_10TopkParamsE", 6),
]


# The cluster top-k (kernels/topk_cluster.cuh): float4 score loads a thread has in flight
# (kTopkClusterUnroll), and the loops over the row that issue them: passes 0, 1, 2 and the gather (the last
# two read the row only when the chunk's kept list overflowed).
CLUSTER_UNROLL = 4
CLUSTER_KERNELS = [("topk_cluster_kernel", "_ZN2ip4cuda6detail19topk_cluster_kernelENS1_10TopkParamsE", 4),
                   # the same search, one block a row (TopkLaunch::block)
                   ("topk_block_kernel", "_ZN2ip4cuda6detail17topk_block_kernelENS1_10TopkParamsE", 4)]
CLUSTER_LOAD = r"\bLDG\.E\.128\.CONSTANT\b"

# CUDA-core scoring at D = 128: (name, mangled, loads before the first use of one: rows (+ scale) of one
# step, of two for the pipelined kernel)
CORE_KERNELS = [
    (f"score_cuda_core_kernel<{p}, 128, false>",
     f"_ZN2ip4cuda6detail22score_cuda_core_kernelILNS_9PrecisionE{PRECISION[p]}ELi128ELb0EEEvNS1_11ScoreParamsE", n)
    for p, n in (("fp8", 17), ("bf16", 8), ("fp32", 4))
] + [
    (f"score_cuda_core_pipelined_kernel<{p}, 128>",
     f"_ZN2ip4cuda6detail32score_cuda_core_pipelined_kernelILNS_9PrecisionE{PRECISION[p]}ELi128EEEvNS1_11ScoreParamsE", n)
    for p, n in (("fp8", 34), ("bf16", 16), ("fp32", 8))
]


def _regs(reg, width):
    return {f"R{int(reg[1:]) + i}" for i in range(width)}


def _width(opcode):
    return 4 if ".128" in opcode else 2 if (".64" in opcode or ".WIDE" in opcode) else 1


def loads_before_first_use(sass):
    """Global loads issued, in program order, before the first instruction that reads a register one of
    them wrote (which waits for it; a register written again by another instruction no longer counts)."""
    loaded = set()
    n = 0
    for line in sass.splitlines():
        m = re.search(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);", line)
        if not m:
            continue
        op, args = m.group(1), m.group(2)
        operands = [a.strip() for a in args.split(",")] if args.strip() else []
        store = re.match(r"(ST|RED|ATOM)", op) is not None
        dest = None if store or not operands or not re.fullmatch(r"R\d+", operands[0]) else operands[0]
        sources = operands if dest is None else operands[1:]
        for src in sources:
            for reg, wide in re.findall(r"\b(R\d+)(\.64)?\b", src):
                if _regs(reg, 2 if wide else 1) & loaded:
                    return n
        if dest:
            written = _regs(dest, _width(op))
            if op.startswith("LDG"):
                loaded |= written
                n += 1
            else:
                loaded -= written
    return n


# Pooling at kernel_bench's shape: (name, key type, object, mangled built kernel, key loads of a warp).
POOL_KERNELS = [
    ("pool_fast_kernel<128, 4, KeyBF16>", "KeyBF16", "pool_bf16",
     "_ZN2ip4cuda6detail16pool_fast_kernelILi128ELi4ENS1_7KeyBF16EEEvNS0_8PoolArgsE", 8),
    ("pool_fast_kernel<128, 4, KeyF32>", "KeyF32", "pool_f32",
     "_ZN2ip4cuda6detail16pool_fast_kernelILi128ELi4ENS1_6KeyF32EEEvNS0_8PoolArgsE", 4),
]
POOL_SOURCE = """// Generated by scripts/kernel_load_order.py: the fast pooling body for a batch of one request.
#include "kernels/pool.cuh"
namespace ip::cuda::detail {
template <int D, int G, class K>
__global__ void __launch_bounds__(pool_tuning::kFastWarpsPerBlock * 32, (fast_min_blocks<D, G, K>()))
    one_request_kernel(const __grid_constant__ PoolArgs in) {
  PoolArgs a = in;
  a.batch.requests = 1;
  a.scheme = Weighting::uniform;
  a.precision = Precision::bf16;
  a.weights = nullptr;
  a.prev_weights = nullptr;
  a.query_ref = nullptr;
  pool_fast_warp<D, G, K>(a);
}
template __global__ void one_request_kernel<128, 4, KeyBF16>(const __grid_constant__ PoolArgs);
template __global__ void one_request_kernel<128, 4, KeyF32>(const __grid_constant__ PoolArgs);
}  // namespace ip::cuda::detail
"""


def loads_before_first_streaming_load(sass):
    """Global loads before the first streaming (evict-first) one, LDG.E.EF: the keys' loads in pooling."""
    n = 0
    for line in sass.splitlines():
        m = re.search(r"\bLDG(\.[A-Z0-9]+)*\b", line)
        if not m:
            continue
        if ".EF" in m.group(0):
            return n
        n += 1
    return None  # no streaming load


def from_first_streaming_load(sass):
    """The listing from its first streaming load (LDG.E.EF) on ("" when it has none)."""
    lines = sass.splitlines()
    first = next((i for i, line in enumerate(lines) if re.search(r"\bLDG(\.[A-Z0-9]+)*\.EF\b", line)), None)
    return "" if first is None else "\n".join(lines[first:])


def functions(sass):
    """{mangled name: its SASS} of a cuobjdump -sass listing."""
    parts = re.split(r"\n\s+Function : (\S+)\n", "\n" + sass)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


# attention split kernels: (D = Dv, 16-byte loads a thread issues for a tile)
ATTN_KERNELS = [(64, 8), (128, 16), (256, 32)]


# the lanes kernel: (D, Dv, global loads a thread issues for a tile: D / 16 keys + 32 * Dv / 128 values,
# at Dv = 64 32 value loads)
ATTN_LANES_KERNELS = [(64, 64, 36), (128, 128, 40), (128, 256, 72)]


def attn_lanes_mangled(d, dv):
    return f"_ZN2ip4cuda6detail17attn_lanes_kernelILi{d}ELi{dv}EEEvNS1_10AttnParamsE"


def from_first_constant_load(sass):
    """The listing from its first read-only (__ldg) global load, LDG.E*.CONSTANT, on ("" when it has none)."""
    lines = sass.splitlines()
    first = next((i for i, line in enumerate(lines) if re.search(r"\bLDG(\.[A-Z0-9]+)*\.CONSTANT\b", line)), None)
    return "" if first is None else "\n".join(lines[first:])


def attn_mangled(d):
    return f"_ZN2ip4cuda6detail17attn_split_kernelILi{d}ELi{d}EEEvNS1_10AttnParamsE"


def most_loads_between_stores(sass):
    """The most LDG.E.128 in a row with no shared-memory store (STS) between them."""
    best = run = 0
    for line in sass.splitlines():
        if re.search(r"\bLDG\.E\.128", line):
            run += 1
            best = max(best, run)
        elif re.search(r"\bSTS(\.|\b)", line):
            run = 0
    return best


def mangled(prec, d, nt, kernel="score_mma_kernel"):
    return (f"_ZN2ip4cuda6detail{len(kernel)}{kernel}ILNS_9PrecisionE{PRECISION[prec]}ELi{d}ELi{nt}EEEv"
            "NS1_11ScoreParamsE")


def loads_and_uses(sass, load=r"\bLDG\.E\.CONSTANT\b"):
    """The kernel's score loads (L: matching `load`, by default the 4-byte constant loads), key conversions
    (c) and shared atomics (A) in program order."""
    seq = []
    for line in sass.splitlines():
        if re.search(load, line):
            seq.append("L")
        elif re.search(r"\bLOP3\.LUT R\d+, R\d+, 0x7fffffff\b", line):
            seq.append("c")
        elif re.search(r"\bATOMS\.", line):
            seq.append("A")
    return "".join(seq)


def loads_before_first_mma(sass):
    """128-bit global loads between the last block barrier before the first mma and that mma: the load
    stage's, not the query staging's (which lies between barriers)."""
    loads = 0
    for line in sass.splitlines():
        if re.search(r"\bHMMA\.", line):
            return loads
        if re.search(r"\bBAR\.SYNC\b", line):
            loads = 0
        if re.search(r"\bLDG\.E\.128\b", line):
            loads += 1
    return None  # no mma at all


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--arch", default="90")
    ap.add_argument("--cuobjdump", default=None)
    ap.add_argument("--nvcc", default=shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc")
    args = ap.parse_args(argv[1:])
    cuobjdump = find_cuobjdump(args.cuobjdump)
    if not cuobjdump:
        print("kernel_load_order: cuobjdump not found (not on PATH, not in the project's venv: run `make venv`, "
              "or pass --cuobjdump PATH)", file=sys.stderr)
        return 3
    objdir = os.path.join(args.build, "kernels", "CMakeFiles", "indexpool_kernels.dir")
    objs = {k: os.path.join(objdir, f"{k}.cu.o") for k in ("score", "topk", "attention", "pool_bf16", "pool_f32")}
    for o in objs.values():
        if not os.path.exists(o):
            print(f"kernel_load_order: {o} does not exist (build the kernels first: make build)", file=sys.stderr)
            return 2

    def sass(obj, fun):
        r = subprocess.run([cuobjdump, "-sass", "-arch", f"sm_{args.arch}", "-fun", fun, obj],
                           capture_output=True, text=True)
        return r.stdout if r.returncode == 0 and "Function" in r.stdout else None

    def report(name, text, measure, missing="not found in the object"):
        """Prints one kernel's line; measure(text) -> (ok, what was found). 1 when it fails or is missing."""
        if not text:
            print(f"  {name:44} {missing}")
            return 1
        ok, found = measure(text)
        print(f"  {name:44} {found}  {'ok' if ok else 'FAIL'}")
        return 0 if ok else 1

    def at_least(count, want, what):
        return lambda text: (count(text) >= want, f"{count(text)} of {what}")

    bad = 0
    print(f"sm_{args.arch}: score_mma_kernel, 128-bit global loads before the first mma")
    for kernel, kernels in (("score_mma_kernel", SCORE_KERNELS), ("score_mma_f16_kernel", SCORE_F16_KERNELS)):
        for prec, d, nt, want in kernels:
            bad += report(f"{kernel}<{prec}, {d}, {nt}>", sass(objs["score"], mangled(prec, d, nt, kernel)),
                          lambda t, want=want: ((loads_before_first_mma(t) or 0) >= want,
                                                f"{loads_before_first_mma(t)} of the stage's {want}"))
    print(f"sm_{args.arch}: top-k, score loads (L), key conversions (c), histogram atomics (A) in program order")
    for name, fun, want in TOPK_KERNELS:
        def runs(t):
            seq = loads_and_uses(t)
            n = len(re.findall("L{%d,}" % TOPK_UNROLL, seq))
            return n >= want, f"{n} of {want} runs of {TOPK_UNROLL} loads  {seq}"
        bad += report(name, sass(objs["topk"], fun), runs)
    for name, fun, want in CLUSTER_KERNELS:
        def cluster_runs(t, want=want):
            seq = loads_and_uses(t, CLUSTER_LOAD)
            n = len(re.findall("L{%d,}" % CLUSTER_UNROLL, seq))
            return n >= want, f"{n} of {want} runs of {CLUSTER_UNROLL} float4 loads  {seq}"
        bad += report(name, sass(objs["topk"], fun), cluster_runs)
    print(f"sm_{args.arch}: CUDA-core scoring, global loads before the first use of one (a step's rows + scale)")
    for name, fun, want in CORE_KERNELS:
        bad += report(name, sass(objs["score"], fun), at_least(loads_before_first_use, want, want))
    print(f"sm_{args.arch}: pooling: loads before the first key load (one request, the body alone); "
          "key loads before the first use of one (the built kernel)")
    try:
        pool_funcs = functions(compile_sass(POOL_SOURCE, args.nvcc, cuobjdump, args.arch, args.build)[0])
    except (RuntimeError, OSError) as e:
        print(f"  could not compile the pooling body: {e}")
        pool_funcs = {}
        bad += 1
    for name, key, obj, fun, want in POOL_KERNELS:
        alone = next((t for f, t in pool_funcs.items() if "one_request_kernel" in f and key in f), None)
        built = sass(objs[obj], fun)

        def pool(t, alone=alone):
            before = loads_before_first_streaming_load(alone)
            keys = loads_before_first_use(from_first_streaming_load(t))
            return (before == 0 and keys >= want,
                    f"{before} before the keys (one request); {keys} of {want} key loads before a use")
        bad += report(name, built if alone else None, pool,
                      "not found (" + ("the body alone" if not alone else "the built kernel") + ")")
    print(f"sm_{args.arch}: attn_split_kernel, the most 16-byte loads issued with no shared-memory store between")
    for d, want in ATTN_KERNELS:
        bad += report(f"attn_split_kernel<{d}, {d}>", sass(objs["attention"], attn_mangled(d)),
                      at_least(most_loads_between_stores, want, f"a tile's {want}"))
    print(f"sm_{args.arch}: attn_lanes_kernel, a tile's global loads before the first use of one")
    for d, dv, want in ATTN_LANES_KERNELS:
        bad += report(f"attn_lanes_kernel<{d}, {dv}>", sass(objs["attention"], attn_lanes_mangled(d, dv)),
                      lambda t, want=want: (loads_before_first_use(from_first_constant_load(t)) >= want,
                                            f"{loads_before_first_use(from_first_constant_load(t))} of a tile's {want}"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
