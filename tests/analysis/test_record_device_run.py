"""Tests of scripts/record_device_run.py: a gpu-check output folder (or its archive) made from the H200 run
of 7432f91 kept in bench/device-runs/, drafted into a DEVICE_RUNS entry and filed into a copy of
bench/device-runs/."""
import json
import os
import shutil
import sys
import tarfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import record_device_run as rdr  # noqa: E402

RUN = os.path.join(ROOT, "bench", "device-runs", "2026-12-04-h200-7432f91-kernel_bench.json")

SUMMARY = """
step                   status       time  key figures
--------------------------------------------------------------------------------------------
preflight              ok             0s  prebuilt bundle; nvcc 13.0; cmake 4.4; 16 cores; NVIDIA H100 80GB HBM3
bundle                 ok             2s  commit 7432f91cb604, sm_90, made 2026-12-04; sources match
gpu-tests              ok            84s  100 tests, 0 failed, 0 skipped
sanitizer              partial       40s  2 programs: 1 clean, 0 with errors, 1 timed out, 0 not run (time box)
forms: kernel_forms    ok            31s  0 of 16 points skipped; per point in forms_kernel_forms.points.tsv
claims at 1Mi tokens   stopped        0s  stopped by SIGTERM during claims at 1Mi tokens after 168 s; later steps not run

total 169s (budget 420s); output in /tmp/gc
settings: GPU_CHECK_BUDGET_S=420 GPU_CHECK_SANITIZER_S=40; started 2026-12-06T10:00:00Z on dev
gpu-check: passed
"""


def make_gc(tmp_path, device=None):
    gc = tmp_path / "gc"
    gc.mkdir()
    (gc / "summary.txt").write_text(SUMMARY)
    data = json.load(open(RUN))
    data.update(started="2026-12-06T10:02:11Z", command="build/bench/kernel_bench --json /tmp/gc/kernel_bench.json")
    if device:
        data["device"] = device
    (gc / "kernel_bench.json").write_text(json.dumps(data))
    (gc / "nvidia-smi.txt").write_text("name, driver_version\nNVIDIA H100 80GB HBM3, 580.1\n")
    return gc


def fake_root(tmp_path):
    root = tmp_path / "repo"
    runs = root / "bench" / "device-runs"
    runs.mkdir(parents=True)
    shutil.copy(os.path.join(ROOT, "bench", "device-runs", "README.md"), runs / "README.md")
    return root


def test_the_draft_carries_the_runs_figures(tmp_path, capsys):
    gc = make_gc(tmp_path)
    assert rdr.main(["rdr", str(gc)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("### 2026-12-06 — NVIDIA H200 (TO FILL: why this run)")
    assert "GPU_CHECK_BUDGET_S=420 GPU_CHECK_SANITIZER_S=40; started 2026-12-06T10:00:00Z" in out
    assert "total 169s (budget 420s)" in out and "gpu-check: passed" in out
    assert "  - sanitizer partial 40s 2 programs: 1 clean" in out
    assert "  - forms: kernel_forms ok 31s 0 of 16 points skipped" in out
    assert "  - claims at 1Mi tokens stopped 0s stopped by SIGTERM" in out  # a step a signal stopped (exit 124)
    assert "nvidia-smi: name, driver_version NVIDIA H100 80GB HBM3, 580.1" in out
    # the figures DEVICE_RUNS.md quotes for this run
    assert "pooling T=1Mi D=128 G=4 bf16 uniform: 111.1 us, 71.1% of copy" in out
    assert "top-2048: 1 x 1Mi 68.3 us (<= 60 us); 64 x 1Mi 407.9 us (<= 150 us)" in out
    assert "indexer T=1Mi H=64 fp8: compressed 83.1 us vs exact 181.9 us = 2.19x" in out
    assert "decode step B=1024 x 32Ki: 8.232 ms (score 850.5 us, top-k 168.5 us, attention 7.241 ms)" in out
    assert "targets met: 13 of 48; not met by group: pool 9 of 18, score 15 of 18, indexer 9 of 9, topk 2 of 2" in out
    assert "topk top-512 (not chained) | 1 row of 256Ki: 54.1 us -> 58.5 us, 0.92x" in out
    assert "would file it as bench/device-runs/2026-12-06-h200-7432f91-kernel_bench.json" in out


def test_write_files_the_json_and_its_row_once(tmp_path, capsys):
    gc = make_gc(tmp_path, device="NVIDIA H100 80GB HBM3, sm_90, 132 SMs, 79.1 GiB, L2 50.0 MiB")
    archive = tmp_path / "gc.tar.gz"
    with tarfile.open(archive, "w:gz") as t:
        t.add(gc, arcname="gc")
    root = fake_root(tmp_path)
    readme = root / "bench" / "device-runs" / "README.md"
    before = readme.read_text()
    assert rdr.main(["rdr", str(archive), "--write", "--root", str(root)]) == 0
    name = "2026-12-06-h100-7432f91-kernel_bench.json"
    filed = root / "bench" / "device-runs" / name
    assert json.load(open(filed))["started"] == "2026-12-06T10:02:11Z"
    after = readme.read_text()
    row = f"| `{name}` | `scripts/gpu-check.sh` step 7, bundle of 7432f91cb604-dirty, NVIDIA H100 80GB HBM3 (queued timing) | 2026-12-06, 10:02 |"
    assert after == before.rstrip("\n") + "\n" + row + "\n"  # the table is the file's end: the new last row
    capsys.readouterr()
    # a second time: refused, nothing changed
    assert rdr.main(["rdr", str(archive), "--write", "--root", str(root)]) == 2
    assert "exists already: not overwritten" in capsys.readouterr().err
    assert readme.read_text() == after


@pytest.mark.parametrize("setup, message", [
    ("empty", "neither summary.txt nor kernel_bench.json under"),
    ("not json", "cannot read"),
    ("not kernel_bench", "is not a kernel_bench JSON file"),
    ("skipped, --write", "nothing to file in bench/device-runs/: kernel_bench skipped the run (no CUDA device)"),
    ("unsafe archive", "refusing the archive member"),
])
def test_bad_input_is_refused(tmp_path, capsys, setup, message):
    gc = tmp_path / "gc"
    gc.mkdir()
    arg = gc
    extra = []
    if setup == "not json":
        (gc / "kernel_bench.json").write_text("{")
    elif setup == "not kernel_bench":
        (gc / "kernel_bench.json").write_text(json.dumps({"tool": "other", "skipped": "no CUDA device"}))
    elif setup == "skipped, --write":
        (gc / "kernel_bench.json").write_text(json.dumps({"tool": "kernel_bench", "cases": [], "skipped": "no CUDA device"}))
        extra = ["--write", "--root", str(tmp_path / "no-repo")]
    elif setup == "unsafe archive":
        (gc / "x.txt").write_text("x")
        arg = tmp_path / "bad.tar"
        with tarfile.open(arg, "w") as t:
            t.add(gc / "x.txt", arcname="../x.txt")
    assert rdr.main(["rdr", str(arg)] + extra) == 2
    assert message in capsys.readouterr().err


SECOND_CALL = """
step                   status       time  key figures
--------------------------------------------------------------------------------------------
preflight              ok             0s  prebuilt bundle; nvcc 13.0; cmake 4.4; 16 cores; NVIDIA H100 80GB HBM3
bundle                 ok             2s  commit 74d2aa328d83, sm_90, made 2026-12-08; sources match
gpu-tests              skip           0s  GPU_CHECK_TESTS=0 (not asked for)
sanitizer              ok            38s  1 program: 1 clean
kernel-bench           skip           0s  GPU_CHECK_BENCH=0 (not asked for)
ncu                    ok            61s  topk pool: 40 kernels (see ncu_summary.txt)

total 120s (budget 300s); output in /tmp/gc2
settings: GPU_CHECK_BENCH=0 GPU_CHECK_FORMS=1 GPU_CHECK_TESTS=0; started 2026-12-08T10:00:00Z on dev
gpu-check: passed
"""


def test_a_run_without_benchmark_figures_is_drafted_but_not_filed(tmp_path, capsys):
    """The second call of a split check (GPU_CHECK_BENCH=0: sanitizer, ncu, the forms) writes no
    kernel_bench.json; its steps and forms still make a draft, and --write has nothing to file."""
    gc = tmp_path / "gc2"
    gc.mkdir()
    (gc / "summary.txt").write_text(SECOND_CALL)
    (gc / "ncu_summary.txt").write_text("kernels\n")
    (gc / "forms_batched.points.tsv").write_text(
        "index\tkey\tstatus\tscore_ms\ttopk_ms\tattention_ms\tlayer_ms\n"
        "0\tkernels.topk=block\tok\t0.8\t0.05\t0.6\t1.5\n")
    assert rdr.main(["rdr", str(gc)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("### 2026-12-08 — NVIDIA H100 80GB HBM3 (TO FILL: why this run)")
    assert "- commit: 74d2aa328d83; bundle ok 2s commit 74d2aa328d83" in out
    assert "kernel_bench: no figures: no kernel_bench.json: the benchmark step did not run (GPU_CHECK_BENCH=0" in out
    assert "  - ncu ok 61s topk pool: 40 kernels" in out and "  - sanitizer ok 38s 1 program: 1 clean" in out
    assert "- files of the run: forms_batched.points.tsv, ncu_summary.txt, summary.txt" in out
    assert "kernels.topk=block: score 0.800, top-k 0.050, attention 0.600, layer 1.500" in out
    assert "targets met" not in out and "would file it" not in out
    assert "record_device_run: no kernel_bench figures in this run" in out
    root = fake_root(tmp_path)
    readme = root / "bench" / "device-runs" / "README.md"
    before = readme.read_text()
    assert rdr.main(["rdr", str(gc), "--write", "--root", str(root)]) == 2
    assert "nothing to file in bench/device-runs/: no kernel_bench.json" in capsys.readouterr().err
    assert readme.read_text() == before and sorted(os.listdir(readme.parent)) == ["README.md"]


def test_device_tags():
    assert rdr.device_tag("NVIDIA H100 80GB HBM3, sm_90") == "h100"
    assert rdr.device_tag("NVIDIA H200, sm_90, 132 SMs") == "h200"
    assert rdr.device_tag("NVIDIA A100-SXM4-80GB, sm_80") == "a100"
    assert rdr.device_tag("cuemu (CPU emulation)") == "gpu"


def test_the_forms_step_is_summarised(tmp_path, capsys):
    gc = make_gc(tmp_path)
    head = "index\tkey\tpool.weighting\tkernels.topk\tkernels.score_math\tstatus\tscore_ms\ttopk_ms\tattention_ms\tlayer_ms\n"
    rows = [("exact", "chain", "auto", "ok", 0.12, 0.07), ("uniform", "chain", "auto", "ok", 0.02, 0.03),
            ("exact", "cluster", "auto", "ok", 0.12, 0.02), ("uniform", "cluster", "auto", "skipped", 0, 0)]
    (gc / "forms_kernel_forms.points.tsv").write_text(head + "".join(
        f"{i}\tk{i}\t{w}\t{t}\t{m}\t{st}\t{s}\t{k}\t0.5\tnan\n" for i, (w, t, m, st, s, k) in enumerate(rows)))
    (gc / "forms_batched.points.tsv").write_text(
        "index\tkey\tstatus\tscore_ms\ttopk_ms\tattention_ms\tlayer_ms\n"
        "0\tkernels.attention=lanes;kernels.topk=block\tok\t0.8\t0.05\t0.6\t1.5\n")
    assert rdr.main(["rdr", str(gc)]) == 0
    out = capsys.readouterr().out
    assert "kernel_forms.ini (3 points ok)" in out
    # (0.12 + 0.07) / (0.02 + 0.03) = 3.8
    assert "topk=chain score_math=auto: exact 0.190 ms (top-k 0.070), uniform 0.050 ms (top-k 0.030): 3.80x" in out
    assert "topk=cluster score_math=auto: exact 0.140 ms (top-k 0.020), uniform nan ms (top-k nan): -" in out
    assert ("kernels.attention=lanes;kernels.topk=block: score 0.800, top-k 0.050, attention 0.600, layer 1.500"
            in out)
