#!/usr/bin/env bash
# Runs the README's Nsight command lines (README: Profiling, "Nsight Systems / Nsight Compute") on a machine
# with an NVIDIA GPU and checks what they captured (issue 6: those lines had never run under nsys).
#
# usage: scripts/gpu-nsight-check.sh BUILD_DIR OUT_DIR
#   BUILD_DIR holds experiments/indexpool (a build directory, or the bundle's build/); every report, log and
#   results file goes to OUT_DIR.
#   1. nsys profile --capture-range=cudaProfilerApi --trace=cuda,nvtx -o OUT_DIR/nsight
#        indexpool run configs/nsight.ini --profile
#      then `nsys stats --report nvtx_sum` (older names: nvtxsum, nvtxppsum) on OUT_DIR/nsight.nsys-rep:
#      the IndexPool domain's ranges must include at least one "point <index>: ..." range and pool (sweep
#      is reported, not required: it is pushed before cudaProfilerStart, outside the capture range).
#   2. ncu --nvtx --nvtx-include "IndexPool@pool/" --set full -o OUT_DIR/pool  indexpool run ... --profile
#      then `ncu --import OUT_DIR/pool.ncu-rep --csv --page raw`: at least one kernel, each named *pool*
#      (--set full is left out when the box is under 60 s, and the output says so).
#   3. ncu --nvtx --nvtx-include "IndexPool@score/" --profile-from-start off -o OUT_DIR/score  (same run):
#      at least one kernel, each named *score*.
#   The runner's results go to OUT_DIR/nsight-{nsys,pool,score}.h5 (--overwrite --set output.path=...).
# environment:
#   NSYS=PATH, NCU=PATH    the tools (default: PATH, /usr/local/cuda/bin, then Nsight's own folders)
#   NSIGHT_BOX_S=60        time box of each profiled run (and of each report query) in seconds
# Last line: "nsight-check: PASS|FAIL|PARTIAL (reason)". Exit status: 0 PASS; 1 FAIL; 3 PARTIAL (nsys or ncu
# absent, so its lines were not run, and everything that did run passed); 2 on bad arguments.
set -u -o pipefail

if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
  exit 0
fi
(($# == 2)) || { echo "usage: scripts/gpu-nsight-check.sh BUILD_DIR OUT_DIR (see --help)" >&2; exit 2; }
build=$1 out=$2
bin="$build/experiments/indexpool"
[[ -x "$bin" ]] || { echo "gpu-nsight-check: '$bin' is not an executable indexpool" >&2; exit 2; }
mkdir -p "$out" || { echo "gpu-nsight-check: cannot create '$out'" >&2; exit 2; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
config="$here/../configs/nsight.ini"
[[ -f "$config" ]] || { echo "gpu-nsight-check: '$config' not found" >&2; exit 2; }
box=${NSIGHT_BOX_S:-60}

nsys=${NSYS:-$(command -v nsys || true)}
for c in /usr/local/cuda/bin/nsys /usr/local/cuda/nsight-systems-*/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys \
  /opt/nvidia/nsight-systems-cli/*/bin/nsys; do [[ -z "$nsys" && -x "$c" ]] && nsys=$c; done
ncu=${NCU:-$(command -v ncu || true)}
for c in /usr/local/cuda/bin/ncu /usr/local/cuda/nsight-compute-*/ncu /opt/nvidia/nsight-compute/*/ncu; do
  [[ -z "$ncu" && -x "$c" ]] && ncu=$c
done

fails=() absent=() passed=()
why_runner=""
# fail SHORT [DETAIL [RUNNER_NOTE]]: SHORT goes into the last line, with the first runner note of a failed run.
fail() {
  fails+=("$1")
  echo "   FAIL: $1${2:+ ($2)}"
  [[ -z "$why_runner" && -n "${3:-}" ]] && why_runner=$3
  return 0
}

# What the runner said about the capture: points skipped, or no cudaProfilerStart (then nothing is captured).
runner_notes() {
  grep -m1 -oE -- '--profile: no cudaProfilerStart \([^)]*\)' "$1"
  local n; n=$(grep -cE '^\[[0-9]+/[0-9]+\] skipped:' "$1")
  ((n)) && echo "$n points skipped: $(grep -m1 -oE '^\[[0-9]+/[0-9]+\] skipped: .*' "$1" | cut -d' ' -f3- | cut -c1-60)"
}

# ---- 1. Nsight Systems ------------------------------------------------------------------------------
echo "== nsys: README line 1 (timeline: CUDA API, kernels, NVTX; box ${box}s)"
if [[ -z "$nsys" || ! -x "$nsys" ]]; then
  echo "nsys: not found on this machine (README line not run)"
  absent+=("nsys not found")
else
  echo "   $nsys ($("$nsys" --version 2>&1 | head -1))"
  rm -f "$out/nsight.nsys-rep" "$out/nsight.qdrep" "$out/nsight.sqlite" "$out/nsight.qdstrm"
  timeout -k 10 "$box" "$nsys" profile --capture-range=cudaProfilerApi --trace=cuda,nvtx -o "$out/nsight" \
    "$bin" run "$config" --profile --overwrite --set output.path="$out/nsight-nsys.h5" >"$out/nsys.log" 2>&1
  rc=$?
  grep -E '^ *(ERROR|Error|WARNING|Warning)\b' "$out/nsys.log" | sort | uniq -c | head -5
  note=$(runner_notes "$out/nsys.log" | paste -sd '#' - | sed 's/#/; /g')
  [[ -n "$note" ]] && echo "   runner: $note"
  rep=$(ls "$out"/nsight.nsys-rep "$out"/nsight.qdrep 2>/dev/null | head -1)
  if ((rc == 124 || rc == 137)); then
    fail "nsys: timed out after ${box}s" "see nsys.log" "$note"
  elif [[ -z "$rep" ]]; then
    fail "nsys: no report (exit $rc)" "see nsys.log" "$note"
  else
    # The report's name changed: nvtx_sum (2023 on), nvtxsum, nvtxppsum (push/pop only, 2021).
    used=""
    for r in nvtx_sum nvtxsum nvtxppsum; do
      timeout "$box" "$nsys" stats --report "$r" --format csv "$rep" >"$out/nsight_nvtx.csv" 2>"$out/nsight_stats.err"
      src=$?
      if ((src == 0)) && ! grep -qiE 'could not be found|unknown report|not a valid report' \
        "$out/nsight_nvtx.csv" "$out/nsight_stats.err"; then used=$r; break; fi
    done
    if [[ -z "$used" ]]; then
      fail "nsys stats: none of nvtx_sum, nvtxsum, nvtxppsum ran" "$(head -c 100 "$out/nsight_stats.err" | tr '\n' ' ')"
    else
      echo "   nsys stats --report $used (head; all in nsight_nvtx.csv):"
      grep -vE '^(Processing \[|Generating |$)' "$out/nsight_nvtx.csv" | head -14 | cut -c1-116 | sed 's/^/     /'
      # Rows: the header names Instances and ends with Range (the name may hold commas, the numbers do not).
      awk -F, 'inst == 0 { for (i = 1; i <= NF; ++i) if ($i ~ /Instances/) inst = i; if (inst) rc_ = NF; next }
        { r = $rc_; for (i = rc_ + 1; i <= NF; ++i) r = r "," $i; gsub(/^"|"$/, "", r); print $inst "\t" r }' \
        "$out/nsight_nvtx.csv" >"$out/nsight_nvtx.tsv"
      ranges=$(grep -c $'\tIndexPool:' "$out/nsight_nvtx.tsv")
      inst() { awk -F'\t' -v re="$1" '$2 ~ re { n += $1 } END { print n + 0 }' "$out/nsight_nvtx.tsv"; }
      n_sweep=$(inst '^IndexPool:sweep$') n_pool=$(inst '^IndexPool:pool$') n_score=$(inst '^IndexPool:score$')
      n_point=$(grep -cE $'\tIndexPool:point [0-9]+:' "$out/nsight_nvtx.tsv")
      points=$(grep -m1 -oE '^[0-9]+ points in' "$out/nsys.log" | grep -oE '^[0-9]+')
      echo "   IndexPool ranges: $ranges names; sweep x$n_sweep, point ranges $n_point" \
        "(the run had ${points:-?} points), pool x$n_pool, score x$n_score"
      miss=()
      ((n_point > 0)) || miss+=(point)
      ((n_pool > 0)) || miss+=(pool)
      if ((${#miss[@]} == 0)); then
        passed+=("nsys: $n_point point, ${n_pool} pool ranges (sweep x$n_sweep)")
        [[ -n "$points" && "$points" != "$n_point" ]] && echo "   note: $n_point point ranges for $points points"
      else
        why=""
        ((ranges == 0)) && grep -qE $'\t(sweep|pool)$' "$out/nsight_nvtx.tsv" &&
          why+="the names are there without the IndexPool: prefix: this nsys shows no domain; "
        grep -q 'does not contain' "$out/nsight_nvtx.csv" "$out/nsight_stats.err" &&
          why+="no NVTX data in the report; "
        fail "nsys: IndexPool ranges missing: ${miss[*]}" "${why%; }" "$( ((ranges == 0)) && echo "$note")"
      fi
    fi
  fi
fi

# ---- 2, 3. Nsight Compute ---------------------------------------------------------------------------
# One README ncu line: NAME STAGE [extra ncu flags...]; checks that kernels were profiled, all of STAGE.
ncu_line() {
  local name=$1 stage=$2 rc n
  shift 2
  rm -f "$out/$name.ncu-rep"
  timeout -k 10 "$box" "$ncu" --nvtx --nvtx-include "IndexPool@$stage/" "$@" -o "$out/$name" \
    "$bin" run "$config" --profile --overwrite --set output.path="$out/nsight-$name.h5" >"$out/ncu-$name.log" 2>&1
  rc=$?
  grep -E '==ERROR==|==WARNING==' "$out/ncu-$name.log" | sort | uniq -c | head -5
  local note; note=$(runner_notes "$out/ncu-$name.log" | paste -sd '#' - | sed 's/#/; /g')
  [[ -n "$note" ]] && echo "   runner: $note"
  if ((rc == 124 || rc == 137)); then fail "ncu $stage: timed out after ${box}s" "see ncu-$name.log" "$note"; return; fi
  if [[ ! -f "$out/$name.ncu-rep" ]]; then
    fail "ncu $stage: no report (exit $rc)" "see ncu-$name.log" "$note"
    return
  fi
  timeout "$box" "$ncu" --import "$out/$name.ncu-rep" --csv --page raw >"$out/ncu-$name.csv" 2>"$out/ncu-$name.err"
  # Launches per kernel (template arguments kept, parameters dropped: ncu_csv_summary.kernel_key); a kernel
  # whose function name lacks the stage's name is outside the stage. Exit 0 ok, 1 no launch, 4 outside.
  python3 - "$here" "$out/ncu-$name.csv" "$stage" <<'PY' | tee "$out/ncu-$name.kernels.txt"
import csv, sys
from collections import Counter
sys.path.insert(0, sys.argv[1])
from ncu_csv_summary import kernel_key
path, stage = sys.argv[2], sys.argv[3]
with open(path, newline="") as f:
    rows = list(csv.reader(f))
start = next((i for i, r in enumerate(rows) if r and r[0] == "ID"), None)
col = rows[start].index("Kernel Name") if start is not None and "Kernel Name" in rows[start] else None
names = Counter() if col is None else Counter(kernel_key(r[col]) for r in rows[start + 2:] if len(r) > col)
foreign = [k for k in names if stage not in k.split("<")[0].split("::")[-1].lower()]
print(f"   {sum(names.values())} launches of {len(names)} kernels ({len(foreign)} outside the {stage} stage)")
for k, n in names.most_common():
    print(f"   {n:4d}  {k[:100]}{'  <- not a ' + stage + ' kernel' if k in foreign else ''}")
sys.exit(4 if foreign else 0 if names else 1)
PY
  rc=$?
  n=$(sed -n 's/^ *\([0-9]*\) launches of.*/\1/p' "$out/ncu-$name.kernels.txt" | head -1)
  if ((rc == 0)); then passed+=("ncu $stage: ${n} kernels")
  elif ((rc == 4)); then fail "ncu $stage: kernels outside the stage profiled" "see ncu-$name.kernels.txt"
  elif [[ -n "$n" ]]; then fail "ncu $stage: no kernel profiled" "" "$note"
  else fail "ncu $stage: could not read the report" "python3 exit $rc; see ncu-$name.err"
  fi
}

echo "== ncu: README lines 2 and 3 (kernels of the pool and score stages; box ${box}s each)"
if [[ -z "$ncu" || ! -x "$ncu" ]]; then
  echo "ncu: not found on this machine (README lines not run)"
  absent+=("ncu not found")
elif ! command -v python3 >/dev/null; then
  fail "ncu: python3 is needed to read the reports' CSV"
else
  echo "   $ncu ($("$ncu" --version 2>&1 | tail -1))"
  full=(--set full)
  if ((box < 60)); then
    full=()
    echo "   --set full left out of line 2: the ${box}s box is too short for its passes (38 per kernel on an H200)"
  fi
  echo "-- ncu --nvtx --nvtx-include \"IndexPool@pool/\"${full[*]:+ ${full[*]}} (on an H200, 2026-12-04: 5 kernels)"
  ncu_line pool pool "${full[@]}"
  echo "-- ncu --nvtx --nvtx-include \"IndexPool@score/\" --profile-from-start off (2026-12-04: 8 kernels)"
  ncu_line score score --profile-from-start off
fi

# ---- verdict ----------------------------------------------------------------------------------------
join() { local s="" x; for x in "$@"; do s+="${s:+; }$x"; done; echo "$s"; }
if ((${#fails[@]})); then
  echo "nsight-check: FAIL ($(join "${fails[@]}" "${absent[@]}")${why_runner:+; runner: ${why_runner%%; *}})"
  exit 1
elif ((${#absent[@]})); then
  echo "nsight-check: PARTIAL ($(join "${absent[@]}")${passed[*]:+; passed: $(join "${passed[@]}")})"
  exit 3
fi
echo "nsight-check: PASS ($(join "${passed[@]}"))"
exit 0
