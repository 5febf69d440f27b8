"""Tests of `python -m analysis kernels` (analysis/kernels.py) on the H200 kernel_bench runs kept in
bench/device-runs/, and on files derived from them (a smoke run, a run without variants, bad files)."""
import copy
import json
import os
import re
import sys

import pytest
from matplotlib.image import imread

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from analysis import kernels  # noqa: E402
from analysis.__main__ import main  # noqa: E402

RUNS = os.path.join(ROOT, "bench", "device-runs")
FILES = [os.path.join(RUNS, f"2026-12-04-h200-{c}-kernel_bench.json")
         for c in ("0c4cd99", "dd56e79", "89f1884", "98b2918", "7432f91")]
NEWEST = FILES[-1]


def write_json(path, data):
    with open(path, "w") as f:
        json.dump(data, f)
    return str(path)


def test_target_ratios_agree_with_kernel_bench_verdicts():
    # Each numeric target parsed here must give "met" exactly where kernel_bench said so: a target string
    # read wrong (a term missed, the wrong field, the inverse of a time) shows as a disagreement.
    checked = 0
    for path in FILES:
        run = kernels.Run(path)
        for c in run.cases:
            if not kernels.judged(c):
                continue
            r = kernels.target_ratio(c)
            if r is None:
                assert c["target"].startswith("B=1024"), c  # the decode step: ran or not
                continue
            assert (r >= 1) == (c["verdict"] == "met"), (path, c["name"], c["params"], c["target"], r)
            checked += 1
    assert checked == 5 * 47  # 48 judged cases a run, one of them without a numeric target


def test_ratio_of_each_kind_of_target():
    c = {"median_ms": 0.12, "frac_of_copy": 0.6, "tokens_per_s": 250e6, "speedup_vs_exact": 1.8}
    assert kernels.target_ratio(dict(c, target=">=75% copy")) == pytest.approx(0.8)
    assert kernels.target_ratio(dict(c, target="<=60 us")) == pytest.approx(0.5)
    assert kernels.target_ratio(dict(c, target=">=3.6x exact")) == pytest.approx(0.5)
    # two terms: the one that binds
    assert kernels.target_ratio(dict(c, target=">=85% copy, >=100 Mtok/s")) == pytest.approx(0.6 / 0.85)
    assert kernels.target_ratio(dict(c, target=">=50% copy, >=100 Mtok/s")) == pytest.approx(1.2)
    assert kernels.target_ratio(dict(c, tokens_per_s=50e6, target=">=50% copy, >=100 Mtok/s")) == pytest.approx(0.5)
    assert kernels.target_ratio(dict(c, target="B=1024 x 32Ki, one step")) is None
    assert kernels.target_ratio(dict(c, target=">=50% copy, something else")) is None


def test_cli_writes_the_figures_and_the_table(tmp_path, capsys):
    out = tmp_path / "k"
    assert main(["kernels", *FILES, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    for name in ("kernels_targets", "kernels_copy", "kernels_variants"):
        for ext in ("png", "pdf"):
            p = out / f"{name}.{ext}"
            assert p.stat().st_size > 1000, p
        assert imread(str(out / f"{name}.png")).shape[0] > 300
    assert "3 figures and kernels.md" in printed
    md = (out / "kernels.md").read_text()
    # one row per run in the provenance table, with its commit, timing and the targets it met
    assert md.count("not recorded (kernel_bench before 2026-12-05)") == 5
    for f, git, timing, met in (("0c4cd99", "0c4cd9948f7b", "unqueued", "12 of 48"),
                                ("7432f91", "7432f91cb604-dirty", "queued", "13 of 48")):
        row = next(line for line in md.splitlines() if f"2026-12-04-h200-{f}-kernel_bench.json" in line)
        assert f"| {git} |" in row and f"| {timing} |" in row and row.endswith(f"| {met} |")
    # cases as the file counts them: the timed ones and the untimed (decode | setup, runs 0) beside them
    newest = json.load(open(NEWEST))
    timed = sum(c.get("runs", 0) > 0 for c in newest["cases"])
    row = next(line for line in md.splitlines() if "2026-12-04-h200-7432f91-kernel_bench.json" in line)
    assert f"| {timed} (+{len(newest['cases']) - timed} untimed) |" in row, row
    assert timed + 1 == len(newest["cases"]) == newest["summary"]["cases"]
    judged_rows = md.split("## Judged cases")[1].split("## Variants")[0]
    rows = [line for line in judged_rows.splitlines() if line.startswith("| ") and not line.startswith("| case")]
    assert len(rows) == 48
    one_mi = next(line for line in rows if line.startswith("| topk: top-2048 | 1 row of 1Mi |"))
    assert one_mi.count("not met") == 5 and "<=60 us" in one_mi
    # 68.3 us in the newest run (DEVICE_RUNS.md): 60 / 68.3
    assert re.search(r"68\.\d us, not met \(0\.87\d?\)", one_mi.split("|")[-2]), one_mi
    variants = md.split("## Variants of the newest run")[1]
    assert variants.count("| topk |") == len(kernels.variant_rows(kernels.Run(NEWEST))) == 6


def test_a_failed_write_leaves_the_old_outputs_whole(tmp_path, capsys, monkeypatch):
    # The disk reports the error only when the data are flushed (fsync: NFS, a full disk with delayed
    # allocation): nothing is replaced, no temporary is left, and the message names the file.
    import errno
    from analysis.common import OutputError
    out = tmp_path / "k"
    assert main(["kernels", *FILES, "--out", str(out)]) == 0
    old = {p.name: p.read_bytes() for p in out.iterdir()}
    assert len(old) == 7
    capsys.readouterr()

    def fsync(fd):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OutputError, match=re.escape(f"cannot write '{out / 'kernels.md'}': {os.strerror(errno.EIO)}")):
        kernels.write_table([kernels.Run(NEWEST)], str(out / "kernels.md"))
    assert main(["kernels", NEWEST, "--out", str(out)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == f"analysis kernels: cannot write '{out / 'kernels_targets.png'}': {os.strerror(errno.EIO)}", err
    assert not any("Traceback" in line for line in err)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == old


def test_a_run_without_variants_skips_that_figure(tmp_path, capsys):
    data = json.load(open(FILES[0]))
    # every case named with a parenthesised variant left out ("compressed (G=4)" has no base: no variant)
    data["cases"] = [c for c in data["cases"] if "(" not in c["name"] or "(G=" in c["name"]]
    data.update(command="build/bench/kernel_bench --json k.json --only pool|score", started="2026-12-05T20:50:00Z")
    f = write_json(tmp_path / "plain.json", data)
    out = tmp_path / "k"
    assert main(["kernels", f, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "skip kernels_variants: plain.json: no variant case" in printed
    assert not (out / "kernels_variants.png").exists() and (out / "kernels_copy.png").exists()
    md = (out / "kernels.md").read_text()
    assert "No variant case with its base case in this run." in md
    # how the run was made (kernel_bench since 2026-12-05), a | escaped in its table cell
    assert "| `build/bench/kernel_bench --json k.json --only pool\\|score` (2026-12-05T20:50:00Z) |" in md


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.update(smoke=True), "is a --smoke run"),
    (lambda d: d.update(shrink=16), "is a --shrink 16 run"),
    (lambda d: d.update(tool="something"), "is not a kernel_bench JSON file"),
    (lambda d: d.update(skipped="no CUDA device"), "is a skipped run"),
    (lambda d: d["cases"][3].pop("median_ms"), "case 3 has no median_ms"),
])
def test_bad_files_are_refused_before_anything_is_written(tmp_path, capsys, mutate, message):
    data = copy.deepcopy(json.load(open(NEWEST)))
    mutate(data)
    bad = write_json(tmp_path / "bad.json", data)
    out = tmp_path / "k"
    assert main(["kernels", NEWEST, bad, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "analysis kernels:" in err and "bad.json" in err and message in err, err
    assert not out.exists()


def test_a_missing_or_broken_file_is_named(tmp_path, capsys):
    broken = tmp_path / "broken.json"
    broken.write_text("{ not json")
    for f in (str(tmp_path / "missing.json"), str(broken)):
        assert main(["kernels", f, "--out", str(tmp_path / "k")]) == 2
        err = capsys.readouterr().err
        assert f"cannot read '{f}'" in err, err
    assert not (tmp_path / "k").exists()


def test_a_stopped_run_says_so(tmp_path, capsys):
    # kernel_bench's hang guard keeps the cases finished before a case that never ended
    data = json.load(open(NEWEST))
    data["cases"] = [c for c in data["cases"] if c["group"] in ("copy", "pool", "score")]
    data["stopped"] = "case 'topk / top-2048 (cluster)' still running after 20 s (--case-timeout 20)"
    f = write_json(tmp_path / "stopped.json", data)
    out = tmp_path / "k"
    assert main(["kernels", f, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "STOPPED EARLY: case 'topk / top-2048 (cluster)' still running" in printed
    md = (out / "kernels.md").read_text()
    assert f"| {len(data['cases'])} (stopped early) |" in md
    assert "topk:" not in md.split("## Judged cases")[1]


def test_runs_are_ordered_oldest_first_whatever_the_order_given(tmp_path, capsys):
    # A shell glob gives the kept runs by name (7432f91 before 89f1884 before dd56e79); the README's table
    # says their order, so the newest run is 7432f91 whatever the arguments' order.
    runs = kernels.load_runs(sorted(FILES))
    assert [r.path for r in runs] == FILES
    assert "ordered oldest first by the table of their README.md" in capsys.readouterr().err
    # Files with start times: ordered by them.
    a, b = json.load(open(FILES[0])), json.load(open(FILES[1]))
    a["started"], b["started"] = "2026-12-05T10:00:00Z", "2026-12-05T09:00:00Z"
    pa, pb = write_json(tmp_path / "a.json", a), write_json(tmp_path / "b.json", b)
    assert [r.path for r in kernels.load_runs([pa, pb])] == [pb, pa]
    # Neither: the order given, said so.
    del b["started"]
    pb = write_json(tmp_path / "b.json", b)
    assert [r.path for r in kernels.load_runs([pa, pb])] == [pa, pb]
    assert "in the order given" in capsys.readouterr().err
