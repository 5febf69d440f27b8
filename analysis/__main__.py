"""python -m analysis {figures,report} RESULTS.h5 [more.h5 ...] --out DIR
   python -m analysis kernels RUN.json [more.json ...] --out DIR"""
import argparse
import os
import sys

from . import schema


def _warn_incomplete(res, command):
    for line in res.incomplete():
        print(f"analysis {command}: warning: {line} (shards missing, or a run stopped early)", file=sys.stderr)


def _figures(args):
    from .common import save
    from .figures import FAMILIES
    from .load import NoData, load

    res = load(args.results)
    _warn_incomplete(res, "figures")
    names = args.only or list(FAMILIES)  # argparse's choices refused unknown ones before any file was read
    made = skipped = 0
    for name in names:
        try:
            fig = FAMILIES[name][0](res)
        except NoData as e:
            print(f"skip {name}: {e}")
            skipped += 1
            continue
        paths = save(fig, args.out, name)
        print(f"wrote {' '.join(paths)}")
        made += 1
    print(f"{made} figures in {args.out}, {skipped} families skipped for lack of data")
    if made == 0:
        return 1
    return 0


def _report(args):
    from .claims import write_report
    from .load import load

    res = load(args.results)
    _warn_incomplete(res, "report")
    rows, paths = write_report(res, args.results, args.out)
    for r in rows:
        print(f"{r.verdict:>14}  {r.claim}: {r.measured}")
    print(f"wrote {' '.join(paths)}")
    return 0


def _kernels(args):
    from .common import save
    from .kernels import FIGURES, load_runs, write_table
    from .load import NoData

    runs = load_runs(args.runs)
    for r in runs:
        print(f"read {r.describe()}")
    made = 0
    for name, (fn, _) in FIGURES.items():
        try:
            fig = fn(runs)
        except NoData as e:
            print(f"skip {name}: {e}")
            continue
        print(f"wrote {' '.join(save(fig, args.out, name))}")
        made += 1
    print(f"wrote {write_table(runs, os.path.join(args.out, 'kernels.md'))}")
    print(f"{made} figures and kernels.md in {args.out}")
    return 0


def main(argv=None):
    from .figures import FAMILIES

    p = argparse.ArgumentParser(
        prog="python -m analysis",
        description="Figures and the claims report from IndexPool results files (HDF5, schema_version "
                    f"{schema.SCHEMA_VERSION}). Several files (shards of one sweep, or different sweeps) are "
                    "read as one table.")
    sub = p.add_subparsers(dest="command", required=True, metavar="{figures,report,kernels}")
    fam = "\n".join(f"  {k:<9} {v[1]}" for k, v in FAMILIES.items())
    f = sub.add_parser("figures", help="write every figure family the results hold data for (PNG and PDF)",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Writes FAMILY.png and FAMILY.pdf into --out for each family below; a family "
                                   "whose data the results lack is skipped with a one-line note naming what is "
                                   "missing. Exit status 1 when no figure could be made.\n\nfamilies:\n" + fam)
    f.add_argument("results", nargs="+", metavar="RESULTS.h5", help="results files (indexpool run / merge)")
    f.add_argument("--out", required=True, metavar="DIR", help="output folder (created)")
    f.add_argument("--only", nargs="+", metavar="FAMILY", choices=list(FAMILIES),
                   help="make only these families (an unknown one is a usage error, status 2)")
    f.set_defaults(func=_figures)
    r = sub.add_parser("report", help="write the claims report (claims.md and claims.html)",
                       description="Checks every quantitative claim of the IndexPool article against the results "
                                   "and writes claims.md and claims.html into --out: claim, article value, measured "
                                   "value, where it came from, verdict and the rule behind it.")
    r.add_argument("results", nargs="+", metavar="RESULTS.h5", help="results files (indexpool run / merge)")
    r.add_argument("--out", required=True, metavar="DIR", help="output folder (created)")
    r.set_defaults(func=_report)
    k = sub.add_parser("kernels", help="figures and a table from kernel_bench JSON files (device runs)",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Reads kernel_bench --json files (put oldest first by their start times, or by "
                                   "their folder's README.md table, else taken as given; e.g. bench/device-runs/*.json, "
                                   "or make kernel-figures) and writes into --out:\n"
                                   "  kernels_targets   every judged case of every run: achieved / required\n"
                                   "  kernels_copy      the newest run: each case as % of copy bandwidth, its "
                                   "target, the copy at its size\n"
                                   "  kernels_variants  the newest run: each A/B variant's speed-up over its base "
                                   "case\n"
                                   "(PNG and PDF each) and kernels.md: the runs, every judged case's median and "
                                   "verdict per run, the newest run's variants. A --smoke run is refused (its "
                                   "times say nothing).")
    k.add_argument("runs", nargs="+", metavar="RUN.json", help="kernel_bench JSON files (any order when they have start times or a README.md row)")
    k.add_argument("--out", required=True, metavar="DIR", help="output folder (created)")
    k.set_defaults(func=_kernels)
    args = p.parse_args(argv)
    from .load import AnalysisError

    try:
        if os.path.exists(args.out) and not os.path.isdir(args.out):
            raise AnalysisError(f"--out {args.out}: exists and is not a directory")
        return args.func(args)
    except AnalysisError as e:
        print(f"analysis {args.command}: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # writing the output (a folder we may not create, a full disk): one line, no traceback
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        print(f"analysis {args.command}: {where}{e.strerror or e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
