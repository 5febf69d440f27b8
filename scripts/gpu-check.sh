#!/usr/bin/env bash
# One-shot device check (issue 5): on a machine with an NVIDIA GPU, in one call and within about 8 minutes
# on one H100/H200,
#   1. checks the tools it needs (fails early, naming what is missing),
#   2. detects the device's architecture (nvidia-smi, else a tiny device query built with nvcc),
#   3. unpacks the prebuilt bundle (.devbundle/indexpool-bundle.tar.xz, made here by
#      scripts/device-bundle.sh: programs plus the libraries the device image lacks) and checks that it
#      was built from the sources beside it; without a bundle, configures a Release build for exactly
#      that architecture in its own directory (needs Eigen, fmt, HDF5, Boost and GoogleTest there),
#   4. without a bundle, builds the GPU tests, the kernel benchmark and indexpool with all cores,
#   5. runs the GPU tests (ctest -L gpu; a test skipped although a device is present counts as a failure),
#   6. runs the GPU test binaries under compute-sanitizer memcheck (time-boxed; large cases filtered out),
#   7. runs the kernel benchmark (table + JSON),
#   8. runs a small sweep with backend = cuda through the runner, and configs/batched.ini at B = 1 and 64,
#   9. the profiling check (scripts/gpu-profile-check.sh: CUPTI counters vs declared bytes),
# and prints a final table (step, status, time, key figures). Everything (logs, JSON, results, and
# kernel_resources.txt: ptxas's registers and spills of the build that ran) goes to the output directory.
# Exit status: 0 when every step passed or was skipped for a stated reason, 1 otherwise, 124 when a
# signal (TERM, INT, HUP: e.g. a `timeout` around it) stopped it: it then stops the running step's
# programs and still writes the table, the step it stopped marked "stopped".
#
# usage: scripts/gpu-check.sh [OUTPUT_DIR]      (default: $OUT, else ./gpu-check-out)
# environment:
#   GPU_ARCH=90                       skip detection, build for this CMAKE_CUDA_ARCHITECTURES value
#   GPU_CHECK_BUNDLE=FILE             the prebuilt bundle (default .devbundle/indexpool-bundle.tar.xz)
#   GPU_CHECK_FROM_SOURCE=1           build from source even when a bundle is there
#   GPU_CHECK_BUILD_DIR=DIR           build directory (default: build-gpu-sm<arch> in the repository)
#   GPU_CHECK_BUDGET_S=480            the whole check's time budget in seconds
#   GPU_CHECK_SANITIZER_S=150         time box of the sanitizer step (0: skip it)
#   GPU_CHECK_SANITIZER_FILTER=...    gtest filter under the sanitizer (default: -*Big*:*Large*:*Huge*:*Stress*:
#                                     *DeviceMemory*, the last because the sanitizer's own device allocations
#                                     change cudaMemGetInfo: 128 KiB more taken on the H200, 2026-12-04)
#   GPU_CHECK_SANITIZER_ONLY=GLOB     test programs under the sanitizer (default gpu_*; e.g. gpu_topk_test)
#   GPU_CHECK_SANITIZER_TOOL=memcheck compute-sanitizer's tool: memcheck, racecheck (shared-memory hazards
#                                     between the threads of a block; the emulator's race check, make
#                                     test-race, is its CPU stand-in), synccheck or initcheck
#   GPU_CHECK_BENCH_ARGS=--quick      extra kernel_bench arguments (the full run is the default)
#   GPU_CHECK_BENCH_REF=FILE          kernel_bench JSON to compare this run with (default: the last file in
#                                     the table of bench/device-runs/README.md, else the last *-kernel_bench.json
#                                     there by name; "none": no comparison)
#   GPU_CHECK_CTEST_JOBS=N            GPU test binaries run in parallel by ctest (default: half the cores, <= 8)
#   GPU_CHECK_CTEST_TIMEOUT_S=180     ctest's --timeout for each GPU test (the longest took 25 s on an H200,
#                                     2026-12-04; lower it when a kernel may never finish, e.g. 90)
#   GPU_CHECK_SANITIZER_JOBS=4        test programs under the sanitizer at once
#   GPU_CHECK_TESTS=0, GPU_CHECK_BENCH=0  skip the GPU tests (step 5), the kernel benchmark (step 7): for a
#                                     second call that adds the sanitizer, ncu or the forms to a first one
#   GPU_CHECK_CLAIMS=1                also run configs/claims_1m.ini on cuda (1Mi tokens, 64 heads, fp8) and
#                                     the claims report on it (python3 with h5py, pandas, matplotlib), and
#                                     configs/hybrid.ini and configs/edge.ini on cuda (issue 7)
#   GPU_CHECK_FORMS=1                 also run configs/kernel_forms.ini on cuda (the top-k and scoring forms of
#                                     [kernels] end to end at 1Mi tokens) and configs/batched.ini at 64
#                                     requests over the attention and top-k forms; per point its stage times
#   GPU_CHECK_NCU=1                   also run scripts/gpu-ncu-summary.sh (Nsight Compute on the top-k and
#                                     score kernels of kernel_bench; about 2 x 60 s at most;
#                                     GPU_CHECK_NCU_GROUPS="topk" for fewer kernel_bench groups, "topk pool"
#                                     for the pooling kernels too)
#   GPU_CHECK_NSIGHT=1                also run scripts/gpu-nsight-check.sh: the README's nsys and ncu command
#                                     lines on configs/nsight.ini --profile, and checks of what they captured
#                                     (IndexPool NVTX ranges; only pool / score kernels); "partial" when nsys or
#                                     ncu is absent; each run boxed by 60 s (30 s and no --set full when under
#                                     300 s are left; NSIGHT_BOX_S=S sets it), the step by 5 boxes
set -u -o pipefail

if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"  # the header comment
  exit 0
fi

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT_DIR=${1:-${OUT:-$PWD/gpu-check-out}}
mkdir -p "$OUT_DIR" || { echo "gpu-check: cannot create the output directory '$OUT_DIR'" >&2; exit 1; }
OUT_DIR=$(cd "$OUT_DIR" && pwd)
LOG="$OUT_DIR/gpu-check.log"
: >"$LOG"
exec 3>&1  # the call's own output, for the table when a signal stops the check (on_signal)
exec > >(tee -a "$LOG") 2>&1
BOXED_PIDS="$OUT_DIR/.boxed-pids"  # the boxes running (boxed()), for on_signal; removed at the end
: >"$BOXED_PIDS"

BUDGET=${GPU_CHECK_BUDGET_S:-480}
SAN_BOX=${GPU_CHECK_SANITIZER_S:-150}
SAN_FILTER=${GPU_CHECK_SANITIZER_FILTER:--*Big*:*Large*:*Huge*:*Stress*:*DeviceMemory*}
JOBS=$(nproc 2>/dev/null || echo 4)
# The GPU tests are mostly CPU-bound (references): half the cores, at most 8 (16 cores on an H200
# machine: the tests took 86 s at -j4 on 2026-12-04, the two largest 25 s each).
CTEST_JOBS=${GPU_CHECK_CTEST_JOBS:-$((JOBS / 2 > 8 ? 8 : (JOBS / 2 < 1 ? 1 : JOBS / 2)))}
SAN_JOBS=${GPU_CHECK_SANITIZER_JOBS:-4}
SAN_TOOL=${GPU_CHECK_SANITIZER_TOOL:-memcheck}
case "$SAN_TOOL" in
  memcheck) SAN_TOOL_ARGS=(--tool memcheck --leak-check no) ;;
  racecheck | synccheck | initcheck) SAN_TOOL_ARGS=(--tool "$SAN_TOOL") ;;
  *) echo "gpu-check: GPU_CHECK_SANITIZER_TOOL=$SAN_TOOL: expected memcheck, racecheck, synccheck or initcheck" >&2
     exit 2 ;;
esac
CTEST_TIMEOUT=${GPU_CHECK_CTEST_TIMEOUT_S:-180}
[[ "$CTEST_TIMEOUT" =~ ^[1-9][0-9]*$ ]] || { echo "gpu-check: GPU_CHECK_CTEST_TIMEOUT_S='$CTEST_TIMEOUT' is not a whole number of seconds > 0" >&2; exit 1; }
START=$(date +%s)
# How this check was asked for (the summary's last lines; scripts/record_device_run.py reads them).
SETTINGS=$(env | grep -E '^(GPU_CHECK_[A-Z_]*|GPU_ARCH|NCU_BOX_S|NSIGHT_BOX_S)=' | LC_ALL=C sort | tr '\n' ' ')
SETTINGS="${SETTINGS% }"
SETTINGS="${SETTINGS:-none (the defaults)}; started $(date -u '+%Y-%m-%dT%H:%M:%SZ') on $(hostname)"

STEP_NAMES=() STEP_STATUS=() STEP_TIMES=() STEP_FIGS=()
record() {
  STEP_NAMES+=("$1"); STEP_STATUS+=("$2"); STEP_TIMES+=("$3"); STEP_FIGS+=("$4")
  CURRENT_T0=$(now)
  CURRENT="between steps (after $1)"
}
now() { date +%s; }
left() { echo $((BUDGET - ($(now) - START))); }
CURRENT="start"  # the step running now (for the table when a signal stops the check)
CURRENT_T0=$(date +%s)  # when it began
say() {
  CURRENT_T0=$(now)
  local step="$*"
  step="${step#*/9 }"  # "5/9 GPU tests (ctest -L gpu)" -> "GPU tests"
  CURRENT="${step%% (*}"
  printf '\n=== gpu-check: %s ===\n' "$*"
}

final_table() {
  local failed=0 i
  rm -f "$BOXED_PIDS"
  for i in "${!STEP_STATUS[@]}"; do [[ "${STEP_STATUS[$i]}" == FAIL || "${STEP_STATUS[$i]}" == stopped ]] && failed=1; done
  {
    printf '\n%-22s %-8s %8s  %s\n' "step" "status" "time" "key figures"
    printf '%s\n' "--------------------------------------------------------------------------------------------"
    for i in "${!STEP_NAMES[@]}"; do
      printf '%-22s %-8s %7ss  %s\n' "${STEP_NAMES[$i]}" "${STEP_STATUS[$i]}" "${STEP_TIMES[$i]}" "${STEP_FIGS[$i]}"
    done
    printf '\ntotal %ss (budget %ss); output in %s\n' "$(($(now) - START))" "$BUDGET" "$OUT_DIR"
    printf 'settings: %s\n' "$SETTINGS"
    if ((failed)); then echo "gpu-check: FAILED"; else echo "gpu-check: passed"; fi
  } | tee "$OUT_DIR/summary.txt"
  return "$failed"
}

# A signal (the device call's wrapper `timeout`, Ctrl-C) stops the check with its table: the programs of
# the step it interrupted are stopped, the step is recorded as stopped, and summary.txt and the logs so far
# are there for the archive that follows. Steps run their boxed programs through boxed(): bash runs a trap
# only once its foreground command has ended, and `timeout` keeps its command in a process group of its
# own, which a signal to ours does not reach.
kill_tree() {  # TERM to a process and all its descendants, the descendants first
  local c
  for c in $(pgrep -P "$1" 2>/dev/null); do kill_tree "$c"; done
  kill -TERM "$1" 2>/dev/null
}
on_signal() {
  trap - TERM INT HUP
  trap '' PIPE
  exec >>"$LOG" 2>&1  # the tee behind stdout had the signal too (it is in our process group)
  local c
  # The boxes first: a box started in a background subshell (the sanitizer step) is no child of ours
  # once the signal has ended that subshell, and `timeout` passes the TERM on to its own process group.
  while read -r c; do kill_tree "$c"; done <"$BOXED_PIDS"
  for c in $(pgrep -P $$ 2>/dev/null) $(jobs -p); do kill_tree "$c"; done
  local name="${CURRENT:0:22}"
  record "$name" stopped $(($(now) - CURRENT_T0)) "stopped by SIG$1 during ${CURRENT} ($(($(now) - START)) s into the check); later steps not run"
  final_table
  cat "$OUT_DIR/summary.txt" >&3 2>/dev/null
  exit 124
}
trap 'on_signal TERM' TERM
trap 'on_signal INT' INT
trap 'on_signal HUP' HUP

# Runs a command (a `timeout` box, the configure step, the bundle's unpacking) in the background and
# waits for it, so that on_signal runs at once; its PID goes to $BOXED_PIDS for on_signal to stop it.
boxed() {
  "$@" &
  local pid=$!
  echo "$pid" >>"$BOXED_PIDS"
  wait "$pid"
}

# Records the remaining steps as not run and exits with the table.
abort() {
  local s
  for s in "$@"; do record "$s" "not run" 0 "an earlier step failed"; done
  final_table
  exit 1
}

# ---- 1. tools and libraries --------------------------------------------------------------------------
say "1/9 preflight"
t0=$(now)
missing=()
for d in "${CUDA_HOME:-}" /usr/local/cuda /usr/cuda; do
  [[ -n "$d" && -x "$d/bin/nvcc" ]] && case ":$PATH:" in *":$d/bin:"*) ;; *) PATH="$PATH:$d/bin" ;; esac
done
export PATH
BUNDLE=${GPU_CHECK_BUNDLE:-$ROOT/.devbundle/indexpool-bundle.tar.xz}
use_bundle=0
[[ "${GPU_CHECK_FROM_SOURCE:-0}" != 1 && -f "$BUNDLE" ]] && use_bundle=1
command -v ctest >/dev/null || missing+=("ctest (comes with cmake)")
command -v timeout >/dev/null || missing+=("timeout (coreutils)")
if ((use_bundle)); then
  command -v tar >/dev/null || missing+=("tar")
  command -v xz >/dev/null || missing+=("xz (to unpack the bundle)")
  command -v sha256sum >/dev/null || missing+=("sha256sum (coreutils)")
else
  command -v cmake >/dev/null || missing+=("cmake (>= 3.24; Debian: cmake)")
  command -v c++ >/dev/null || command -v g++ >/dev/null || missing+=("a C++20 compiler (Debian: g++)")
  command -v nvcc >/dev/null || missing+=("nvcc (the CUDA toolkit; looked in PATH, \$CUDA_HOME/bin, /usr/local/cuda/bin)")
  command -v make >/dev/null || command -v ninja >/dev/null || missing+=("make or ninja")
fi
cv=""
if command -v cmake >/dev/null; then
  cv=$(cmake --version | head -1 | grep -oE '[0-9]+\.[0-9]+' | head -1)
  if [[ -n "$cv" ]] && ! printf '3.24\n%s\n' "$cv" | sort -V -C; then missing+=("cmake >= 3.24 (found $cv)"); fi
fi
if ((${#missing[@]})); then
  printf 'gpu-check: missing: %s\n' "${missing[@]}"
  record preflight FAIL $(($(now) - t0)) "missing: $(IFS=';'; echo "${missing[*]}")"
  abort architecture configure build gpu-tests sanitizer kernel-bench runner-cuda profile
fi
# The GPU itself: nvidia-smi when present (its absence is not fatal: the device query below decides).
gpu_name="" driver=""
if command -v nvidia-smi >/dev/null; then
  nvidia-smi >"$OUT_DIR/nvidia-smi.txt" 2>&1 || true
  gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
fi
nvv=$(nvcc --version 2>/dev/null | grep -oE 'release [0-9.]+' | cut -d' ' -f2)
record preflight ok $(($(now) - t0)) "$( ((use_bundle)) && echo "prebuilt bundle; ")nvcc ${nvv:-absent}; cmake ${cv:-absent}; ${JOBS} cores; ${gpu_name:-nvidia-smi absent}${driver:+, driver $driver}"

# ---- 2. architecture --------------------------------------------------------------------------------
say "2/9 device architecture"
t0=$(now)
arch=${GPU_ARCH:-}
how="GPU_ARCH"
if [[ -z "$arch" ]] && command -v nvidia-smi >/dev/null; then
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' ')
  [[ "$cap" =~ ^[0-9]+\.[0-9]+$ ]] && arch=${cap/./} && how="nvidia-smi"
fi
if [[ -z "$arch" ]]; then
  how="device query"
  q="$OUT_DIR/devquery"
  cat >"$q.cu" <<'EOF'
#include <cstdio>
#include <cuda_runtime.h>
int main() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) { std::printf("none: %s\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices"); return 1; }
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) { std::printf("none: cudaGetDeviceProperties failed\n"); return 1; }
  std::printf("%d%d %s\n", p.major, p.minor, p.name);
  return 0;
}
EOF
  if nvcc -o "$q" "$q.cu" >"$q.log" 2>&1; then
    qout=$("$q" 2>&1)
    if [[ "$qout" =~ ^([0-9]+)\ (.*)$ ]]; then arch=${BASH_REMATCH[1]}; gpu_name=${gpu_name:-${BASH_REMATCH[2]}}; fi
  else
    qout="nvcc could not build the device query (see $q.log)"
  fi
fi
if [[ -z "$arch" ]]; then
  echo "gpu-check: no usable NVIDIA GPU: ${qout:-nvidia-smi reported no compute capability}"
  record architecture FAIL $(($(now) - t0)) "no usable NVIDIA GPU (${qout:-nvidia-smi gave no compute_cap})"
  abort configure build gpu-tests sanitizer kernel-bench runner-cuda profile
fi
record architecture ok $(($(now) - t0)) "sm_$arch (${how}) ${gpu_name}"

build_from_source() {
  # ---- 3. configure -----------------------------------------------------------------------------------
  say "3/9 configure (Release, CMAKE_CUDA_ARCHITECTURES=$arch)"
  t0=$(now)
  BUILD=${GPU_CHECK_BUILD_DIR:-$ROOT/build-gpu-sm$arch}
  gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  [[ -f "$BUILD/CMakeCache.txt" ]] && gen=()  # keep the generator of an existing build directory
  if ! boxed cmake -S "$ROOT" -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" \
    -DINDEXPOOL_CUDA=ON -DINDEXPOOL_TESTS=ON -DINDEXPOOL_BENCH=ON >"$OUT_DIR/configure.log" 2>&1; then
    tail -30 "$OUT_DIR/configure.log"
    libs=()
    grep -q 'Eigen3' "$OUT_DIR/configure.log" && libs+=("Eigen 3.4 (Debian: libeigen3-dev)")
    grep -qE 'package configuration file provided by "fmt"|Could NOT find fmt' "$OUT_DIR/configure.log" && libs+=("fmt (libfmt-dev)")
    grep -q 'Could NOT find HDF5' "$OUT_DIR/configure.log" && libs+=("HDF5 (libhdf5-dev)")
    grep -qE 'Could NOT find Boost|BoostConfig' "$OUT_DIR/configure.log" && libs+=("Boost.Program_options (libboost-program-options-dev)")
    grep -qE 'Could NOT find GTest|GTestConfig' "$OUT_DIR/configure.log" && libs+=("GoogleTest (libgtest-dev)")
    grep -q 'Could NOT find OpenMP' "$OUT_DIR/configure.log" && libs+=("OpenMP (the compiler's libgomp)")
    why=${libs[*]:+missing: $(IFS=';'; echo "${libs[*]}")}
    record configure FAIL $(($(now) - t0)) "${why:-cmake failed, see configure.log}"
    abort build gpu-tests sanitizer kernel-bench runner-cuda profile
  fi
  if ! grep -q "IndexPool: CUDA .* found" "$OUT_DIR/configure.log"; then
    record configure FAIL $(($(now) - t0)) "cmake did not enable CUDA (see configure.log)"
    abort build gpu-tests sanitizer kernel-bench runner-cuda profile
  fi
  record configure ok $(($(now) - t0)) "$BUILD"

  # ---- 4. build ---------------------------------------------------------------------------------------
  say "4/9 build ($JOBS jobs)"
  t0=$(now)
  mapfile -t gpu_targets < <(cmake --build "$BUILD" --target help 2>/dev/null | grep -oE '\bgpu_[A-Za-z0-9_]+' | sort -u)
  targets=("${gpu_targets[@]}" kernel_bench indexpool)
  echo "targets: ${targets[*]}"
  box=$(($(left) > 60 ? $(left) - 60 : 1))
  boxed timeout "$box" cmake --build "$BUILD" -j "$JOBS" --target "${targets[@]}" >"$OUT_DIR/build.log" 2>&1
  rc=$?
  if ((rc != 0)); then
    grep -E 'error|Error' "$OUT_DIR/build.log" | head -20
    if ((rc == 124)); then why="timed out after ${box}s"; else why="exit $rc, $(grep -cE ' error' "$OUT_DIR/build.log") error lines"; fi
    record build FAIL $(($(now) - t0)) "$why (see build.log)"
    abort gpu-tests sanitizer kernel-bench runner-cuda profile
  fi
  record build ok $(($(now) - t0)) "${#gpu_targets[@]} GPU test programs, kernel_bench, indexpool"
  if command -v python3 >/dev/null; then  # ptxas's registers and spills of this build
    python3 "$ROOT/scripts/kernel_resources.py" "$BUILD" >"$OUT_DIR/kernel_resources.txt" 2>&1 || true
  fi

}

# ---- 3. prebuilt bundle ----------------------------------------------------------------------------
# Unpacks scripts/device-bundle.sh's archive, makes its CTest files point at where it now lies, checks
# that it was built from the sources beside it, and finds a library path on which its programs start.
# Sets BUILD and exports LD_LIBRARY_PATH for every later step. Returns 1 when the bundle cannot be used.
unpack_bundle() {
  local dest=${GPU_CHECK_BUNDLE_DIR:-${TMPDIR:-/tmp}/indexpool-bundle-run} m f bad=() try err libs
  rm -rf "$dest" && mkdir -p "$dest" || { bundle_why="cannot create $dest"; return 1; }
  if ! boxed tar -C "$dest" -xJf "$BUNDLE" 2>"$OUT_DIR/bundle.log"; then bundle_why="cannot unpack $BUNDLE (see bundle.log)"; return 1; fi
  B=$dest/indexpool-bundle
  m=$B/MANIFEST.txt
  [[ -f "$m" ]] || { bundle_why="$BUNDLE has no MANIFEST.txt"; return 1; }
  cp "$m" "$OUT_DIR/bundle-MANIFEST.txt"
  if [[ -f "$B/kernel_resources.txt" ]]; then cp "$B/kernel_resources.txt" "$OUT_DIR/"; fi  # registers, spills
  BUILD=$B/build
  for f in "$BUILD"/tests/*.in; do sed "s|@IP_BUNDLE_BUILD@|$BUILD|g" "$f" >"${f%.in}"; done
  bundle_arch=$(sed -n 's/^cuda_architectures: //p' "$m")
  bundle_commit=$(sed -n 's/^commit: //p' "$m" | cut -c1-12)
  # Sources: the per-file hashes of the manifest against the tree this script lies in.
  mapfile -t bad < <(cd "$ROOT" && grep -E '^[0-9a-f]{64}  ' "$m" | sha256sum -c 2>/dev/null | grep -v ': OK$' | sed 's/: .*//')
  bundle_stale=${#bad[@]}
  if ((bundle_stale)); then
    echo "gpu-check: the bundle was built from other sources than this tree; files that differ: ${bad[*]:0:12}"
    echo "gpu-check: rerun scripts/device-bundle.sh here and call again, or set GPU_CHECK_FROM_SOURCE=1"
  fi
  if [[ ";$bundle_arch;" != *";$arch;"* ]]; then
    if ((arch < 90)); then bundle_why="bundle built for sm_$bundle_arch, device is sm_$arch"; return 1; fi
    echo "gpu-check: bundle built for sm_$bundle_arch, device is sm_$arch: the driver compiles its PTX at start"
  fi
  # Library path: the bundle's own libraries and CUPTI; the compiler runtime (libstdc++, libgomp) only
  # when the device's own is too old for the programs.
  libs="$B/lib:$B/lib-cupti"
  for try in 1 2; do
    err=$(LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$BUILD/experiments/indexpool" --version 2>&1 >/dev/null) &&
      LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$BUILD/tests/gpu_device_test" --gtest_list_tests >/dev/null 2>>"$OUT_DIR/bundle.log" &&
      break
    echo "gpu-check: with LD_LIBRARY_PATH=$libs: ${err:-gpu_device_test did not start (see bundle.log)}" | tee -a "$OUT_DIR/bundle.log"
    ((try == 1)) && libs="$libs:$B/lib-compat" && continue
    bundle_why="its programs do not start here: $(echo "$err" | head -1 | cut -c1-120)"
    return 1
  done
  export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  bundle_libs=$libs
  return 0
}

bundle_why=""
if ((use_bundle)); then
  say "3/9 prebuilt bundle ($BUNDLE)"
  t0=$(now)
  if unpack_bundle; then
    figs="commit $bundle_commit, sm_$bundle_arch, $(sed -n 's/^made: \([0-9-]*\).*/made \1/p' "$B/MANIFEST.txt")"
    [[ "$bundle_libs" == *lib-compat* ]] && figs="$figs, with its own libstdc++/libgomp"
    if ((bundle_stale)); then
      record bundle FAIL $(($(now) - t0)) "STALE: $bundle_stale source files differ from the bundle's ($figs); results below are of the bundle's code"
    else
      record bundle ok $(($(now) - t0)) "$figs; sources match"
    fi
    record build skip 0 "prebuilt bundle (scripts/device-bundle.sh)"
  else
    echo "gpu-check: bundle not usable: $bundle_why; building from source instead"
    record bundle FAIL $(($(now) - t0)) "$bundle_why; fell back to a source build"
    use_bundle=0
  fi
fi
if ((!use_bundle)); then
  build_from_source
fi

# ---- 5. GPU tests -----------------------------------------------------------------------------------
say "5/9 GPU tests (ctest -L gpu)"
t0=$(now)
if [[ "${GPU_CHECK_TESTS:-1}" == 0 ]]; then
  record gpu-tests skip 0 "GPU_CHECK_TESTS=0 (not asked for)"
else
  # Boxed by what is left of the budget (at least 60 s): per-test timeouts alone let several stuck tests
  # take a multiple of --timeout.
  box=$(($(left) > 60 ? $(left) : 60))
  boxed timeout -k 10 "$box" ctest --test-dir "$BUILD" -L gpu --output-on-failure -j "$CTEST_JOBS" --timeout "$CTEST_TIMEOUT" \
    --output-junit "$OUT_DIR/ctest-gpu.xml" >"$OUT_DIR/ctest-gpu.log" 2>&1
  rc=$?
  ((rc == 124 || rc == 137)) && echo "gpu-check: the GPU tests did not finish within ${box} s (stopped)" | tee -a "$OUT_DIR/ctest-gpu.log"
  tail -25 "$OUT_DIR/ctest-gpu.log"
  total=$(grep -oE 'out of [0-9]+' "$OUT_DIR/ctest-gpu.log" | tail -1 | grep -oE '[0-9]+')
  nfail=$(grep -oE '[0-9]+ tests failed' "$OUT_DIR/ctest-gpu.log" | tail -1 | grep -oE '^[0-9]+')
  # CTest 4 prints "100% tests passed out of N", without "0 tests failed", when nothing failed.
  [[ -z "$nfail" && $rc -eq 0 && -n "$total" ]] && nfail=0
  nskip=$(grep -cE 'Test +#[0-9]+: .*Skipped' "$OUT_DIR/ctest-gpu.log")
  figs="${total:-0} tests, ${nfail:-?} failed, ${nskip} skipped"
  if ((rc != 0)) || [[ -z "$total" ]]; then
    record gpu-tests FAIL $(($(now) - t0)) "$figs (see ctest-gpu.log)"
  elif ((nskip > 0)); then
    record gpu-tests FAIL $(($(now) - t0)) "$figs: skipped although a device is present"
  else
    record gpu-tests ok $(($(now) - t0)) "$figs"
  fi
fi

# ---- 6. compute-sanitizer (memcheck unless GPU_CHECK_SANITIZER_TOOL says) -----------------------------
say "6/9 compute-sanitizer $SAN_TOOL (time box ${SAN_BOX}s, filter '$SAN_FILTER')"
t0=$(now)
san=$(command -v compute-sanitizer || true)
for d in "${CUDA_HOME:-}" /usr/local/cuda; do
  [[ -z "$san" && -n "$d" && -x "$d/compute-sanitizer/compute-sanitizer" ]] && san="$d/compute-sanitizer/compute-sanitizer"
  [[ -z "$san" && -n "$d" && -x "$d/bin/compute-sanitizer" ]] && san="$d/bin/compute-sanitizer"
done
if ((SAN_BOX <= 0)); then
  record sanitizer skip 0 "GPU_CHECK_SANITIZER_S=0"
elif [[ -z "$san" ]]; then
  record sanitizer skip 0 "compute-sanitizer not found in this toolkit"
else
  clean=0 dirty=0 timedout=0 notrun=0
  mapfile -t bins < <(find "$BUILD/tests" -maxdepth 1 -type f -name "${GPU_CHECK_SANITIZER_ONLY:-gpu_*}" \
    -perm -u+x | sort)
  # Up to SAN_JOBS programs at once, each boxed by what is left of the step's time (one after another,
  # 7 of the 10 programs fitted in 75 s on an H200, 2026-12-04). The processes are waited for by pid: a
  # plain `wait` would also wait for this script's own tee.
  pids=() names=()
  running() {
    local n=0 p
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && n=$((n + 1)); done
    echo "$n"
  }
  for b in "${bins[@]}"; do
    while (($(running) >= SAN_JOBS)); do sleep 1; done
    box=$((SAN_BOX - ($(now) - t0)))
    if ((box < 10)) || (($(left) < 150)); then notrun=$((notrun + 1)); continue; fi
    name=$(basename "$b")
    (
      boxed timeout "$box" "$san" "${SAN_TOOL_ARGS[@]}" --error-exitcode 86 --print-limit 20 \
        "$b" --gtest_filter="$SAN_FILTER" --gtest_brief=1 >"$OUT_DIR/sanitizer-$name.log" 2>&1
      echo $? >"$OUT_DIR/sanitizer-$name.rc"
    ) &
    pids+=($!) names+=("$name")
  done
  for p in "${pids[@]}"; do wait "$p"; done
  for name in "${names[@]}"; do
    src=$(cat "$OUT_DIR/sanitizer-$name.rc" 2>/dev/null || echo 1)
    rm -f "$OUT_DIR/sanitizer-$name.rc"
    if ((src == 0)); then clean=$((clean + 1))
    elif ((src == 124)); then timedout=$((timedout + 1)); echo "sanitizer: $name timed out"
    else dirty=$((dirty + 1)); echo "sanitizer: $name failed (exit $src):"; grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|Race reported|Invalid|FAILED' "$OUT_DIR/sanitizer-$name.log" | head -8
    fi
  done
  figs="$SAN_TOOL, ${#bins[@]} programs: $clean clean, $dirty with errors, $timedout timed out, $notrun not run (time box)"
  if ((dirty)); then record sanitizer FAIL $(($(now) - t0)) "$figs"
  elif ((timedout + notrun)); then record sanitizer partial $(($(now) - t0)) "$figs"
  else record sanitizer ok $(($(now) - t0)) "$figs"
  fi
fi

# ---- 7. kernel benchmark ----------------------------------------------------------------------------
say "7/9 kernel benchmark"
t0=$(now)
if [[ "${GPU_CHECK_BENCH:-1}" == 0 ]]; then
  record kernel-bench skip 0 "GPU_CHECK_BENCH=0 (not asked for)"
else
  bench_args=()
  read -r -a bench_args <<<"${GPU_CHECK_BENCH_ARGS:-}"
  # The full benchmark took 20 s on an H200 (2026-12-04); --quick only when less than 90 s are left.
  if (($(left) < 90)) && [[ " ${bench_args[*]} " != *" --quick "* ]]; then bench_args+=(--quick); fi
  box=$(($(left) - 60))
  ((box > 300)) && box=300
  ((box < 30)) && box=30
  boxed timeout "$box" "$BUILD/bench/kernel_bench" --json "$OUT_DIR/kernel_bench.json" "${bench_args[@]}" \
    >"$OUT_DIR/kernel_bench.txt" 2>&1
  rc=$?
  cat "$OUT_DIR/kernel_bench.txt"
  summary=$(grep -E '^kernel_bench: (summary|skipped)' "$OUT_DIR/kernel_bench.txt" | tail -1 | sed 's/^kernel_bench: //')
  if ((rc == 124)); then record kernel-bench FAIL $(($(now) - t0)) "timed out after ${box}s"
  elif ((rc == 3)); then  # its hang guard: a case outlived --case-timeout; the JSON holds the rows before it
    record kernel-bench FAIL $(($(now) - t0)) "a case did not finish; ${summary:-see kernel_bench.txt}"
  elif ((rc != 0)); then record kernel-bench FAIL $(($(now) - t0)) "exit $rc; ${summary:-see kernel_bench.txt}"
  elif [[ "$summary" == skipped* ]]; then record kernel-bench FAIL $(($(now) - t0)) "$summary although a device is present"
  else record kernel-bench ok $(($(now) - t0)) "${summary} ${bench_args[*]}"
  fi
  # Case by case against an earlier device run (information only: scripts/kernel_bench_compare.py).
  # The reference is the last file in bench/device-runs/README.md's table (newest run; file names sort by
  # date, not by time of day), else the last by name.
  ref_latest=$(grep -o '`[^`]*-kernel_bench\.json`' "$ROOT/bench/device-runs/README.md" 2>/dev/null | tail -1 | tr -d '`')
  [[ -n "$ref_latest" && -s "$ROOT/bench/device-runs/$ref_latest" ]] && ref_latest="$ROOT/bench/device-runs/$ref_latest" ||
    ref_latest=$(ls "$ROOT"/bench/device-runs/*-kernel_bench.json 2>/dev/null | sort | tail -1)
  ref=${GPU_CHECK_BENCH_REF:-$ref_latest}
  if [[ "$ref" != none && -s "$ref" && -s "$OUT_DIR/kernel_bench.json" ]] && command -v python3 >/dev/null &&
    ! grep -q '"skipped"' "$OUT_DIR/kernel_bench.json"; then
    say "kernel_bench against $(basename "$ref")"
    python3 "$ROOT/scripts/kernel_bench_compare.py" "$ref" "$OUT_DIR/kernel_bench.json" \
      >"$OUT_DIR/kernel_bench_compare.txt" 2>&1
    cat "$OUT_DIR/kernel_bench_compare.txt"
  fi
  # Each A/B case of this run against its base case ("(one launch)" vs the plain one, ...).
  if [[ -s "$OUT_DIR/kernel_bench.json" ]] && command -v python3 >/dev/null && ! grep -q '"skipped"' "$OUT_DIR/kernel_bench.json"; then
    say "kernel_bench variants against their base cases"
    python3 "$ROOT/scripts/kernel_bench_compare.py" --variants "$OUT_DIR/kernel_bench.json" \
      >"$OUT_DIR/kernel_bench_variants.txt" 2>&1
    cat "$OUT_DIR/kernel_bench_variants.txt"
    # Each bandwidth case against the copy kernel timed at its size (is a fraction of copy short because of
    # the kernel, or because of the size?).
    say "kernel_bench cases against the copy at their size"
    python3 "$ROOT/scripts/kernel_bench_compare.py" --size-copy "$OUT_DIR/kernel_bench.json" \
      >"$OUT_DIR/kernel_bench_size_copy.txt" 2>&1
    cat "$OUT_DIR/kernel_bench_size_copy.txt"
  fi
fi

# ---- 8. runner with backend = cuda ------------------------------------------------------------------
say "8/9 indexpool run with backend = cuda"
t0=$(now)
boxed timeout $(($(left) > 90 ? 90 : 30)) "$BUILD/experiments/indexpool" run "$ROOT/configs/quickstart.ini" --quiet --overwrite \
  --set backend=cuda --set pool.group_size=4 --set output.path="$OUT_DIR/runner_cuda.h5" \
  >"$OUT_DIR/runner_cuda.txt" 2>&1
rc=$?
cat "$OUT_DIR/runner_cuda.txt"
nskip=$(grep -c 'skipped:' "$OUT_DIR/runner_cuda.txt")
# The batched decoder through the runner (select.batched): 1 and 64 requests of up to 32Ki tokens.
boxed timeout $(($(left) > 60 ? 60 : 20)) "$BUILD/experiments/indexpool" run "$ROOT/configs/batched.ini" --quiet --overwrite \
  --set workload.requests=1,64 --set output.path="$OUT_DIR/runner_batched.h5" >"$OUT_DIR/runner_batched.txt" 2>&1
brc=$?
cat "$OUT_DIR/runner_batched.txt"
bskip=$(grep -c 'skipped:' "$OUT_DIR/runner_batched.txt")
if ((rc != 0)); then record runner-cuda FAIL $(($(now) - t0)) "exit $rc (see runner_cuda.txt)"
elif ((nskip > 0)); then record runner-cuda FAIL $(($(now) - t0)) "$nskip points skipped: $(grep -m1 -o 'skipped: .*' "$OUT_DIR/runner_cuda.txt" | cut -c1-80)"
elif ((brc != 0)); then record runner-cuda FAIL $(($(now) - t0)) "quickstart ok; batched.ini exit $brc (see runner_batched.txt)"
elif ((bskip > 0)); then record runner-cuda FAIL $(($(now) - t0)) "quickstart ok; batched.ini: $bskip points skipped (see runner_batched.txt)"
else record runner-cuda ok $(($(now) - t0)) "quickstart at G=4 and batched.ini (B = 1, 64) on cuda, no point skipped; runner_*.h5"
fi

# ---- 9. profiling (issue 6) -------------------------------------------------------------------------
# scripts/gpu-profile-check.sh: the CUPTI GPU tests (DRAM bytes of a copy kernel within +-5%, replay with
# restored inputs, kernel records) and the runner's pool-stage DRAM bytes vs the declared bytes (+-5%).
say "9/9 profiling (scripts/gpu-profile-check.sh)"
t0=$(now)
box=$(($(left) > 150 ? 150 : ($(left) > 30 ? $(left) : 30)))
boxed timeout "$box" bash "$ROOT/scripts/gpu-profile-check.sh" "$BUILD" >"$OUT_DIR/profile_check.txt" 2>&1
rc=$?
cat "$OUT_DIR/profile_check.txt"
ratio=$(grep -m1 -oE 'ratio [0-9.]+' "$OUT_DIR/profile_check.txt")
if ((rc == 124)); then record profile FAIL $(($(now) - t0)) "timed out after ${box}s"
elif ((rc != 0)); then record profile FAIL $(($(now) - t0)) "exit $rc; ${ratio:-see profile_check.txt}"
else record profile ok $(($(now) - t0)) "pool DRAM bytes measured/declared ${ratio:-?}"
fi

# ---- optional: Nsight Compute summary of the top-k and score kernels ---------------------------------
if [[ "${GPU_CHECK_NCU:-0}" == 1 ]]; then
  say "ncu summary (scripts/gpu-ncu-summary.sh; GPU_CHECK_NCU=1)"
  t0=$(now)
  read -r -a ncu_groups <<<"${GPU_CHECK_NCU_GROUPS:-topk score}"
  # Boxed as a whole too, so that a signal reaches its ncu runs (each in a `timeout` box of its own).
  NCU_BOX_S=$(($(left) > 120 ? 60 : 30)) boxed timeout -k 10 $(($(left) > 60 ? $(left) : 60)) \
    bash "$ROOT/scripts/gpu-ncu-summary.sh" "$BUILD" "$OUT_DIR" "${ncu_groups[@]}" >"$OUT_DIR/ncu_summary.txt" 2>&1
  rc=$?
  cat "$OUT_DIR/ncu_summary.txt"
  if ((rc == 0)); then record ncu ok $(($(now) - t0)) "per-kernel summary in ncu_summary.txt"
  else record ncu FAIL $(($(now) - t0)) "exit $rc (see ncu_summary.txt)"
  fi
fi

# ---- optional: the README's Nsight command lines (nsys, ncu by NVTX range) and what they captured ------
# Three profiled runs of configs/nsight.ini, each boxed by NSIGHT_BOX_S, plus the report queries; the whole
# step is boxed too. Exit 3 of the script: nsys or ncu absent here, so its lines did not run (partial).
if [[ "${GPU_CHECK_NSIGHT:-0}" == 1 ]]; then
  say "Nsight lines of the README (scripts/gpu-nsight-check.sh; GPU_CHECK_NSIGHT=1)"
  t0=$(now)
  nbox=${NSIGHT_BOX_S:-$(($(left) > 300 ? 60 : 30))}
  NSIGHT_BOX_S=$nbox boxed timeout -k 10 $((5 * nbox)) bash "$ROOT/scripts/gpu-nsight-check.sh" "$BUILD" "$OUT_DIR" \
    >"$OUT_DIR/nsight_check.txt" 2>&1
  rc=$?
  cat "$OUT_DIR/nsight_check.txt"
  verdict=$(sed -n 's/^nsight-check: //p' "$OUT_DIR/nsight_check.txt" | tail -1 | cut -c1-160)
  if ((rc == 0)); then record nsight ok $(($(now) - t0)) "$verdict"
  elif ((rc == 3)); then record nsight partial $(($(now) - t0)) "$verdict"
  elif ((rc == 124 || rc == 137)); then record nsight FAIL $(($(now) - t0)) "timed out after $((5 * nbox))s"
  else record nsight FAIL $(($(now) - t0)) "exit $rc; ${verdict:-see nsight_check.txt}"
  fi
fi

# ---- optional: the article's latency claim at 1Mi tokens through the runner and the claims report ------
if [[ "${GPU_CHECK_CLAIMS:-0}" == 1 ]]; then
  say "claims at 1Mi tokens (configs/claims_1m.ini on cuda, then python3 -m analysis report; GPU_CHECK_CLAIMS=1)"
  t0=$(now)
  box=$(($(left) > 210 ? 150 : ($(left) > 90 ? $(left) - 60 : 30)))
  boxed timeout "$box" "$BUILD/experiments/indexpool" run "$ROOT/configs/claims_1m.ini" --quiet --overwrite \
    --set backend=cuda --set output.path="$OUT_DIR/claims_1m.h5" >"$OUT_DIR/claims_1m.txt" 2>&1
  rc=$?
  cat "$OUT_DIR/claims_1m.txt"
  if ((rc != 0)); then
    record claims FAIL $(($(now) - t0)) "indexpool run exit $rc (see claims_1m.txt)"
  elif ! (cd "$ROOT" && boxed timeout 60 python3 -m analysis report "$OUT_DIR/claims_1m.h5" --out "$OUT_DIR/report") \
    >"$OUT_DIR/claims_report.txt" 2>&1; then
    cat "$OUT_DIR/claims_report.txt"
    record claims partial $(($(now) - t0)) "run ok (claims_1m.h5); the report failed here (see claims_report.txt)"
  else
    cat "$OUT_DIR/claims_report.txt"
    latency=$(awk -F'|' '/Query latency/ { print $5 "->" $7; exit }' "$OUT_DIR/report/claims.md")
    record claims ok $(($(now) - t0)) "latency: $latency"
  fi
  # Issue 7 on the device: configs/hybrid.ini (hybrid vs pure sparse at matched budgets) and configs/edge.ini
  # (int8, asynchronous updates) on cuda; a few seconds each on two CPU cores. Per point: the layer's time,
  # the scoring time and the hidden part of the asynchronous update (pool_hidden_ms).
  for c in hybrid edge; do
    t1=$(now)
    boxed timeout 60 "$BUILD/experiments/indexpool" run "$ROOT/configs/$c.ini" --quiet --overwrite --set backend=cuda \
      --set output.path="$OUT_DIR/$c.h5" >"$OUT_DIR/$c.txt" 2>&1
    rc=$?
    tsv="$OUT_DIR/$c.points.tsv"
    if ((rc == 0)) && "$BUILD/experiments/indexpool" inspect "$OUT_DIR/$c.h5" --table points >"$tsv"; then
      awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next }
        { printf "   %-52s %-7s %-6s layer %s ms, score %s ms, pool %s ms, hidden %s ms\n", $c["key"], $c["status"],
          $c["run_backend"], $c["layer_ms"], $c["score_ms"], $c["pool_ms"], $c["pool_hidden_ms"] }' "$tsv"
      n=$(grep -c 'skipped:' "$OUT_DIR/$c.txt")
      if ((n)); then record "$c.ini" FAIL $(($(now) - t1)) "$n points skipped (see $c.txt)"
      else record "$c.ini" ok $(($(now) - t1)) "on cuda; per point in $c.points.tsv"
      fi
    else
      record "$c.ini" FAIL $(($(now) - t1)) "exit $rc (see $c.txt)"
    fi
  done
fi

# ---- optional: the kernel forms ([kernels]) end to end through the runner -----------------------------
# kernel_bench times each form one kernel at a time; these time them as a sweep does, per step and stage.
if [[ "${GPU_CHECK_FORMS:-0}" == 1 ]]; then
  say "kernel forms through the runner (configs/kernel_forms.ini; configs/batched.ini at 64 requests; GPU_CHECK_FORMS=1)"
  for c in kernel_forms batched; do
    t1=$(now)
    args=()
    [[ $c == batched ]] && args=(--set workload.requests=64 --set kernels.attention=tiles,lanes
      --set kernels.topk=chain,block)
    box=$(($(left) > 150 ? 90 : ($(left) > 40 ? $(left) - 30 : 10)))
    boxed timeout "$box" "$BUILD/experiments/indexpool" run "$ROOT/configs/$c.ini" --quiet --overwrite --set backend=cuda \
      "${args[@]}" --set output.path="$OUT_DIR/forms_$c.h5" >"$OUT_DIR/forms_$c.txt" 2>&1
    rc=$?
    tsv="$OUT_DIR/forms_$c.points.tsv"
    if ((rc == 0)) && "$BUILD/experiments/indexpool" inspect "$OUT_DIR/forms_$c.h5" --table points >"$tsv"; then
      awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next }
        { printf "   %-70s %-7s score %s ms, top-k %s ms, attention %s ms, layer %s ms\n", $c["key"], $c["status"],
          $c["score_ms"], $c["topk_ms"], $c["attention_ms"], $c["layer_ms"] }' "$tsv"
      n=$(grep -c 'skipped:' "$OUT_DIR/forms_$c.txt")
      total=$(($(wc -l <"$tsv") - 1))
      # A form the device cannot run is skipped with its reason (cluster below sm_90): partial; all: FAIL.
      if ((n == 0)); then st=ok; elif ((n < total)); then st=partial; else st=FAIL; fi
      record "forms: $c" "$st" $(($(now) - t1)) "$n of $total points skipped$( ((n)) && printf ': %s' \
        "$(grep -m1 -o 'skipped: .*' "$OUT_DIR/forms_$c.txt" | cut -c10-80)"); per point in forms_$c.points.tsv"
    else
      record "forms: $c" FAIL $(($(now) - t1)) "exit $rc (see forms_$c.txt)"
    fi
  done
fi

final_table
exit $?
