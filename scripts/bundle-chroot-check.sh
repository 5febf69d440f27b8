#!/usr/bin/env bash
# Checks, here and without a GPU, that the device bundle (scripts/device-bundle.sh) needs nothing from the
# machine it lands on but glibc and the driver: it unpacks the bundle into an empty root that holds only
# this machine's glibc, and there, with LD_LIBRARY_PATH set as scripts/gpu-check.sh sets it, runs
#   1. indexpool --version;
#   2. a small sweep on the cpu backend, written to HDF5, and read back with indexpool inspect --table;
#   3. kernel_bench (must say "skipped: no CUDA device" here and exit 0);
#   4. every GPU test program's --gtest_list_tests (they must start).
# A library missing from the bundle shows as a program that does not start. Needs root (chroot).
#
# usage: scripts/bundle-chroot-check.sh [BUNDLE]   (default .devbundle/indexpool-bundle.tar.xz)
# Exit status 0 when every program started and the sweep's results read back.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
BUNDLE=${1:-$ROOT/.devbundle/indexpool-bundle.tar.xz}
[[ -f "$BUNDLE" ]] || { echo "bundle-chroot-check: no bundle at $BUNDLE (run scripts/device-bundle.sh)" >&2; exit 2; }
CHROOT=$(command -v chroot || echo /usr/sbin/chroot)
[[ -x "$CHROOT" ]] || { echo "bundle-chroot-check: chroot not found" >&2; exit 2; }
((EUID == 0)) || { echo "bundle-chroot-check: needs root (chroot)" >&2; exit 2; }

R=$(mktemp -d /tmp/bundle-chroot.XXXXXX)
trap 'rm -rf "$R"' EXIT
mkdir -p "$R/lib64" "$R/lib/x86_64-linux-gnu" "$R/tmp"
# glibc only: the loader and the libraries scripts/device-bundle.sh leaves out on purpose.
for l in ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1 libresolv.so.2 \
  libmvec.so.1 libutil.so.1; do
  [[ -e /lib/x86_64-linux-gnu/$l ]] && cp -L "/lib/x86_64-linux-gnu/$l" "$R/lib/x86_64-linux-gnu/"
done
cp -L /lib64/ld-linux-x86-64.so.2 "$R/lib64/"
tar -C "$R" -xJf "$BUNDLE" || { echo "bundle-chroot-check: cannot unpack $BUNDLE" >&2; exit 1; }
B=/indexpool-bundle
L="$B/lib:$B/lib-compat:$B/lib-cupti"
run() { env -i LD_LIBRARY_PATH="$L" "$CHROOT" "$R" "$@"; }

fail=0
check() {  # check NAME EXPECTED_EXIT COMMAND...: runs it in the root, prints the outcome
  local name=$1 want=$2 out rc
  shift 2
  out=$(run "$@" 2>&1)
  rc=$?
  if ((rc == want)); then
    printf 'ok    %-28s %s\n' "$name" "$(printf '%s' "$out" | tail -1 | cut -c1-100)"
  else
    printf 'FAIL  %-28s exit %d: %s\n' "$name" "$rc" "$(printf '%s' "$out" | tail -3 | tr '\n' ' ' | cut -c1-200)"
    fail=1
  fi
}

printf 'backend = cpu\n[workload]\ntokens = 4Ki\nsteps = 2\n[pool]\nweighting = uniform, tfidf\n[select]\ntopk_tokens = 256\n[output]\npath = /tmp/t.h5\n' >"$R/tmp/t.ini"
check "indexpool --version" 0 "$B/build/experiments/indexpool" --version
check "indexpool run (cpu, HDF5)" 0 "$B/build/experiments/indexpool" run /tmp/t.ini --quiet
rows=$(run "$B/build/experiments/indexpool" inspect /tmp/t.h5 --table points 2>&1 | awk -F'\t' 'NR > 1 && $4 == "ok"' | wc -l)
if ((rows == 2)); then printf 'ok    %-28s %s\n' "inspect --table points" "2 points, status ok"
else printf 'FAIL  %-28s %s\n' "inspect --table points" "expected 2 ok points, read $rows"; fail=1
fi
out=$(run "$B/build/bench/kernel_bench" --quick 2>&1)
if [[ "$out" == *"skipped: no CUDA device"* ]]; then printf 'ok    %-28s %s\n' "kernel_bench" "$(tail -1 <<<"$out" | cut -c1-100)"
else printf 'FAIL  %-28s %s\n' "kernel_bench" "$(tail -2 <<<"$out" | tr '\n' ' ' | cut -c1-200)"; fail=1
fi
n=0
for t in "$R$B"/build/tests/gpu_*; do
  [[ -x "$t" && -f "$t" ]] || continue
  n=$((n + 1))
  check "$(basename "$t") --list" 0 "$B/build/tests/$(basename "$t")" --gtest_list_tests
done
((n > 0)) || { echo "FAIL  no GPU test programs in the bundle"; fail=1; }
if ((fail)); then echo "bundle-chroot-check: FAILED"; else echo "bundle-chroot-check: passed (only glibc from this machine)"; fi
exit "$fail"
