# IndexPool: two commands on a fresh Debian/Ubuntu machine.
#   make run    install what is missing, build, run the quickstart sweep (the main job)
#   make test   install what is missing, build, run every test (but the long CPU-emulator cases: make test-emu)
# Other targets: build, bench, figures, report, kernel-figures, venv, device-bundle, kernel-resources, sass-counts, test-emu,
# test-sanitize, test-race, mem-profile, clean.

BUILD_DIR  ?= build
BUILD_TYPE ?= Release
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=
# The analysis package (analysis/) runs in a virtual environment made from Debian's Python.
PYTHON      ?= /usr/bin/python3
VENV        ?= .venv
RESULTS     ?=
FIGURES_DIR ?= results/figures
REPORT_DIR  ?= results/report

INDEXPOOL := $(BUILD_DIR)/experiments/indexpool
VENV_PY   := $(VENV)/bin/python

.PHONY: all deps configure build run test test-emu test-sanitize test-race mem-profile bench clean venv figures report kernel-figures device-bundle kernel-resources sass-counts

all: build

deps:
	@bash scripts/setup-deps.sh

configure: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_ARGS) > $(BUILD_DIR).configure.log 2>&1 \
	  || { cat $(BUILD_DIR).configure.log; exit 1; }
	@grep -E "^-- IndexPool" $(BUILD_DIR).configure.log || true

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

run: build
	$(INDEXPOOL) run configs/quickstart.ini --overwrite

test: build venv
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS) -LE emu_long
	INDEXPOOL_BIN=$(abspath $(INDEXPOOL)) $(VENV_PY) -m pytest -q -p no:cacheprovider tests/analysis

# The emulator and the GPU suites are built only when configure found the CUDA toolkit: without it the
# targets that run them stop here, before building, instead of running no test and passing.
# $(call need_cuda,DIR,TARGET)
need_cuda = @grep -q "^-- IndexPool: CUDA .* found" $(1).configure.log || { echo "make $(2): $(1) was \
  configured without the CUDA toolkit (no nvcc found, or INDEXPOOL_CUDA=OFF), so it has no kernel emulator \
  and no GPU suites to run; see $(1).configure.log" >&2; exit 1; }

# Every GPU suite on the CPU emulator (emu/), the long cases too (about 10 CPU-minutes).
test-emu: configure
	$(call need_cuda,$(BUILD_DIR),test-emu)
	@cmake --build $(BUILD_DIR) -j $(JOBS)
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS) -L emu

# The CPU suites and every GPU suite on the CPU emulator (the long cases too), built again in
# $(SANITIZE_DIR) with AddressSanitizer and UBSan: a kernel's or the host code's out-of-bounds read or write
# (device allocations, shared memory, host memory), misaligned vector loads, shifts past the width, signed
# overflow. Not part of make test (a second build, and the suites run several times slower). Without CUPTI:
# its libnvperf_host.so is opened with RTLD_DEEPBIND, which the sanitizer runtime refuses.
SANITIZE_DIR ?= $(BUILD_DIR)-sanitize
test-sanitize: deps
	@cmake -S . -B $(SANITIZE_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DINDEXPOOL_SANITIZE=address,undefined \
	  -DCMAKE_CUDA_ARCHITECTURES=90 -DINDEXPOOL_CUPTI=OFF > $(SANITIZE_DIR).configure.log 2>&1 \
	  || { cat $(SANITIZE_DIR).configure.log; exit 1; }
	@grep -E "^-- IndexPool" $(SANITIZE_DIR).configure.log || true
	@cmake --build $(SANITIZE_DIR) -j $(JOBS)
	UBSAN_OPTIONS=print_stacktrace=1 ctest --test-dir $(SANITIZE_DIR) --output-on-failure -j $(JOBS) -L 'cpu|emu'

# The race check: every GPU suite on the CPU emulator (not the long cases) built again in $(RACE_DIR) with
# ThreadSanitizer, each CUDA thread a fiber and CUDA's barriers its only happens-before edges (emu/cuemu.cc,
# CUEMU_TSAN): two threads of a block that access the same shared or device memory, one of them writing,
# with no __syncthreads, cluster barrier or __syncwarp between them, are reported as a data race whatever
# order the emulator ran them in. Blocks run one after another, except in the suites that keep several
# blocks resident (emu_resident.*: top-k's kernels whose blocks hand work on through counters): there the
# blocks of a launch are unordered but for device-memory atomics and __threadfence (a fence then an atomic
# releases, an atomic then a fence acquires), so a block reading what another wrote without a fence on
# both sides is reported too. The kernel benchmark's hang-guard test is left out (its own time limits are
# for the plain emulator). One OpenMP thread: the host reference code's OpenMP runtime is not instrumented.
RACE_DIR ?= $(BUILD_DIR)-race
RACE_TARGETS := emu_cuemu_test emu_attention_test emu_backend_test emu_device_test emu_incremental_test \
  emu_linear_attention_test emu_pool_test emu_score_test emu_stats_test emu_topk_select_test emu_topk_test \
  emu_warm_up_emu_test kernel_bench_emu
test-race: deps
	@cmake -S . -B $(RACE_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DINDEXPOOL_SANITIZE=thread \
	  -DCMAKE_CUDA_ARCHITECTURES=90 -DINDEXPOOL_CUPTI=OFF > $(RACE_DIR).configure.log 2>&1 \
	  || { cat $(RACE_DIR).configure.log; exit 1; }
	@grep -E "^-- IndexPool" $(RACE_DIR).configure.log || true
	$(call need_cuda,$(RACE_DIR),test-race)
	@cmake --build $(RACE_DIR) -j $(JOBS) --target $(RACE_TARGETS)
	OMP_NUM_THREADS=1 ctest --test-dir $(RACE_DIR) --output-on-failure -j $(JOBS) -L emu -LE emu_long \
	  -E '^emu\.KernelBench\.CaseTimeoutStopsTheRun$$'

# The memory-access profile (emu/cuemu.h; no GPU needed): kernel_bench's cases on the CPU emulator, built
# again in $(MEMPROF_DIR) with the kernels instrumented, one run of each case (MEMPROF_ARGS: the cases,
# default the smoke run at 1/256 of the sizes; e.g. MEMPROF_ARGS='--smoke --only topk'). Per kernel and
# instruction: device-memory requests and the 32-byte sectors they take against the fewest they could
# (coalescing), shared-memory wavefronts against the fewest (bank conflicts), atomics and their addresses.
# Writes $(MEMPROF_DIR)/memprof.jsonl (a line a launch) and $(MEMPROF_DIR)/memprof.txt (the summary, printed).
MEMPROF_DIR  ?= $(BUILD_DIR)-memprof
MEMPROF_ARGS ?= --smoke
mem-profile: deps
	@cmake -S . -B $(MEMPROF_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DINDEXPOOL_EMU_MEMPROF=ON -DINDEXPOOL_TESTS=OFF \
	  -DCMAKE_CUDA_ARCHITECTURES=90 -DINDEXPOOL_CUPTI=OFF > $(MEMPROF_DIR).configure.log 2>&1 \
	  || { cat $(MEMPROF_DIR).configure.log; exit 1; }
	@grep -q "instrumented for the memory-access profile" $(MEMPROF_DIR).configure.log \
	  || { echo "mem-profile: the emulator was not configured (no CUDA toolkit?): $(MEMPROF_DIR).configure.log"; exit 1; }
	@cmake --build $(MEMPROF_DIR) -j $(JOBS) --target kernel_bench_emu
	CUEMU_MEMPROF=$(MEMPROF_DIR)/memprof.jsonl $(MEMPROF_DIR)/bench/kernel_bench-emu $(MEMPROF_ARGS) --runs 1 \
	  --warmup 0 --no-hold --json $(MEMPROF_DIR)/kernel_bench.json > $(MEMPROF_DIR)/kernel_bench.txt
	$(PYTHON) scripts/emu_memprof_summary.py $(MEMPROF_DIR)/memprof.jsonl --csv $(MEMPROF_DIR)/memprof.csv \
	  --declared $(MEMPROF_DIR)/kernel_bench.json \
	  > $(MEMPROF_DIR)/memprof.txt
	@cat $(MEMPROF_DIR)/memprof.txt

# The venv is rebuilt whenever analysis/requirements.txt changes (exact versions, wheels only).
$(VENV)/.stamp: analysis/requirements.txt | deps
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(VENV_PY) -m pip install -q --disable-pip-version-check --only-binary=:all: -r analysis/requirements.txt
	touch $@

venv: $(VENV)/.stamp

# make figures / make report: from RESULTS=FILE.h5 when given, else from a fresh quickstart run.
ANALYSIS_INPUT := $(or $(RESULTS),results/quickstart.h5)

figures: venv $(if $(RESULTS),,run)
	$(VENV_PY) -m analysis figures $(ANALYSIS_INPUT) --out $(FIGURES_DIR)

report: venv $(if $(RESULTS),,run)
	$(VENV_PY) -m analysis report $(ANALYSIS_INPUT) --out $(REPORT_DIR)

# make kernel-figures: figures and a table from kernel_bench JSON files (BENCH_JSON=FILES, oldest first;
# default: the device runs in bench/device-runs/README.md's table, in its order) into results/kernels/.
KERNELS_DIR ?= results/kernels
BENCH_JSON  ?= $(addprefix bench/device-runs/,$(shell sed -n 's/^| `\([^`]*-kernel_bench\.json\)`.*/\1/p' bench/device-runs/README.md))

kernel-figures: venv
	$(VENV_PY) -m analysis kernels $(BENCH_JSON) --out $(KERNELS_DIR)

bench: build
	$(BUILD_DIR)/bench/indexpool_bench
	$(BUILD_DIR)/bench/runner_bench 200 --every-append
	$(BUILD_DIR)/bench/nvtx_bench
	@if [ -x $(BUILD_DIR)/bench/kernel_bench ]; then $(BUILD_DIR)/bench/kernel_bench; \
	  else echo "kernel_bench: not built (no CUDA toolkit at configure time)"; fi

# Registers, spills and shared memory of every CUDA kernel, as ptxas reported them (no GPU needed).
kernel-resources: build
	$(PYTHON) scripts/kernel_resources.py $(BUILD_DIR)

# Static instruction counts of the pooling kernel's paths (no GPU needed); cuobjdump and nvdisasm from PyPI into the venv.
sass-counts: build venv
	$(VENV_PY) scripts/pool_sass_counts.py --build $(BUILD_DIR)
	$(VENV_PY) scripts/kernel_load_order.py --build $(BUILD_DIR)

# Prebuilt GPU programs and their libraries for a device machine (kernels/DEVICE_RUNS.md).
device-bundle: deps
	bash scripts/device-bundle.sh --jobs $(JOBS)

clean:
	rm -rf $(BUILD_DIR) $(BUILD_DIR).configure.log $(SANITIZE_DIR) $(SANITIZE_DIR).configure.log $(RACE_DIR) \
	  $(RACE_DIR).configure.log $(MEMPROF_DIR) $(MEMPROF_DIR).configure.log $(VENV)
