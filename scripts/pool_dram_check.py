"""The DRAM bytes CUPTI measured for the pool stage against the bytes pooling is declared to move.

usage: pool_dram_check.py RESULTS.h5 [--dim 128] [--key-bytes 4] [--tolerance 0.05]

Step 2 of scripts/gpu-profile-check.sh (issue 6): for every point of a results file written with
profile.counters = on, the pool stage's dram__bytes_read.sum + dram__bytes_write.sum must be within
the tolerance of calls x (keys read + index written), keys = tokens x dim x key bytes (fp32 keys: 4),
index = index_bytes_per_token x tokens (bench/indexpool_bench.cc declares the same). Prints one line
per point with the ratio; exit status 0 when every point has counters and is within the tolerance.
Tested without a GPU by tests/experiments (experiments.PoolDramCheck.*) on files the results writer makes.
"""
import argparse
import sys

import h5py


def text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results")
    ap.add_argument("--dim", type=int, default=128, help="key dimension of the workload (default 128)")
    ap.add_argument("--key-bytes", type=float, default=4.0, help="bytes per key element read (fp32: 4)")
    ap.add_argument("--tolerance", type=float, default=0.05, help="allowed |measured/declared - 1| (0.05)")
    a = ap.parse_args()
    ok = True
    with h5py.File(a.results, "r") as f:
        rows = f["points"][:]
        if len(rows) == 0:
            print("   no points in the results file")
            return 1
        for row in rows:
            g = f["point_%06d" % row["index"]]
            key = text(row["key"])
            status = text(g.attrs.get("status", b"?"))
            cs = text(g.attrs.get("counters_status", b""))
            if status != "ok" or cs != "ok" or "counters" not in g:
                why = text(g.attrs.get("reason", b"")) or text(g.attrs.get("counters_reason", b""))
                print(f"   {key}: no counters ({status}/{cs}): {why}")
                ok = False
                continue
            pool = {text(r["metric"]): (float(r["value"]), int(r["calls"]))
                    for r in g["counters"][:] if text(r["stage"]) == "pool"}
            missing = [m for m in ("dram__bytes_read.sum", "dram__bytes_write.sum") if m not in pool]
            if missing:
                print(f"   {key}: the pool stage has no {', '.join(missing)} (metrics: {sorted(pool)})")
                ok = False
                continue
            read, calls = pool["dram__bytes_read.sum"]
            written, _ = pool["dram__bytes_write.sum"]
            tokens = float(row["tokens"])
            keys = tokens * a.dim * a.key_bytes
            index = float(row["index_bytes_per_token"]) * tokens
            declared = calls * (keys + index)
            measured = read + written
            ratio = measured / declared if declared > 0 else float("nan")
            print(f"   {key}: pool calls {calls}, DRAM read {read / 2**20:.1f} MiB + written {written / 2**20:.1f} MiB "
                  f"= {measured / 2**20:.1f} MiB vs declared {declared / 2**20:.1f} MiB: ratio {ratio:.3f}")
            if not abs(ratio - 1) <= a.tolerance:
                print(f"   FAIL: outside +-{a.tolerance:.0%}")
                ok = False
            if "kernels" in g and len(g["kernels"]):
                ks = g["kernels"][:]
                print(f"   {len(ks)} kernel records, first: {text(ks[0]['name'])[:80]}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
