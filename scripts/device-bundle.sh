#!/usr/bin/env bash
# Builds here, with no GPU, everything scripts/gpu-check.sh runs on a GPU machine, and packs it with the
# shared libraries it needs into one archive. The device machine lent to this project runs a CUDA image
# described with nvcc, CMake and Python but not Eigen, fmt, HDF5, Boost or GoogleTest, and it can
# install nothing; a build there would also spend minutes of the session's 15 device minutes. With the bundle
# carried along, gpu-check.sh skips its configure and build steps and only runs.
#
# usage: scripts/device-bundle.sh [--arch LIST] [--out DIR] [--build-dir DIR] [--jobs N]
#   --arch LIST       CMAKE_CUDA_ARCHITECTURES of the bundle (default 90: H100/H200; "80;90" adds A100)
#   --out DIR         where the archive goes (default .devbundle, ignored by git, named in `carry`)
#   --build-dir DIR   build directory (default build-devbundle; kept, so a second run is incremental)
#   --jobs N          build jobs (default: all cores)
# Writes DIR/indexpool-bundle.tar.xz and DIR/MANIFEST.txt (commit, date, architecture, compiler, the
# libraries packed and the glibc the programs need, a fingerprint of the sources it was built from).
# Then, on the device machine: run scripts/gpu-check.sh with `.devbundle` in carry (kernels/DEVICE_RUNS.md).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ARCH=90 OUTDIR=$ROOT/.devbundle BUILD=$ROOT/build-devbundle JOBS=$(nproc 2>/dev/null || echo 2)
while (($#)); do
  case "$1" in
    --arch | --out | --build-dir | --jobs)
      [[ $# -ge 2 && -n "$2" ]] || { echo "device-bundle: $1 needs a value (see --help)" >&2; exit 2; }
      case "$1" in --arch) ARCH=$2 ;; --out) OUTDIR=$2 ;; --build-dir) BUILD=$2 ;; --jobs) JOBS=$2 ;; esac
      shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "device-bundle: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$ARCH" =~ ^[0-9]+(\;[0-9]+)*$ ]] || { echo "device-bundle: --arch '$ARCH' is not a list like 90 or '80;90'" >&2; exit 2; }
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || { echo "device-bundle: --jobs '$JOBS' is not a positive number" >&2; exit 2; }
command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]] || {
  echo "device-bundle: nvcc not found; the bundle needs the CUDA toolkit on this machine" >&2; exit 1; }
for t in xz tar ldd sha256sum strip; do
  command -v "$t" >/dev/null || { echo "device-bundle: '$t' not found" >&2; exit 1; }
done

say() { printf 'device-bundle: %s\n' "$*"; }

# ---- build ------------------------------------------------------------------------------------------
# -march=native is off: the device machine's processor may lack this one's instruction set extensions.
say "configuring $BUILD (Release, CUDA architectures $ARCH, no -march=native)"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$ARCH" \
  -DINDEXPOOL_NATIVE=OFF -DINDEXPOOL_CUDA=ON -DINDEXPOOL_TESTS=ON -DINDEXPOOL_BENCH=ON >"$BUILD.configure.log" 2>&1 ||
  { tail -30 "$BUILD.configure.log"; echo "device-bundle: cmake failed (log: $BUILD.configure.log)" >&2; exit 1; }
grep -q "IndexPool: CUDA .* found" "$BUILD.configure.log" ||
  { echo "device-bundle: cmake did not enable CUDA (log: $BUILD.configure.log)" >&2; exit 1; }
mapfile -t gpu_targets < <(cmake --build "$BUILD" --target help | grep -oE '\bgpu_[A-Za-z0-9_]+' | sort -u)
((${#gpu_targets[@]})) || { echo "device-bundle: the build defines no gpu_* test targets" >&2; exit 1; }
targets=("${gpu_targets[@]}" kernel_bench indexpool)
say "building ${#targets[@]} targets with $JOBS jobs (the CUDA pooling kernels take minutes): ${targets[*]}"
t0=$(date +%s)
cmake --build "$BUILD" -j "$JOBS" --target "${targets[@]}" >"$BUILD.build.log" 2>&1 ||
  { grep -E 'error' "$BUILD.build.log" | head -20; echo "device-bundle: build failed (log: $BUILD.build.log)" >&2; exit 1; }
say "built in $(($(date +%s) - t0)) s"

# ---- stage ------------------------------------------------------------------------------------------
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
B=$STAGE/indexpool-bundle
mkdir -p "$B/build/tests" "$B/build/bench" "$B/build/experiments" "$B/lib" "$B/lib-compat" "$B/lib-cupti"
progs=()
for t in "${gpu_targets[@]}"; do
  cp "$BUILD/tests/$t" "$B/build/tests/"
  progs+=("$B/build/tests/$t")
  f="$BUILD/tests/${t}[1]_tests.cmake"
  [[ -f "$f" ]] || { echo "device-bundle: $f missing (gtest discovery did not run)" >&2; exit 1; }
  # Absolute build paths become a token that gpu-check.sh replaces with the bundle's place on the device.
  sed "s|$BUILD|@IP_BUNDLE_BUILD@|g" "$f" >"$B/build/tests/${t}_tests.cmake.in"
done
cp "$BUILD/bench/kernel_bench" "$B/build/bench/" && progs+=("$B/build/bench/kernel_bench")
cp "$BUILD/experiments/indexpool" "$B/build/experiments/" && progs+=("$B/build/experiments/indexpool")
# What ptxas said of each kernel of this build (registers, spills), for the device run's record.
/usr/bin/python3 "$ROOT/scripts/kernel_resources.py" "$BUILD" >"$B/kernel_resources.txt" ||
  { echo "device-bundle: scripts/kernel_resources.py $BUILD failed" >&2; exit 1; }
{
  echo "# IndexPool device bundle: the GPU tests only (label gpu)."
  for t in "${gpu_targets[@]}"; do echo "include(\"@IP_BUNDLE_BUILD@/tests/${t}_tests.cmake\")"; done
} >"$B/build/tests/CTestTestfile.cmake.in"
echo 'subdirs("tests")' >"$B/build/CTestTestfile.cmake"
# Host symbols only; the .nv_fatbin sections with the device code stay.
strip --strip-unneeded "${progs[@]}"

# Shared libraries: everything the programs load except glibc and the driver. libstdc++, libgcc_s and
# libgomp go to lib-compat/ (used on the device only when its own are too old: newer ones serve older
# programs), CUPTI to lib-cupti/ (used only when the device's toolkit has no CUPTI of the same major).
declare -A seen=()
glibc_re='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libutil\.so|libresolv\.so|libmvec\.so|libcuda\.so|libnvidia-)'
for p in "${progs[@]}"; do
  while read -r name _ path _; do
    [[ -n "${path:-}" && "$path" == /* && -z "${seen[$name]:-}" ]] || continue
    seen[$name]=1
    [[ "$name" =~ $glibc_re ]] && continue
    case "$name" in
      libstdc++.so*|libgcc_s.so*|libgomp.so*) cp -L "$path" "$B/lib-compat/$name" ;;
      libcupti.so*) cp -L "$path" "$B/lib-cupti/$name" ;;
      *) cp -L "$path" "$B/lib/$name" ;;
    esac
  done < <(ldd "$p" | awk '/=>/ {print $1, $2, $3, $4}')
done
# CUPTI loads the NVPerf host library at run time (it never shows in ldd); counters need it.
cupti_src=$(ldd "$B/build/experiments/indexpool" | awk '/libcupti/ {print $3}')
if [[ -n "$cupti_src" ]]; then
  for x in libnvperf_host.so libnvperf_target.so; do
    [[ -f "$(dirname "$cupti_src")/$x" ]] && cp -L "$(dirname "$cupti_src")/$x" "$B/lib-cupti/$x"
  done
fi
# Every non-glibc library must now resolve inside the bundle.
for p in "${progs[@]}"; do
  leaks=$(LD_LIBRARY_PATH="$B/lib:$B/lib-compat:$B/lib-cupti" ldd "$p" | awk '/=>/ {print $1, $3}' |
    grep -vE "$glibc_re" | grep -v " $B/" || true)
  [[ -z "$leaks" ]] || { echo "device-bundle: $(basename "$p") still loads from outside the bundle: $leaks" >&2; exit 1; }
done

# ---- manifest ---------------------------------------------------------------------------------------
# The fingerprint covers the files the programs are built from, so gpu-check.sh can tell a bundle built
# from other sources than the tree it travels with.
cd "$ROOT"
mapfile -t srcs < <(git ls-files -- CMakeLists.txt core kernels experiments cache_sim tests bench | grep -v '\.md$' | sort)
glibc_of() { for p in "$@"; do objdump -T "$p" 2>/dev/null | grep -oE 'GLIBC_[0-9.]+'; done | sort -uV | tail -1; }
glibc_need=$(glibc_of "${progs[@]}" "$B"/lib/* "$B"/lib-cupti/*)
glibc_compat=$(glibc_of "$B"/lib-compat/*)
dirty=$(git status --porcelain -- "${srcs[@]}" | wc -l)
{
  echo "IndexPool device bundle"
  echo "made: $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname) ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))"
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)$( ((dirty)) && echo " plus $dirty uncommitted source files")"
  echo "cuda_architectures: $ARCH"
  echo "nvcc: $(nvcc --version 2>/dev/null | grep -oE 'release [0-9.]+' | cut -d' ' -f2)"
  echo "c++: $(c++ --version | head -1)"
  echo "glibc_needed: ${glibc_need#GLIBC_} (the device's glibc must be this or newer; ${glibc_compat#GLIBC_} when lib-compat is used)"
  echo "programs: ${gpu_targets[*]} kernel_bench indexpool"
  echo "lib: $(cd "$B/lib" && ls | tr '\n' ' ')"
  echo "lib-compat: $(cd "$B/lib-compat" && ls | tr '\n' ' ')"
  echo "lib-cupti: $(cd "$B/lib-cupti" && ls | tr '\n' ' ')"
  echo "sources_sha256: $(sha256sum "${srcs[@]}" | sha256sum | cut -c1-64)"
  echo "# per-file sha256 of the sources, for gpu-check.sh to name the files that differ"
  sha256sum "${srcs[@]}"
} >"$B/MANIFEST.txt"

mkdir -p "$OUTDIR"
tmp=$OUTDIR/indexpool-bundle.tar.xz.tmp
# One xz stream with a 64 MiB dictionary (-9, one thread): the programs share the same kernels' device
# code, which the large dictionary stores once (40 MiB at -6 became 17 MiB).
tar -C "$STAGE" -cf - indexpool-bundle | xz -T1 -9 >"$tmp"
mv "$tmp" "$OUTDIR/indexpool-bundle.tar.xz"
cp "$B/MANIFEST.txt" "$OUTDIR/MANIFEST.txt"
say "wrote $OUTDIR/indexpool-bundle.tar.xz ($(du -m "$OUTDIR/indexpool-bundle.tar.xz" | cut -f1) MiB; unpacked $(du -sm "$B" | cut -f1) MiB)"
say "$(sed -n '3p;4p;7p' "$B/MANIFEST.txt" | tr '\n' ';' | sed 's/;$//')"
((dirty == 0)) || say "warning: built with $dirty uncommitted source files; commit them, or the device run is of code no commit holds"
say "on the device: scripts/gpu-check.sh into a folder, packed into one archive under \$OUT (the device tool returns at most 8 files); carry [\".devbundle\"] (see kernels/DEVICE_RUNS.md)"
