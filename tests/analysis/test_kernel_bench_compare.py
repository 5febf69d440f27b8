"""Tests of scripts/kernel_bench_compare.py on the two kernel_bench runs of the H200 (2026-12-04) kept in
bench/device-runs/: before (0c4cd99) and after (dd56e79) the hardware fp8 decode."""
import io
import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import kernel_bench_compare as kbc  # noqa: E402

RUNS = os.path.join(ROOT, "bench", "device-runs")
BEFORE = os.path.join(RUNS, "2026-12-04-h200-0c4cd99-kernel_bench.json")
AFTER = os.path.join(RUNS, "2026-12-04-h200-dd56e79-kernel_bench.json")


def test_speedups_of_the_fp8_change():
    out = io.StringIO()
    rows = kbc.compare(kbc.load(BEFORE), kbc.load(AFTER), group="score", out=out)
    by = {(k[1], k[2]): s for k, _, _, s, _ in rows}
    # 123.1 -> 58.9 us (DEVICE_RUNS.md), bf16 unchanged within noise
    assert by[("compressed (G=4)", "T=1Mi D=128 H=64 fp8")] == pytest.approx(123.08 / 58.89, rel=1e-3)
    assert 0.9 < by[("compressed (G=4)", "T=1Mi D=128 H=64 bf16")] < 1.1
    assert all(k[0] == "score" for k, *_ in rows)
    assert "copy 4212 GB/s" in out.getvalue() and "copy 4235 GB/s" in out.getvalue()


def test_min_change_hides_unchanged_cases_and_verdict_changes_are_listed():
    out = io.StringIO()
    rows = kbc.compare(kbc.load(BEFORE), kbc.load(AFTER), min_change=20, out=out)
    assert rows and all(abs(s - 1) >= 0.2 for _, _, _, s, _ in rows)
    assert "verdict score compressed (G=4) T=1Mi D=128 H=1 fp32: not met -> met" in out.getvalue()


def test_bad_files_are_refused(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"tool": "other"}))
    with pytest.raises(SystemExit, match="not a kernel_bench JSON file"):
        kbc.load(str(bad))
    assert kbc.main(["kbc", str(bad), AFTER]) == 2


def test_a_queued_file_is_compared_by_its_runs_from_an_idle_gpu(tmp_path):
    after = json.load(open(AFTER))
    assert "timing" not in after  # written before queued timing: every run from an idle GPU
    queued = dict(after, timing="queued", cases=[])
    for c in after["cases"]:
        # a queued run of the same machine: launch gaps gone from the median, the old figure in sync_median_ms
        queued["cases"].append(dict(c, median_ms=c["median_ms"] / 2, sync_median_ms=c["median_ms"]))
    path = tmp_path / "queued.json"
    path.write_text(json.dumps(queued))
    out = io.StringIO()
    rows = kbc.compare(kbc.load(AFTER), kbc.load(str(path)), group="topk", out=out)
    assert rows and all(s == pytest.approx(1.0) for _, _, _, s, _ in rows)
    assert "timing differs (before unqueued, after queued)" in out.getvalue()
    # two queued files compare their medians
    rows = kbc.compare(kbc.load(str(path)), kbc.load(str(path)), group="topk", out=io.StringIO())
    assert all(tb == ta for _, tb, ta, _, _ in rows)
    # a case whose blocking kernel timed out ("queued": false) is compared by its runs from an idle GPU
    queued["cases"] = [dict(c, queued=False) if c["group"] == "topk" else c for c in queued["cases"]]
    halved = dict(queued, cases=[dict(c, median_ms=c["median_ms"] / 2) for c in queued["cases"]])
    rows = kbc.compare(queued, halved, group="topk", out=io.StringIO())
    assert rows and all(s == pytest.approx(1.0) for _, _, _, s, _ in rows)
    rows = kbc.compare(queued, halved, group="score", out=io.StringIO())
    assert rows and all(s == pytest.approx(2.0) for _, _, _, s, _ in rows)


def test_variants_are_paired_with_their_base_case_in_one_run():
    # The third evening call (7432f91): chained vs plain launches and sampled single rows (DEVICE_RUNS.md:
    # 68.3 vs 72.3 us, 54.1 vs 58.5 us, 162.6 vs 170.1 us; sampling 74.9 and 57.2 us).
    run = kbc.load(os.path.join(RUNS, "2026-12-04-h200-7432f91-kernel_bench.json"))
    out = io.StringIO()
    rows = kbc.variants(run, out=out)
    by = {(name, params): (base, tb, tv, s) for _, name, base, params, tb, tv, s in rows}
    base, tb, tv, s = by[("top-2048 (not chained)", "1 row of 1Mi")]
    assert base == "top-2048" and tb * 1e3 == pytest.approx(68.3, abs=0.05) and tv * 1e3 == pytest.approx(72.3, abs=0.05)
    assert s == pytest.approx(tb / tv) and s < 1
    assert by[("top-512 (not chained)", "1024 rows of 8Ki")][1] * 1e3 == pytest.approx(162.6, abs=0.05)
    assert by[("top-2048 (sampled)", "1 row of 1Mi")][2] * 1e3 == pytest.approx(74.9, abs=0.05)
    # a parenthesized name with no base case of that name is not a variant
    assert not any(name.startswith("compressed") for _, name, *_ in rows)
    assert all(g == "topk" for g, *_ in rows) and len(rows) == 6
    assert kbc.variants(run, group="pool", out=io.StringIO()) == []
    # the summary by variant: (not chained) over its 3 cases, geometric mean of 68.3/72.3, 54.1/58.5, 162.6/170.1
    lines = out.getvalue().splitlines()
    summary = lines[lines.index("by variant (speed-up over its base cases: cases, min .. max, geometric mean):") + 1:]
    assert [l.split()[0] for l in summary] == ["(not", "(sampled)", "(no"]  # fastest mean first
    chained = next(l for l in summary if l.strip().startswith("(not chained)"))
    want = (68.3 / 72.3 * 54.1 / 58.5 * 162.6 / 170.1) ** (1 / 3)
    assert "3 cases" in chained and f"mean {want:5.2f}x" in chained


def test_variants_mode_takes_one_file(capsys):
    one = os.path.join(RUNS, "2026-12-04-h200-7432f91-kernel_bench.json")
    assert kbc.main(["x", "--variants", one, AFTER]) == 2
    assert "one file" in capsys.readouterr().err
    assert kbc.main(["x", one]) == 2
    assert kbc.main(["x", "--variants", one]) == 0


def _case(group, name, params, nbytes, ms, frac=0.5):
    return {"group": group, "name": name, "params": params, "runs": 50, "bytes": nbytes, "median_ms": ms,
            "sync_median_ms": ms, "gbs": nbytes / (ms * 1e-3) / 1e9, "frac_of_copy": frac, "verdict": "-"}


def test_size_copy_reads_cases_against_the_copy_at_their_size():
    # copy kernel at 2 and 8 MB moved: 1000 and 3000 GB/s; a 4 MB case at 2000 GB/s sits at the log midpoint
    copy = [_case("copy", kbc.SIZE_COPY, "1.0 MB each way", 2e6, 2e6 / 1000e9 * 1e3, 0.25),
            _case("copy", kbc.SIZE_COPY, "4.0 MB each way", 8e6, 8e6 / 3000e9 * 1e3, 0.75),
            _case("copy", "float4 copy kernel", "2.15 GB each way", 4e9, 1.0, 0.9)]
    cases = [_case("score", "compressed (G=4)", "T=1Mi D=128 H=1 fp8", 4e6, 4e6 / 2000e9 * 1e3),
             _case("score", "big", "p", 16e6, 16e6 / 1500e9 * 1e3),       # above the largest size: 3000
             _case("topk", "top-2048", "1 row of 1Mi", 1e6, 1e6 / 100e9 * 1e3),  # below the smallest: 1000
             dict(_case("decode", "step", "B=1024", 0, 8.0), frac_of_copy=None)]  # no bandwidth figure
    run = {"tool": "kernel_bench", "git_revision": "x", "device": "d", "copy_gbs": 4000, "cases": copy + cases}
    out = io.StringIO()
    rows = {r[1]: r for r in kbc.size_copy(run, out=out)}
    assert set(rows) == {"compressed (G=4)", "big", "top-2048"}
    assert rows["compressed (G=4)"][5] == pytest.approx(2000) and rows["compressed (G=4)"][6] == pytest.approx(1.0)
    assert rows["big"][5] == pytest.approx(3000) and rows["big"][6] == pytest.approx(0.5)
    assert rows["top-2048"][5] == pytest.approx(1000) and rows["top-2048"][6] == pytest.approx(0.1)
    assert [r[1] for r in kbc.size_copy(run, group="topk", out=io.StringIO())] == ["top-2048"]
    # a run from before the case-sized copy rows
    out = io.StringIO()
    assert kbc.size_copy(kbc.load(AFTER), out=out) == [] and "no 'float4 copy kernel (case-sized)' rows" in out.getvalue()


def test_size_copy_and_variants_take_one_file():
    assert kbc.main(["kbc", "--size-copy", AFTER, AFTER]) == 2
    assert kbc.main(["kbc", "--size-copy", "--variants", AFTER]) == 2
    assert kbc.main(["kbc", "--size-copy", AFTER]) == 0


def test_a_run_stopped_by_its_hang_guard_says_so_in_every_mode(tmp_path):
    after = json.load(open(AFTER))
    why = "case 'topk / top-2048 (cluster) (1 row of 1Mi)' still running after 60.2 s (--case-timeout 60)"
    stopped = dict(after, stopped=why, cases=[c for c in after["cases"] if c["group"] in ("copy", "pool")])
    path = tmp_path / "stopped.json"
    path.write_text(json.dumps(stopped))
    n = len(stopped["cases"])
    for call in (lambda out: kbc.compare(kbc.load(AFTER), kbc.load(str(path)), out=out),
                 lambda out: kbc.variants(kbc.load(str(path)), out=out),
                 lambda out: kbc.size_copy(kbc.load(str(path)), out=out)):
        out = io.StringIO()
        call(out)
        assert f"run stopped early, only its {n} finished cases are here: {why}" in out.getvalue()
    out = io.StringIO()
    kbc.compare(kbc.load(AFTER), kbc.load(AFTER), out=out)
    assert "stopped early" not in out.getvalue()


def test_runs_on_different_devices_are_flagged_and_start_times_shown(tmp_path):
    after = json.load(open(AFTER))
    h100 = dict(after, device=after["device"].replace("NVIDIA H200", "NVIDIA H100 80GB HBM3"),
                started="2026-12-05T19:45:00Z")
    path = tmp_path / "h100.json"
    path.write_text(json.dumps(h100))
    out = io.StringIO()
    kbc.compare(kbc.load(AFTER), kbc.load(str(path)), group="topk", out=out)
    text = out.getvalue()
    assert "DEVICES DIFFER (NVIDIA H200 before, NVIDIA H100 80GB HBM3 after)" in text
    assert "copy 4235 GB/s, started 2026-12-05T19:45:00Z" in text
    # the same device: no warning, and a file without a start time shows none
    out = io.StringIO()
    kbc.compare(kbc.load(BEFORE), kbc.load(AFTER), group="topk", out=out)
    assert "DEVICES DIFFER" not in out.getvalue() and "started" not in out.getvalue()
