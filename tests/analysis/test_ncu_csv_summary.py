"""Tests of scripts/ncu_csv_summary.py on a raw-page CSV shaped like the one Nsight Compute 2025.3 wrote on
an H200 (2026-12-04): ID and launch columns, two NVTX columns, the kernel name with its parameter list,
a row of units, then one row per launch."""
import csv
import io
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import ncu_csv_summary  # noqa: E402

HEADER = ["ID", "Process ID", "Process Name", "Host Name",
          "thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg",
          "Id:Domain:Start/Stop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg", "Kernel Name", "Context",
          "Stream", "Block Size", "Grid Size", "Device", "CC", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
          "gpu__time_duration.sum"]
UNITS = [""] * 13 + ["%", "us"]


def launch(i, name, pct, us):
    return [str(i), "2014", "kernel_bench", "127.0.0.1", '2014  "IndexPool:pool"', "", name, "1", "7",
            "(256, 1, 1)", "(132, 1, 1)", "0", "9.0", pct, us]


def write(tmp_path, rows, preamble=()):
    path = tmp_path / "ncu.csv"
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_ALL)
    for line in preamble:
        buf.write(line + "\n")
    w.writerow(HEADER)
    w.writerow(UNITS)
    for r in rows:
        w.writerow(r)
    path.write_text(buf.getvalue())
    return str(path)


def test_kernel_key_drops_parameters_keeps_template_arguments():
    assert ncu_csv_summary.kernel_key("void ip::topk_hist_kernel<0>(ip::TopkParams)") == "ip::topk_hist_kernel<0>"
    assert ncu_csv_summary.kernel_key("f<(int)1, g<2>>(int, float*)") == "f<(int)1, g<2>>"
    assert ncu_csv_summary.kernel_key("plain") == "plain"


def test_groups_launches_by_kernel_with_totals_means_and_units(tmp_path):
    path = write(tmp_path, [launch(0, "void a<1>(P)", "10", "2"), launch(1, "void b(P)", "80", "5"),
                            launch(2, "void a<1>(P)", "30", "4")], preamble=["==PROF== Connected"])
    out = io.StringIO()
    assert ncu_csv_summary.summarise(path, out) == 0
    text = out.getvalue()
    assert "3 launches of 2 kernels" in text
    dram = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
    assert f"a<1>: 2 launches; duration total 6 us, mean 3 us; {dram} 20 %" in text
    assert f"b: 1 launch; duration total 5 us, mean 5 us; {dram} 80 %" in text
    assert "Domain" not in text  # the NVTX columns are not metrics


def test_a_file_without_launches_fails(tmp_path):
    out = io.StringIO()
    assert ncu_csv_summary.summarise(write(tmp_path, []), out) == 1
    assert "no launch rows" in out.getvalue()
