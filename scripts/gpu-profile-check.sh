#!/usr/bin/env bash
# Profiling step of the one-shot GPU check (issue 6). Run on a machine with a GPU, after a build:
#   scripts/gpu-profile-check.sh [BUILD_DIR]        (default: build)
# or source it and call gpu_profile_check BUILD_DIR from scripts/gpu-check.sh's profiling hook.
#   1. the GPU CUPTI tests (label gpu): DRAM bytes of a copy kernel within +-5% of the bytes it moves,
#      replay with restored inputs, kernel records;
#   2. the runner with profile.counters = on, backend = cuda: DRAM bytes CUPTI reports for the pool
#      stage within +-5% of its declared bytes: keys read + index written (what bench/indexpool_bench.cc
#      declares for pooling) + index read back by the stage's copy to the host (scripts/pool_dram_check.sh),
#      for a working set >= 4x L2 (1Mi tokens x 128 dims x 4 B = 512 MiB of keys).
# Exit status 0 when every check passes.
set -uo pipefail
PROFILE_CHECK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)  # before any cd: pool_dram_check.sh lies beside

gpu_profile_check() {
  local build=${1:-build}
  local bin="$build/experiments/indexpool"
  local out; out=$(mktemp -d)
  local fail=0
  echo "== profiling check 1/2: CUPTI GPU tests"
  (cd "$build" && ctest -L gpu -R "CuptiCounters" -V) > "$out/tests.log" 2>&1 || fail=1
  grep -E "copy of|OK \]|FAILED|SKIPPED|Failure|counters cannot" "$out/tests.log" | sed 's/^/   /'
  if grep -q "\[  SKIPPED \]" "$out/tests.log"; then
    echo "   CUPTI GPU tests were SKIPPED (no GPU, or counters not readable: see the reason above)"; fail=1
  fi

  echo "== profiling check 2/2: runner counters for pooling vs declared bytes"
  cat > "$out/check.ini" <<INI
backend = cuda
[workload]
tokens = 1Mi
dim = 128
index_heads = 8
attn_dim = 0
steps = 1
[pool]
weighting = uniform
group_size = 4
precision = fp32, fp16
[select]
topk_tokens = 2048
fidelity = false
[cache]
enabled = false
[profile]
counters = on
kernel_records = on
metrics = dram__bytes_read.sum dram__bytes_write.sum lts__t_sector_hit_rate.pct
[output]
path = $out/check.h5
INI
  if ! "$bin" run "$out/check.ini"; then echo "   indexpool run failed"; rm -rf "$out"; return 1; fi
  # Read with indexpool itself (inspect --table): the device image may have no Python with h5py.
  bash "$PROFILE_CHECK_DIR/pool_dram_check.sh" "$out/check.h5" "$bin" || fail=1
  rm -rf "$out"
  [ $fail -eq 0 ] && echo "== profiling check: PASS" || echo "== profiling check: FAIL"
  return $fail
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"  # the header comment
    exit 0
  fi
  cd "$(dirname "$0")/.." || exit 1
  gpu_profile_check "${1:-build}"
fi
