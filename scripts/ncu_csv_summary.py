#!/usr/bin/env python3
"""Summarises an Nsight Compute raw-page CSV (`ncu -i REPORT --csv --page raw --metrics ...`) per kernel.

usage: ncu_csv_summary.py FILE.csv

The CSV has a header row, a row of units, then one row per profiled launch. Prints, per kernel name
(template arguments kept, parameter list dropped), the launches, the total and mean duration, and the
mean of every other metric column, with the units of the file. Standard library only (the device image's
Python is enough). Exit status 1 when the file has no launch rows, 2 when it cannot be read (or on a usage error).
"""
import csv
import sys
from collections import OrderedDict

DURATION = "gpu__time_duration.sum"
SKIP = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
        "Grid Size", "Device", "CC"}


def kernel_key(name):
    """The kernel's name without its parameter list: 'void f<1, 2>(int, float*)' -> 'f<1, 2>'."""
    name = name.strip()
    if name.startswith("void "):
        name = name[5:]
    depth = 0
    for i, c in enumerate(name):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "(" and depth == 0:
            return name[:i]
    return name


def to_number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def summarise(path, out=sys.stdout):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    # ncu may print lines before the header (e.g. "==PROF==" notes): the header is the row naming "ID".
    start = next((i for i, r in enumerate(rows) if r and r[0] == "ID"), None)
    if start is None or len(rows) < start + 3:
        print(f"   {path}: no launch rows", file=out)
        return 1
    header, units, data = rows[start], rows[start + 1], rows[start + 2:]
    col = {h: i for i, h in enumerate(header)}
    if "Kernel Name" not in col:
        print(f"   {path}: no 'Kernel Name' column", file=out)
        return 1
    metrics = [h for h in header if h not in SKIP and not h.startswith("thread Domain") and ":" not in h]
    metrics.sort(key=lambda h: h != DURATION)  # the duration first, the others in the file's order
    groups = OrderedDict()
    for r in data:
        if len(r) != len(header):
            continue
        groups.setdefault(kernel_key(r[col["Kernel Name"]]), []).append(r)
    if not groups:
        print(f"   {path}: no launch rows", file=out)
        return 1
    unit = {h: units[col[h]] for h in metrics}
    print(f"   {sum(len(v) for v in groups.values())} launches of {len(groups)} kernels ({path})", file=out)
    for name, rs in groups.items():
        parts = [f"{len(rs)} launch" + ("" if len(rs) == 1 else "es")]
        for m in metrics:
            vals = [v for v in (to_number(r[col[m]]) for r in rs) if v is not None]
            if not vals:
                continue
            mean = sum(vals) / len(vals)
            if m == DURATION:
                parts.append(f"duration total {sum(vals):.4g} {unit[m]}, mean {mean:.4g} {unit[m]}")
            else:
                parts.append(f"{m} {mean:.4g} {unit[m]}".rstrip())
        print(f"   {name}: " + "; ".join(parts), file=out)
    return 0


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) == 2 else 2
    try:
        return summarise(argv[1])
    except OSError as e:  # a missing or unreadable file: one line, status 2 (1 is "no launch rows")
        print(f"ncu_csv_summary: {argv[1]}: {e.strerror}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
