# IndexPool: two commands on a fresh Debian/Ubuntu machine.
#   make run    install what is missing, build, run the quickstart sweep (the main job)
#   make test   install what is missing, build, run every test
# Other targets: build, bench, clean.

BUILD_DIR  ?= build
BUILD_TYPE ?= Release
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=

INDEXPOOL := $(BUILD_DIR)/experiments/indexpool

.PHONY: all deps configure build run test bench clean

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

test: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)

bench: build
	$(BUILD_DIR)/bench/indexpool_bench
	$(BUILD_DIR)/bench/runner_bench 200
	@if [ -x $(BUILD_DIR)/bench/kernel_bench ]; then $(BUILD_DIR)/bench/kernel_bench; \
	  else echo "kernel_bench: not built (no CUDA toolkit at configure time)"; fi

clean:
	rm -rf $(BUILD_DIR) $(BUILD_DIR).configure.log
