#!/usr/bin/env bash
# Nsight Compute summary of kernel_bench's kernels, for a device session that has to learn where a
# kernel's time goes in one call (kernels/DEVICE_RUNS.md, open questions: top-k, scoring).
#
# usage: scripts/gpu-ncu-summary.sh BUILD_DIR OUT_DIR [GROUP...]     (default groups: topk score)
#   Runs `BUILD_DIR/bench/kernel_bench --only GROUP --runs 1 --warmup 0 --no-hold` under ncu (clocks left
#   alone, kernels matching KERNELS only; one launch of each kernel a case, with no blocking kernel ahead of
#   it: ncu runs one kernel at a time, so a held stream would wait for the blocking kernel's 2 s timeout in
#   every case) and writes OUT_DIR/ncu-GROUP.ncu-rep and OUT_DIR/ncu-GROUP.csv (one row
#   per launch, the metrics below), then prints per kernel: launches, total and mean duration, and the mean
#   of each percentage.
# environment:
#   NCU=PATH               the ncu binary (default: ncu on PATH, /usr/local/cuda/bin/ncu, then Nsight Compute's folder)
#   KERNELS=REGEX          kernels to profile (default: topk|score|pool_fast)
#   NCU_BOX_S=90           time box per group in seconds
# The metric names were checked for GH100 with the CUPTI host API (indexpool run with profile.chip = GH100
# validates them before any point runs); ncu reads the same Perfworks metrics.
# Exit status: 0 when every group produced a report, 1 otherwise, 2 on bad arguments.
set -uo pipefail

if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
  exit 0
fi
(($# >= 2)) || { echo "usage: scripts/gpu-ncu-summary.sh BUILD_DIR OUT_DIR [GROUP...] (see --help)" >&2; exit 2; }
build=$1 out=$2
shift 2
groups=("$@")
((${#groups[@]})) || groups=(topk score)
bench="$build/bench/kernel_bench"
[[ -x "$bench" ]] || { echo "gpu-ncu-summary: '$bench' is not an executable kernel_bench" >&2; exit 2; }
mkdir -p "$out" || { echo "gpu-ncu-summary: cannot create '$out'" >&2; exit 2; }
ncu=${NCU:-$(command -v ncu || true)}
for c in /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu; do [[ -z "$ncu" && -x "$c" ]] && ncu=$c; done
[[ -n "$ncu" && -x "$ncu" ]] || { echo "gpu-ncu-summary: ncu not found (set NCU=PATH)"; exit 1; }
box=${NCU_BOX_S:-90}
kernels=${KERNELS:-topk|score|pool_fast}
metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active
metrics+=,smsp__inst_executed.sum,smsp__sass_inst_executed_op_shared_atom.sum
metrics+=,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_atom.sum
# Global atomics and reductions (a top-k pass adds each block's histogram to the row's with up to 2048 of
# them: kernels/DEVICE_RUNS.md, open questions); names checked for GH100 as above on 2026-12-04.
metrics+=,smsp__sass_inst_executed_op_global_red.sum,smsp__sass_inst_executed_op_global_atom.sum
metrics+=,lts__t_sectors_op_red.sum,lts__t_sectors_op_atom.sum
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
status=0
for g in "${groups[@]}"; do
  echo "== ncu: kernel_bench --only $g (kernels /$kernels/, box ${box}s)"
  rm -f "$out/ncu-$g.ncu-rep"
  timeout "$box" "$ncu" --clock-control none --metrics "$metrics" -k "regex:$kernels" -o "$out/ncu-$g" -f \
    "$bench" --only "$g" --runs 1 --warmup 0 --no-hold >"$out/ncu-$g.log" 2>&1
  rc=$?
  grep -E '==ERROR==|==WARNING==' "$out/ncu-$g.log" | sort | uniq -c | head -5
  if [[ ! -f "$out/ncu-$g.ncu-rep" ]]; then
    echo "   no report (ncu exit $rc; see $out/ncu-$g.log)"
    status=1
    continue
  fi
  ((rc == 124)) && echo "   stopped by the ${box}s box: the report holds the launches profiled until then"
  "$ncu" -i "$out/ncu-$g.ncu-rep" --csv --page raw --metrics "$metrics" >"$out/ncu-$g.csv" 2>"$out/ncu-$g.import.log"
  python3 "$here/ncu_csv_summary.py" "$out/ncu-$g.csv" || status=1
done
exit $status
