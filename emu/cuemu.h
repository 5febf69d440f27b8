// cuemu: runs IndexPool's CUDA kernels on the CPU, for machines without a GPU.
//
// The kernel sources (kernels/*.cu, *.cuh) are compiled by the host C++ compiler with this header
// force-included (-include emu/cuemu.h). Each CUDA thread of a block runs as a fiber on one OS thread;
// __syncthreads, __syncwarp and the warp shuffles are real barriers between the fibers, so a kernel
// that leaves out a barrier, diverges around one, or reads a lane outside a shuffle's mask is reported
// instead of silently working. Blocks (or clusters, below) run one after another; clusters, blocks, warps
// and lanes in a seeded random order (CUEMU_ORDER = shuffle, the default, forward or reverse; CUEMU_SEED).
// With CUEMU_RESIDENT=K (or set_resident_blocks), K blocks of a launch without clusters are resident at
// once, as on a GPU: they take turns at every barrier and __nanosleep, and a finished block's place goes
// to the next one, so a kernel whose blocks wait for each other (a spin-wait on a counter) runs
// (CUEMU_RESIDENT_ONLY=NAME: only in the kernels whose names contain NAME, to find which one fails).
// CUEMU_PREEMPT=P (or set_preempt) adds turns between barriers: with several blocks resident (or a
// cluster), a thread's atomic on device memory, its __threadfence or its mapping of another cluster
// block's shared memory ends its block's turn with probability P (seeded by CUEMU_SEED), before the
// block's other threads go on, so another block runs
// between a signal (a ticket, a done count) and the signalling block's next writes: a block that
// signals before all of its writes are made shows there. The runtime API
// (cudaMalloc, streams, events, ...) is implemented by emu/cuemu.cc over host memory, synchronously,
// which is one legal order of any correct stream program. Device allocations end at a PROT_NONE page, so a kernel that reads or
// writes past the end of a buffer stops with the kernel, block and thread that did it.
//
// Thread block clusters (IP_LAUNCH_CLUSTER, kernels/cluster.cuh): the blocks of a cluster run together
// as one set of fibers, each block with its own dynamic shared memory (which cluster_map_shared maps into
// the others'), and the cluster barrier is a barrier over all of them. A missing cluster barrier shows in
// some block orders, not all. Mapping another block's shared memory before the thread's first cluster
// barrier, or after that block has exited, is reported; an exited block's shared memory is filled with
// 0xFF (and poisoned under AddressSanitizer), so a read through an address mapped earlier shows too.
//
// Chained launches (IP_LAUNCH_CHAINED with chain true): a thread that exits without wait_for_prior_grids is
// reported. Loads and stores with cache hints (__ldg, __ldcs, __ldcg, __stcs, __stcg) at an address not
// aligned for their type are reported (plain misaligned accesses only by the sanitizer build). Kernels'
// local variables start as a fill pattern (-ftrivial-auto-var-init=pattern, emu/CMakeLists.txt).
//
// One host thread may launch at a time (the emulator's state is global, like a CUDA context's).
// Shared memory, static and dynamic, is filled with 0xFF at every block start, so a read before a write
// shows as NaN or -1. What it does not check: timing and occupancy, the memory model (blocks
// interleave only at barriers and sleeps, and with CUEMU_PREEMPT at device atomics and fences; every write is
// seen at once, so most inter-block races and
// stale cached reads do not show), the accuracy of fast-math intrinsics (they are
// computed exactly).
//
// Races inside a block: in the plain build, a missing barrier shows only when the run order exposes it
// (CUEMU_ORDER, CUEMU_SEED). Built with ThreadSanitizer (make test-race) each CUDA thread is also a
// ThreadSanitizer fiber whose only happens-before edges are CUDA's (__syncthreads, the cluster barrier,
// __syncwarp among its mask, block start and end; not shuffles, votes or fences; atomics are relaxed), so
// two threads' conflicting accesses to shared or device memory without a barrier between them are
// reported whatever the order. Blocks run one after another there, each after the last, unless several are
// resident (CUEMU_RESIDENT): then the blocks of a launch are unordered, as on a GPU, but for what
// device-memory atomics and __threadfence give them (a fence then an atomic releases, an atomic or
// load_relaxed then a fence acquires; tsan_atomic below), so a block that reads what another wrote without
// that chain (a missing fence on either side, a plain read of a count) is reported. Blocks that follow one
// another in a slot are one thread each to it (a race between just those goes unseen).
#pragma once

#define IP_CUEMU 1

// Before cuda_runtime.h: host_defines.h keeps definitions made here. __shared__ arrays become function
// statics: one block runs at a time, so one copy per kernel is one copy per block. They all sit in one
// section, which the emulator fills with 0xFF before every block (as it does dynamic shared memory) and,
// with several blocks resident, saves and restores whenever another block takes its turn.
#define __shared__ static __attribute__((section("cuemu_shared")))
// Kernels are inline functions here: their __shared__ statics then live in COMDAT groups like those of
// the inline device functions, and GCC can put both kinds into the one section.
#define __global__ inline
#define __launch_bounds__(...)
// The memory-access profile (CUEMU_MEMPROF, below) tells instructions apart by where the hook is called
// from: the wrappers of loads, stores and atomics are inlined into each kernel there.
#if defined(CUEMU_MEMPROF)
#define CUEMU_WRAP inline __attribute__((always_inline))
#else
#define CUEMU_WRAP
#endif

#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <bit>
#include <cstring>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace cuemu {

// The CUDA thread the calling fiber is.
struct ThreadCoords {
  uint3 thread_idx;
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
};
const ThreadCoords& coords();

// Block and warp barriers (abort with a diagnosis on deadlock or divergence).
void syncthreads();
void syncwarp(unsigned mask);

// One warp-collective operation: every lane in `mask` arrives with `in` and `out` (on its own stack);
// when all have arrived, fn runs once with every lane's pointers (indexed by lane; null for lanes not in
// the mask) and each lane's `arg`.
using WarpFn = void (*)(const void* const* in, void* const* out, const int* arg, unsigned mask);
void warp_collective(WarpFn fn, unsigned mask, const void* in, void* out, int arg);

unsigned lane_id();
unsigned char* dynamic_shared();

// Thread block clusters (sm_90; kernels/cluster.cuh wraps these and cooperative_groups): the blocks of a
// cluster run together as one set of fibers, each with its own dynamic shared memory. cluster_sync is
// a barrier over every thread of the cluster; cluster_map_shared maps an address in the calling block's
// dynamic shared memory to the same offset in block `rank`'s (distributed shared memory). Static
// __shared__ arrays are one copy per kernel here, so a kernel launched with clusters may not write them
// (reported at the end of the cluster).
unsigned cluster_block_rank();
unsigned cluster_num_blocks();
void cluster_sync();
void* cluster_map_shared(void* p, unsigned rank);

// What the program has done on the emulated device so far, for tests of where one-time work happens:
// allocations (cudaMalloc, cudaMallocHost) and kernels launched for the first time (on a GPU with lazy
// module loading, the CUDA 12.2+ default, the launches that load a kernel).
struct Counts {
  std::uint64_t allocations = 0;
  std::uint64_t first_launches = 0;
  std::uint64_t preemptions = 0;  // block turns ended at an atomic or fence (CUEMU_PREEMPT)
};
Counts counts();

// The memory-access profile (make mem-profile; emu/memprof_hooks.cc). Kernels compiled with GCC's
// ThreadSanitizer instrumentation (-fsanitize=thread, with __SANITIZE_THREAD__ undefined and the
// emulator's hooks in place of ThreadSanitizer's runtime, -DCUEMU_MEMPROF) report their loads and stores
// (those the instrumentation sees: not the bytes a memcpy call moves, which the kernels use only between
// registers and locals); the emulator keeps those a CUDA thread makes to device memory (cudaMalloc,
// cudaMallocHost) and to shared memory (dynamic, and the static __shared__ arrays it knows:
// static_shared_arrays; a template kernel's outside namespace ip::cuda are left out), and groups them
// into warp requests: the n-th execution of one instruction (the return address
// of the hook) by each lane of a warp is one request. Per instruction and launch it counts, as Nsight
// Compute does at L1:
//   device memory: requests, the 32-byte sectors each touches (hit or miss) and the fewest sectors its
//     distinct bytes could take ("ideal"): sectors / ideal > 1 is an uncoalesced access;
//   shared memory: requests and wavefronts (per phase of 32 / 16 / 8 lanes for accesses of <= 4 / 8 /
//     16 bytes, the most distinct 4-byte words any bank holds; atomics: the most lanes on one bank),
//     against the fewest the distinct words could take;
//   atomics on device memory: requests, lanes and the distinct addresses of each request;
// and per launch the distinct sectors of device memory loaded and stored (atomics not included; a
// floor on the launch's DRAM traffic). In resident-block mode a launch's requests are kept to its end.
// 128-bit atomics have no hook (a kernel using them would not link).
// A lane that diverges shifts its later executions of an instruction: the grouping is exact for code
// every lane of a warp runs alike (as the bandwidth-bound kernels do), an approximation elsewhere. The
// lanes run one after another here, so an address made from an atomic's return value (a slot taken
// with atomicAdd in a loop) follows the emulator's order: a warp's slots, consecutive on a GPU that
// aggregates the warp's atomics, can be a lane's consecutive ones here and look scattered. Local
// variables, kernel parameters and host memory are left out. Not modelled: caches, timing, the
// instruction-level split of a request into 128-byte transactions.
enum class MemSpace : std::uint8_t { global, shared };
enum class MemOp : std::uint8_t { load, store, atomic };
struct MemRow {
  std::uintptr_t pc = 0;  // the instruction, relative to its module's load address
  std::string module;     // the file it is in
  long long module_mtime = 0;  // that file's modification time (s): a later build moves the instructions
  MemSpace space = MemSpace::global;
  MemOp op = MemOp::load;
  std::uint64_t requests = 0;  // warp requests
  std::uint64_t lanes = 0;     // thread accesses
  std::uint64_t bytes = 0;     // bytes the threads accessed (a broadcast counted once per lane)
  std::uint64_t units = 0;     // sectors (device memory) or wavefronts (shared memory)
  std::uint64_t ideal = 0;     // the fewest units the requests' distinct bytes could take
  std::uint64_t addresses = 0;  // atomics: distinct addresses summed over the requests
};
struct MemLaunch {
  std::uint64_t index = 0;  // launches since the profile began, from 0
  std::string label;        // memprof_label's at the launch
  int run = -1;             // memprof_run's at the launch (-1: none)
  std::string kernel, file;  // the launch site's kernel expression and file
  std::string symbol;        // the kernel's function, demangled ("" without a symbol table)
  int line = 0;
  dim3 grid, block;
  std::vector<MemRow> rows;
  std::uint64_t unique_load_sectors = 0, unique_store_sectors = 0;  // distinct sectors over the launch
};
// True when this program's kernels report their accesses (built with the instrumentation above).
bool memprof_instrumented();
// Starts (true) or stops collecting from the next launch. CUEMU_MEMPROF=<file> starts it at the first
// launch and writes each launch as one JSON line there.
void memprof_enable(bool on);
// The launches profiled since the last call (not those written to CUEMU_MEMPROF's file).
std::vector<MemLaunch> memprof_take();
// A label for the launches that follow (kernel_bench: the case), kept with each; it sets the run to -1.
void memprof_label(const std::string& label);
// The run of the labelled work the launches that follow belong to (kernel_bench: each timed call; -1 none).
void memprof_run(int run);
// Called by the hooks (emu/memprof_hooks.cc) and the atomics: one access by the calling thread.
extern bool g_memprof;
void memprof_access(const void* p, std::size_t n, MemOp op, const void* pc);
[[gnu::noinline]] void memprof_atomic(const void* p, std::size_t n);

[[noreturn]] void fatal_shfl_source(int lane, int src, unsigned mask);
// How many blocks of a launch without clusters are resident at once (1: one after another, the default
// unless CUEMU_RESIDENT says otherwise); returns the previous number. For launches made after the call.
unsigned set_resident_blocks(unsigned k);
// The probability that a thread's device-memory atomic, __threadfence or mapping of another cluster block's
// shared memory (cluster_map_shared) ends its block's turn (0: never,
// the default unless CUEMU_PREEMPT says otherwise); returns the previous one. Takes effect only where
// several blocks are resident at once (set_resident_blocks, clusters).
double set_preempt(double p);
extern double g_preempt;  // set_preempt's value, read inline by the atomics
// A preemption point: p is the address an atomic updated (nullptr: a fence).
void preempt_point(const void* p);
inline void maybe_preempt(const void* p) {
  if (g_preempt > 0) preempt_point(p);
}
// The race check between resident blocks (ThreadSanitizer builds; no-ops elsewhere and with one block
// resident, where blocks run one after another). CUDA orders two blocks' accesses only through device
// memory: a __threadfence followed by a strong write (an atomic) is a release, a strong read (an atomic, a
// relaxed or volatile load) followed by a __threadfence an acquire. tsan_atomic (at every atomic, right
// after it): on device memory, a release of its address (the update included) when the thread has fenced
// since its last device atomic, and a strong read. tsan_strong_read: the read, which a later tsan_fence (__threadfence) of the
// same thread, or of a thread of its block that has since passed a barrier after it, acquires.
void tsan_atomic(const void* p);
void tsan_strong_read(const void* p);
void tsan_fence();
// The static __shared__ arrays the emulator fills with 0xFF at every block start and keeps per resident
// block, as "name bytes": the section cuemu_shared, then the arrays of template functions by symbol.
std::vector<std::string> static_shared_arrays();
// __nanosleep: the thread gives the other resident blocks their turn. Only a spin-wait calls it; a wait
// during which no thread of the launch gets anywhere (no barrier, collective or exit) for many turns in a
// row is reported as a wait that never ends (with one block resident: any wait at all).
void sleep();
// __trap: the kernel stops the program with the thread that trapped (on a GPU the launch fails).
[[noreturn]] void fatal_trap();

// The collectives run in the emulator's own context (the scheduler's), outside every CUDA thread: in a
// race-check build their copies between the lanes are not the kernel's accesses.
#if defined(__SANITIZE_THREAD__)
#define CUEMU_NO_RACE_CHECK __attribute__((no_sanitize_thread))
#else
#define CUEMU_NO_RACE_CHECK
#endif
// The shuffle collective: lane l gets the value of lane arg[l], which must be in the mask.
template <class T>
CUEMU_NO_RACE_CHECK void shfl_fn(const void* const* in, void* const* out, const int* arg, unsigned mask) {
  for (int l = 0; l < 32; ++l) {
    if (!((mask >> l) & 1u)) continue;
    const int src = arg[l];
    if (src < 0 || src >= 32 || !((mask >> src) & 1u) || !in[src]) fatal_shfl_source(l, src, mask);
    __builtin_memcpy(out[l], in[src], sizeof(T));
  }
}

template <class T>
T shfl_from(unsigned mask, T v, int src) {
  static_assert(std::is_trivially_copyable_v<T>);
  T r;
  warp_collective(&shfl_fn<T>, mask, &v, &r, src);
  return r;
}

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, fragment layout as in the PTX ISA.
void mma_m16n8k16_bf16(float (&c)[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t a2, std::uint32_t a3,
                       std::uint32_t b0, std::uint32_t b1);
// mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32: the same fragment layout with f16 halves.
void mma_m16n8k16_f16(float (&c)[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t a2, std::uint32_t a3,
                      std::uint32_t b0, std::uint32_t b1);

// ---- kernel launches ----
struct LaunchSite {
  const char* file;
  int line;
  const char* kernel;
};
using BlockBody = void (*)(void* launch);
// Runs body(launch) on every thread of every block; returns the error the launch sets (configuration
// errors as cudaErrorInvalidConfiguration / cudaErrorInvalidValue, like the runtime).
// cluster: blocks a cluster along x (1: no clusters).
// chained: launched with programmatic dependent launch (IP_LAUNCH_CHAINED with chain true): every thread
// must call griddep_wait (wait_for_prior_grids) before it exits, or the launch is reported.
void run_grid(const LaunchSite& site, const void* kernel, dim3 grid, dim3 block, std::size_t smem, cudaStream_t stream,
              BlockBody body, void* launch, unsigned cluster, bool chained = false);
// wait_for_prior_grids (griddepcontrol.wait) in a kernel: a no-op here (kernels run one after another),
// recorded so that a chained kernel that never waits is reported.
void griddep_wait();
// A load or store with a cache hint (__ldg, __ldcs, ...) at an address not aligned for its type: on a GPU
// the launch fails with a misaligned address; here the program stops with the thread that did it.
[[noreturn]] void fatal_misaligned(const void* p, std::size_t align, const char* what);
template <class T>
inline void check_aligned(const T* p, const char* what) {
  if (reinterpret_cast<std::uintptr_t>(p) % alignof(T) != 0) fatal_misaligned(p, alignof(T), what);
}

template <class... P>
struct Launch {
  LaunchSite site;
  dim3 grid, block;
  std::size_t smem;
  cudaStream_t stream;
  void (*kernel)(P...);
  unsigned cluster = 1;
  bool chained = false;

  template <class... A>
  void operator()(A&&... args) const {
    struct Bound {
      void (*kernel)(P...);
      std::tuple<std::decay_t<P>...> params;
    } bound{kernel, std::tuple<std::decay_t<P>...>(std::forward<A>(args)...)};
    run_grid(
        site, reinterpret_cast<const void*>(kernel), grid, block, smem, stream,
        [](void* b) {
          auto* bd = static_cast<Bound*>(b);
          std::tuple<std::decay_t<P>...> copy = bd->params;  // each thread gets its own parameters
          std::apply(bd->kernel, copy);
        },
        &bound, cluster, chained);
  }
};

template <class... P>
Launch<P...> launch(const char* file, int line, const char* name, dim3 grid, dim3 block, std::size_t smem,
                    cudaStream_t stream, void (*kernel)(P...)) {
  return Launch<P...>{{file, line, name}, grid, block, smem, stream, kernel};
}

template <class... P>
Launch<P...> launch_cluster(const char* file, int line, const char* name, dim3 grid, dim3 block, std::size_t smem,
                            cudaStream_t stream, unsigned cluster, void (*kernel)(P...)) {
  return Launch<P...>{{file, line, name}, grid, block, smem, stream, kernel, cluster};
}

template <class... P>
Launch<P...> launch_chained(const char* file, int line, const char* name, dim3 grid, dim3 block, std::size_t smem,
                            cudaStream_t stream, bool chain, void (*kernel)(P...)) {
  return Launch<P...>{{file, line, name}, grid, block, smem, stream, kernel, 1, chain};
}

}  // namespace cuemu

// ---- the device built-ins the kernels use ----
#define threadIdx (::cuemu::coords().thread_idx)
#define blockIdx (::cuemu::coords().block_idx)
#define blockDim (::cuemu::coords().block_dim)
#define gridDim (::cuemu::coords().grid_dim)

inline void __syncthreads() {
  ::cuemu::syncthreads();
}
inline void __syncwarp(unsigned mask = 0xFFFFFFFFu) {
  ::cuemu::syncwarp(mask);
}
inline void __threadfence() {
#if defined(__SANITIZE_THREAD__)
  ::cuemu::tsan_fence();
#endif
  ::cuemu::maybe_preempt(nullptr);
}
inline void __nanosleep(unsigned) {
  ::cuemu::sleep();
}
inline void __threadfence_block() {}
[[noreturn]] inline void __trap() {
  ::cuemu::fatal_trap();
}

// Lane offsets as shfl.sync reads them (PTX ISA, shfl.sync: bval[4:0] = b[4:0]): srcLane, laneMask and delta
// count modulo 32, so a delta of 33 is a delta of 1 (and 32 is 0: the caller's own value), as on a GPU.
template <class T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  const int lane = static_cast<int>(::cuemu::lane_id());
  const int base = lane & ~(width - 1);
  return ::cuemu::shfl_from(mask, v, base + (src & (width - 1)));
}
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  const int lane = static_cast<int>(::cuemu::lane_id());
  int src = lane ^ (lane_mask & 31);
  if ((src & ~(width - 1)) > (lane & ~(width - 1))) src = lane;  // a later segment: own value (an earlier one's lane
                                                                 // is read, as CUDA documents)
  return ::cuemu::shfl_from(mask, v, src);
}
template <class T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  const int lane = static_cast<int>(::cuemu::lane_id());
  const int src = lane - static_cast<int>(delta & 31u);
  return ::cuemu::shfl_from(mask, v, src < (lane & ~(width - 1)) ? lane : src);
}
template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  const int lane = static_cast<int>(::cuemu::lane_id());
  const int src = lane + static_cast<int>(delta & 31u);
  return ::cuemu::shfl_from(mask, v, src >= (lane & ~(width - 1)) + width ? lane : src);
}

// The runtime's template overload (cuda_runtime.h declares it for nvcc only).
template <class T>
cudaError_t cudaFuncSetAttribute(T* entry, cudaFuncAttribute attr, int value) {
  return ::cudaFuncSetAttribute(reinterpret_cast<const void*>(entry), attr, value);
}

template <class T>
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, T* entry, int threads, std::size_t smem) {
  return ::cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, reinterpret_cast<const void*>(entry), threads, smem);
}

// Loads and stores with cache hints are plain loads and stores, at addresses aligned for their type (a
// misaligned one stops the program, as the launch fails on a GPU).
template <class T>
CUEMU_WRAP T __ldg(const T* p) {
  ::cuemu::check_aligned(p, "__ldg");
  return *p;
}
template <class T>
CUEMU_WRAP T __ldcs(const T* p) {
  ::cuemu::check_aligned(p, "__ldcs");
  return *p;
}
template <class T>
CUEMU_WRAP T __ldcg(const T* p) {
  ::cuemu::check_aligned(p, "__ldcg");
  return *p;
}
template <class T>
CUEMU_WRAP void __stcs(T* p, T v) {
  ::cuemu::check_aligned(p, "__stcs");
  *p = v;
}
template <class T>
CUEMU_WRAP void __stcg(T* p, T v) {
  ::cuemu::check_aligned(p, "__stcg");
  *p = v;
}

// Atomics: fibers never interleave inside a function call, so plain read-modify-writes are atomic. In a
// race-check build (ThreadSanitizer, make test-race) the load and store are relaxed atomic accesses, as
// CUDA's atomics are: they never race with each other, order nothing else, and race with another thread's
// plain access to the same address unless a barrier lies between them.
namespace cuemu {
template <class T, class F>
CUEMU_WRAP T atomic_update(T* p, F f) {
#if defined(__SANITIZE_THREAD__) || defined(CUEMU_MEMPROF)
  using U = std::conditional_t<sizeof(T) == 8, std::uint64_t, std::conditional_t<sizeof(T) == 4, std::uint32_t,
                                                                                   std::uint16_t>>;
  static_assert(sizeof(T) == sizeof(U), "atomics on 2, 4 or 8 bytes");
  U* const q = reinterpret_cast<U*>(p);
  const T old = std::bit_cast<T>(__atomic_load_n(q, __ATOMIC_RELAXED));
  __atomic_store_n(q, std::bit_cast<U>(static_cast<T>(f(old))), __ATOMIC_RELAXED);
#if defined(CUEMU_MEMPROF)
  memprof_atomic(p, sizeof(T));  // (the two accesses above are atomic ones, which the profile leaves out)
#else
  tsan_atomic(p);  // after the store: a release publishes the update itself too
#endif
#else
  const T old = *p;
  *p = f(old);
#endif
  maybe_preempt(p);  // after the update: other blocks may see it before this thread goes on
  return old;
}

// A strong (relaxed) load, as a spin-wait's volatile read of a count other blocks add to is on a GPU: in the
// race-check build a relaxed atomic load (no race with the atomics that update it) that a later
// __threadfence makes an acquire (tsan_fence); elsewhere a volatile load.
template <class T>
CUEMU_WRAP T load_relaxed(const T* p) {
#if defined(__SANITIZE_THREAD__)
  using U = std::conditional_t<sizeof(T) == 8, std::uint64_t, std::uint32_t>;
  static_assert(sizeof(T) == sizeof(U), "relaxed loads of 4 or 8 bytes");
  const T v = std::bit_cast<T>(__atomic_load_n(reinterpret_cast<const U*>(p), __ATOMIC_RELAXED));
  tsan_strong_read(p);
  return v;
#else
  return *reinterpret_cast<const volatile T*>(p);
#endif
}
}  // namespace cuemu
template <class T>
CUEMU_WRAP T atomicAdd(T* p, std::type_identity_t<T> v) {
  return ::cuemu::atomic_update(p, [v](T x) { return static_cast<T>(x + v); });
}
template <class T>
CUEMU_WRAP T atomicOr(T* p, std::type_identity_t<T> v) {
  return ::cuemu::atomic_update(p, [v](T x) { return static_cast<T>(x | v); });
}
template <class T>
CUEMU_WRAP T atomicAnd(T* p, std::type_identity_t<T> v) {
  return ::cuemu::atomic_update(p, [v](T x) { return static_cast<T>(x & v); });
}
template <class T>
CUEMU_WRAP T atomicMin(T* p, std::type_identity_t<T> v) {
  return ::cuemu::atomic_update(p, [v](T x) { return v < x ? v : x; });
}
template <class T>
CUEMU_WRAP T atomicMax(T* p, std::type_identity_t<T> v) {
  return ::cuemu::atomic_update(p, [v](T x) { return v > x ? v : x; });
}
template <class T>
CUEMU_WRAP T atomicExch(T* p, std::type_identity_t<T> v) {
  return ::cuemu::atomic_update(p, [v](T) { return v; });
}
template <class T>
CUEMU_WRAP T atomicCAS(T* p, std::type_identity_t<T> cmp, std::type_identity_t<T> v) {
  return ::cuemu::atomic_update(p, [cmp, v](T x) { return x == cmp ? v : x; });
}

inline float __int_as_float(int i) { return std::bit_cast<float>(i); }
inline int __float_as_int(float f) { return std::bit_cast<int>(f); }
inline float __uint_as_float(unsigned u) { return std::bit_cast<float>(u); }
inline unsigned __float_as_uint(float f) { return std::bit_cast<unsigned>(f); }
// Round-to-nearest products and sums that must not be contracted into an fma.
inline float __fmul_rn(float a, float b) {
  volatile float r = a * b;
  return r;
}
inline float __fadd_rn(float a, float b) {
  volatile float r = a + b;
  return r;
}
inline int __popc(unsigned x) {
  return __builtin_popcount(x);
}
inline int __popcll(unsigned long long x) {
  return __builtin_popcountll(x);
}
inline int __clz(unsigned x) {
  return x ? __builtin_clz(x) : 32;
}
inline int __ffs(unsigned x) {
  return __builtin_ffs(static_cast<int>(x));
}

// CUDA's device min/max overloads for integers; those for float and double are fminf/fmaxf and fmin/fmax
// (crt/math_functions.hpp), which return the other argument when one is NaN.
#define IP_CUEMU_MINMAX(T) \
  inline T min(T a, T b) { \
    return b < a ? b : a;  \
  }                        \
  inline T max(T a, T b) { \
    return a < b ? b : a;  \
  }
IP_CUEMU_MINMAX(int)
IP_CUEMU_MINMAX(unsigned)
IP_CUEMU_MINMAX(long)
IP_CUEMU_MINMAX(unsigned long)
IP_CUEMU_MINMAX(long long)
IP_CUEMU_MINMAX(unsigned long long)
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
inline double min(double a, double b) { return std::fmin(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }
#undef IP_CUEMU_MINMAX
