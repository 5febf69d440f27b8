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
