// cuemu runtime: fibers for CUDA threads, the block scheduler, warp collectives, guarded device memory,
// and the CUDA runtime API functions IndexPool calls (see emu/cuemu.h for what is and is not checked).
#include "emu/cuemu.h"

#include <dlfcn.h>
#include <cxxabi.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/json_text.h"

// The static __shared__ arrays of every kernel (section cuemu_shared, see cuemu.h); the linker defines
// these bounds when the section exists.
extern "C" unsigned char __start_cuemu_shared[] __attribute__((weak));
extern "C" unsigned char __stop_cuemu_shared[] __attribute__((weak));

// The hand-written x86-64 context switch, or ucontext elsewhere (and with -DCUEMU_UCONTEXT).
#if defined(__x86_64__) && !defined(CUEMU_UCONTEXT)
#define CUEMU_X86_SWITCH 1
#else
#define CUEMU_X86_SWITCH 0
#include <ucontext.h>
#endif

// Built with AddressSanitizer (make test-sanitize): every switch between stacks is announced to it, so it
// knows which stack the code runs on (else it may take a fiber's frames for a wild stack and report or
// miss accesses).
//
// The bytes around a cudaMalloc allocation and each block's dynamic shared memory, and (built with
// -fsanitize-sections=cuemu_shared) the redzones between static __shared__ arrays, are poisoned, so a
// kernel's out-of-bounds access is reported exactly where it happens, reads included (the guard pages
// and the slack check catch only some writes and accesses a page away).
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define CUEMU_ASAN 1
#define CUEMU_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define CUEMU_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#define CUEMU_NO_ASAN __attribute__((no_sanitize_address))
#else
#define CUEMU_ASAN 0
#define CUEMU_POISON(p, n) ((void)(p), (void)(n))
#define CUEMU_UNPOISON(p, n) ((void)(p), (void)(n))
#define CUEMU_NO_ASAN
#endif

// Built for ThreadSanitizer (make test-race; CUEMU_TSAN, set by the build for this file, which is itself
// compiled without instrumentation, so the emulator's own bookkeeping is never reported): every CUDA
// thread is a ThreadSanitizer fiber, and every stack switch is announced with no synchronization of its
// own. The only happens-before edges between the threads of a launch are those CUDA gives: the block
// barrier (__syncthreads), the cluster barrier, __syncwarp among the lanes of its mask, and the start
// and end of a block (blocks run one after another here, so one block's accesses come before the next
// one's, unless several are resident), and between blocks running at once (resident blocks, a cluster's)
// a device-memory atomic after a __threadfence (a release of its address) and a __threadfence after an
// atomic or load_relaxed (an acquire of the addresses its thread read so, or a thread of its block before
// a barrier this thread has passed: tsan_fence). Shuffles and votes give none, and the atomics (emu/cuemu.h)
// are relaxed atomic accesses: two threads' conflicting plain accesses to shared or device memory with
// none of those edges between them are reported as a data race, whatever order the emulator ran them in
// -- a missing barrier or fence that the run order happened to hide. Resident blocks' static __shared__
// arrays take turns at the same addresses: the check forgets those addresses' accesses at every swap.
// What it lets through: a fence releases what its thread saw up to its next device atomic, not only what
// came before the fence (exact snapshots per fence were tried: 8 times slower, and no race more found).
#if defined(CUEMU_TSAN) && CUEMU_TSAN
#include <sanitizer/tsan_interface.h>
// The runtime's entry points for a Java heap, which GCC 12's libtsan exports: __tsan_java_free drops what
// it keeps about a range (heap blocks, sync objects), __tsan_java_alloc then forgets its accesses, as for a
// new allocation (they need no __tsan_java_init; its AnnotateNewMemory does nothing).
extern "C" void __tsan_java_alloc(unsigned long ptr, unsigned long size);
extern "C" void __tsan_java_free(unsigned long ptr, unsigned long size);
#else
#undef CUEMU_TSAN
#define CUEMU_TSAN 0
#endif

namespace cuemu {
double g_preempt = 0;  // CUEMU_PREEMPT / set_preempt
namespace {

[[noreturn]] void die(const char* fmt, ...) {
  std::fflush(stdout);
  va_list ap;
  va_start(ap, fmt);
  std::fputs("cuemu: ", stderr);
  std::vfprintf(stderr, fmt, ap);
  std::fputc('\n', stderr);
  va_end(ap);
  std::abort();
}

const std::size_t kPage = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));

// Byte fills, copies and compares the sanitizer does not check: the emulator's own accesses to the static
// __shared__ section, whose redzones (between the arrays) stay poisoned for the kernels. Under the
// sanitizer, volatile loops, so the compiler does not turn them back into (checked) memset / memcpy calls;
// so too in the race check (ThreadSanitizer's memcpy would count them as the host thread's accesses);
// otherwise the library calls (resident blocks swap their arrays at every turn).
#if CUEMU_ASAN || CUEMU_TSAN
CUEMU_NO_ASAN void raw_fill(unsigned char* p, unsigned char v, std::size_t n) {
  volatile unsigned char* q = p;
  for (std::size_t i = 0; i < n; ++i) q[i] = v;
}
CUEMU_NO_ASAN void raw_copy(unsigned char* dst, const unsigned char* src, std::size_t n) {
  volatile unsigned char* d = dst;
  const volatile unsigned char* s = src;
  for (std::size_t i = 0; i < n; ++i) d[i] = s[i];
}
#else
void raw_fill(unsigned char* p, unsigned char v, std::size_t n) { std::memset(p, v, n); }
void raw_copy(unsigned char* dst, const unsigned char* src, std::size_t n) { std::memcpy(dst, src, n); }
#endif
// The index of the first byte in [p, p + n) that is not v, or n.
CUEMU_NO_ASAN std::size_t raw_find_not(const unsigned char* p, unsigned char v, std::size_t n) {
  const volatile unsigned char* q = p;
  for (std::size_t i = 0; i < n; ++i)
    if (q[i] != v) return i;
  return n;
}
std::size_t round_up(std::size_t n, std::size_t a) {
  return (n + a - 1) / a * a;
}

// ---------------------------------------------------------------- context switching
#if CUEMU_X86_SWITCH
extern "C" void cuemu_switch(void** save_sp, void* to_sp);
// Saves the callee-saved registers on the current stack, stores the stack pointer in *save_sp and
// resumes the context whose stack pointer is to_sp. The floating-point control state (MXCSR, x87) is
// not switched: kernels do not change it, so every fiber runs with the host thread's.
asm(R"(
.text
.globl cuemu_switch
.type cuemu_switch,@function
cuemu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
.size cuemu_switch, .-cuemu_switch
.section .note.GNU-stack,"",@progbits
.text
)");
#endif

// ---------------------------------------------------------------- fibers and blocks
enum class State : std::uint8_t { Ready, AtBarrier, AtCluster, AtWarp, Asleep, Preempted, Done };

struct Fiber {
#if CUEMU_X86_SWITCH
  void* sp = nullptr;
#else
  ucontext_t ctx;
#endif
  State state = State::Ready;
  unsigned lane = 0, warp = 0;
  unsigned slot = 0;  // the block's rank in its cluster (0 without clusters)
  void* asan_fake = nullptr;  // AddressSanitizer's fake-stack handle while the fiber is switched out
  ThreadCoords c{};
  // pending warp collective
  WarpFn fn = nullptr;
  unsigned mask = 0;
  const void* in = nullptr;
  void* out = nullptr;
  int arg = 0;
  // ThreadSanitizer (CUEMU_TSAN): barriers passed so far in this block, and __syncwarp calls per mask.
  std::uint32_t tsan_barriers = 0, tsan_clusters = 0;
  std::uint32_t tsan_masks[8] = {}, tsan_mask_calls[8] = {};
  unsigned tsan_n_masks = 0;
  bool tsan_fenced = false;  // a __threadfence since the thread's last device atomic (its next one releases)
  bool waited = false;       // griddep_wait called (chained launches)
};

struct Stack {
  unsigned char* base = nullptr;  // guard page first, then kStackBytes of stack
};

constexpr std::size_t kStackBytes = 256 * 1024;

struct Running {
  const LaunchSite* site = nullptr;
  BlockBody body = nullptr;
  void* launch = nullptr;
  dim3 grid, block;
  uint3 block_idx{};
  unsigned char* smem = nullptr;  // block rank 0's dynamic shared memory; rank r's is smem + r * smem_span
  std::size_t smem_bytes = 0, smem_span = 0;
  unsigned cluster = 1;  // blocks a cluster (along x)
  unsigned slots = 1;    // blocks resident at once (cluster, or the resident blocks of a launch without)
  bool chained = false;  // programmatic dependent launch: every thread must call griddep_wait
  // Clusters: the threads of each block of the running cluster that have exited, and the blocks all of
  // whose threads have (bit r: rank r), whose shared memory no other block may access any more.
  unsigned exited_threads[16] = {};
  std::uint32_t exited_blocks = 0;
};

struct Emu {
  std::vector<Stack> stacks;
  std::vector<Fiber> fibers;
  std::vector<unsigned> order;                       // lanes, 32
  std::vector<unsigned> warp_order;                  // warps of the block
  std::vector<unsigned> block_order;                 // blocks of the cluster (one without clusters)
  unsigned warp_first = 0, warp_lanes = 0, pos = 0;  // the warp running and its lane's index in order
  Fiber* cur = nullptr;
  Running* launch = nullptr;
#if CUEMU_X86_SWITCH
  void* sched_sp = nullptr;
#else
  ucontext_t sched_ctx;
#endif
  // The stack of the host thread that launched (the scheduler's), for AddressSanitizer's switches.
  const void* sched_stack = nullptr;
  std::size_t sched_stack_bytes = 0;
  void* sched_asan_fake = nullptr;
  // memory
  struct Alloc {
    unsigned char* map;
    std::size_t map_bytes;
    unsigned char* user;
    std::size_t bytes;
    bool device;
  };
  std::map<std::uintptr_t, Alloc> allocs;  // by user address
  std::size_t device_bytes = 0, peak_device_bytes = 0;
  unsigned char* smem_buf = nullptr;
  std::size_t smem_cap = 0;
  std::set<void*> streams, events;
  std::map<const void*, int> max_dyn_smem;
  std::set<const void*> non_portable_cluster;  // kernels allowed clusters of more than 8 blocks
  std::set<const void*> launched;              // kernels launched at least once
  Counts counts;
  cudaError_t last_error = cudaSuccess;
  std::uint64_t shuffle_state = 0;
  unsigned resident = 1;     // blocks resident at once in launches without clusters (CUEMU_RESIDENT)
  std::string resident_only;  // CUEMU_RESIDENT_ONLY: only kernels whose names contain it (empty: all)
  std::uint64_t arrivals = 0;  // barrier and collective arrivals and exits: a launch getting somewhere
  std::uint64_t preempt_state = 0;  // CUEMU_PREEMPT's random draws (apart from the orders')
  bool preempted = false;           // the running block's turn ends (preempt_point)
  // The static __shared__ arrays (find_static_regions), all of them `static_bytes`; with several blocks
  // resident, each slot's copy of them while another slot's are in place, and which slot's are (-1: none).
  struct Region {
    unsigned char* p;
    std::size_t n;
    std::string name;  // the symbol, or the section's name
  };
  std::vector<Region> static_regions;
  std::size_t static_bytes = 0;
  bool regions_found = false;
  bool symtab_read = false;  // the program's symbol table was there (not stripped)
  std::vector<std::vector<unsigned char>> static_copies;
  int static_owner = -1;
  enum class Order { Forward, Reverse, Shuffle } order_kind = Order::Shuffle;
  // ThreadSanitizer (CUEMU_TSAN): its fiber contexts (fiber index mod kTsanContexts), the launching
  // thread's, and the addresses its happens-before edges are attached to. Each barrier alternates
  // between two addresses: a thread passes barrier k + 1 only after every thread has arrived there, so
  // after every thread has acquired at barrier k; the clocks released at k + 1 never reach a thread
  // still acquiring at k.
  std::vector<void*> tsan_fibers;
  void* tsan_host = nullptr;
  struct TsanSync {
    unsigned char block_start, block_end;
    unsigned char barrier[64][2];          // by block slot
    unsigned char cluster[2];
    unsigned char warp[64][32][8][2];      // by block slot, warp and a hash of the __syncwarp mask
  };
  TsanSync* tsan_sync = new TsanSync{};
  // The strong reads of device memory a __threadfence may make acquires (tsan_fence), the last
  // kTsanReads of each block slot: the address, the reading fiber and the barriers it had passed then.
  struct TsanRead {
    const void* p;
    std::size_t fiber;
    std::uint32_t syncs;
  };
  static constexpr unsigned kTsanReads = 32;
  struct TsanReads {  // a ring (fixed storage: the fibers' own updates of a vector would be seen as races)
    TsanRead r[kTsanReads];
    unsigned n = 0, next = 0;
  };
  TsanReads tsan_reads[64];  // by block slot
};

Emu& emu() {
  static Emu* e = [] {
    auto* x = new Emu;
    if (const char* o = std::getenv("CUEMU_ORDER")) {
      const std::string s = o;
      if (s == "forward")
        x->order_kind = Emu::Order::Forward;
      else if (s == "reverse")
        x->order_kind = Emu::Order::Reverse;
      else if (s == "shuffle")
        x->order_kind = Emu::Order::Shuffle;
      else
        die("CUEMU_ORDER=%s: expected forward, reverse or shuffle", o);
    }
    x->shuffle_state = 0x9E3779B97F4A7C15ull;
    if (const char* r = std::getenv("CUEMU_RESIDENT"); r && *r) {
      char* end = nullptr;
      const unsigned long k = std::strtoul(r, &end, 10);
      if (*end || k < 1 || k > 64) die("CUEMU_RESIDENT=%s: expected a number of blocks from 1 to 64", r);
      x->resident = static_cast<unsigned>(k);
    }
    if (const char* only = std::getenv("CUEMU_RESIDENT_ONLY")) x->resident_only = only;
    if (const char* s = std::getenv("CUEMU_SEED")) x->shuffle_state ^= std::strtoull(s, nullptr, 10);
    x->preempt_state = x->shuffle_state ^ 0x5851F42D4C957F2Dull;
    if (const char* pr = std::getenv("CUEMU_PREEMPT"); pr && *pr) {
      char* end = nullptr;
      const double v = std::strtod(pr, &end);
      if (*end || !(v >= 0 && v <= 1)) die("CUEMU_PREEMPT=%s: expected a probability from 0 to 1", pr);
      g_preempt = v;
    }
    // CUEMU_STATS_LOG=<file>: at exit, the most device memory held at once ("peak_device_bytes N"), so a
    // test can hold the runner's device estimates against what the kernels' host code really allocates.
    if (const char* path = std::getenv("CUEMU_STATS_LOG"); path && *path)
      std::atexit([] {
        if (FILE* f = std::fopen(std::getenv("CUEMU_STATS_LOG"), "w")) {
          std::fprintf(f, "peak_device_bytes %zu\n", emu().peak_device_bytes);
          std::fclose(f);
        }
      });
    return x;
  }();
  return *e;
}

std::uint64_t next_random(std::uint64_t& s) {
  s += 0x9E3779B97F4A7C15ull;
  std::uint64_t z = s;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void fiber_main();

// ThreadSanitizer's side of a switch and of a happens-before edge (no-ops without it). Its runtime (GCC 12's)
// takes at most 8128 threads, fibers included, and each barrier costs it time in proportion to the threads
// it has seen, so the CUDA threads of a launch share kTsanContexts contexts: in the launches of more
// threads at once (top-k's clusters of 1024-thread blocks), thread t of cluster block r and thread t of
// block r + 1, r + 2, ... are one thread to it (named after block 0's in a report), and a race between
// just those goes unseen (races inside a block are not affected).
constexpr std::size_t kTsanContexts = 1024;
void tsan_switch(Emu& e, const Fiber* to) {
#if CUEMU_TSAN
  void* const ctx = to ? e.tsan_fibers[static_cast<std::size_t>(to - e.fibers.data()) % kTsanContexts] : e.tsan_host;
  __tsan_switch_to_fiber(ctx, __tsan_switch_to_fiber_no_sync);
#else
  (void)e, (void)to;
#endif
}
void tsan_release(void* a) {
#if CUEMU_TSAN
  __tsan_release(a);
#else
  (void)a;
#endif
}
void tsan_acquire(void* a) {
#if CUEMU_TSAN
  __tsan_acquire(a);
#else
  (void)a;
#endif
}

// AddressSanitizer's side of a stack switch (no-ops without it): before, the stack to switch to (and
// whether the one left is finished for good); after, back on a stack, that the switch ended.
void asan_before_switch(Emu& e, void** fake_save, const Fiber* to);
void asan_after_switch(void* fake) {
#if CUEMU_ASAN
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
  (void)fake;
#endif
}

void prepare_stack(Emu& e, std::size_t i) {
#if CUEMU_TSAN
  // The race-check build maps 64 stacks at a time and leaves their guard pages readable: a guard page
  // splits the mapping in two, and with ThreadSanitizer's own mappings per region, the 16384 threads of a
  // cluster launch would pass Linux's default limit of 65530 mappings (a stack overflow shows in the plain
  // build, which runs the same kernels).
  constexpr std::size_t kGroup = 64;
  while (e.stacks.size() <= i) {
    void* m = mmap(nullptr, kGroup * (kStackBytes + kPage), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) die("cannot map fiber stacks");
    for (std::size_t j = 0; j < kGroup; ++j)
      e.stacks.push_back(Stack{static_cast<unsigned char*>(m) + j * (kStackBytes + kPage)});
  }
#else
  while (e.stacks.size() <= i) {
    Stack s;
    void* m =
        mmap(nullptr, kStackBytes + kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) die("cannot map a fiber stack");
    s.base = static_cast<unsigned char*>(m);
    mprotect(s.base, kPage, PROT_NONE);  // overflow runs into this page
    e.stacks.push_back(s);
  }
#endif
}

void start_fiber(Emu& e, Fiber& f, std::size_t i) {
  prepare_stack(e, i);
#if CUEMU_TSAN
  while (e.tsan_fibers.size() <= std::min(i, kTsanContexts - 1)) e.tsan_fibers.push_back(__tsan_create_fiber(0));
  if (i < kTsanContexts) {
    char name[96];
    std::snprintf(name, sizeof name, "CUDA thread (%u,%u,%u) of block (%u,%u,%u)", f.c.thread_idx.x, f.c.thread_idx.y,
                  f.c.thread_idx.z, f.c.block_idx.x, f.c.block_idx.y, f.c.block_idx.z);
    __tsan_set_fiber_name(e.tsan_fibers[i], name);
  }
#endif
  // Stack tops staggered by 64 B per fiber (and 4 KiB per 64 fibers): at one common offset every fiber's
  // hot frames would fall into the same cache sets. At most 16 KiB of the 256 KiB go unused.
  unsigned char* top = e.stacks[i].base + kPage + kStackBytes - (i % 64) * 64 - ((i / 64) % 4) * 4096;
#if CUEMU_X86_SWITCH
  auto* w = reinterpret_cast<std::uint64_t*>(top);
  // [top-8]: fake return address of fiber_main (so rsp = 8 mod 16 at its entry, as after a call);
  // [top-16]: where cuemu_switch's ret goes; below it the six callee-saved registers it pops.
  w[-1] = 0;
  w[-2] = reinterpret_cast<std::uint64_t>(&fiber_main);
  for (int r = 3; r <= 8; ++r) w[-r] = 0;
  f.sp = &w[-8];
#else
  getcontext(&f.ctx);
  f.ctx.uc_stack.ss_sp = e.stacks[i].base + kPage;
  f.ctx.uc_stack.ss_size = static_cast<std::size_t>(top - (e.stacks[i].base + kPage));  // staggered too
  f.ctx.uc_link = nullptr;
  makecontext(&f.ctx, &fiber_main, 0);
#endif
}

void asan_before_switch(Emu& e, void** fake_save, const Fiber* to) {
#if CUEMU_ASAN
  if (to) {
    const std::size_t i = static_cast<std::size_t>(to - e.fibers.data());
    __sanitizer_start_switch_fiber(fake_save, e.stacks[i].base + kPage, kStackBytes);
  } else {
    __sanitizer_start_switch_fiber(fake_save, e.sched_stack, e.sched_stack_bytes);
  }
#else
  (void)e, (void)fake_save, (void)to;
#endif
}

// The launching thread's stack, for AddressSanitizer (called before a launch's first switch).
void note_scheduler_stack(Emu& e) {
#if CUEMU_ASAN
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) die("pthread_getattr_np failed");
  void* lo = nullptr;
  std::size_t n = 0;
  pthread_attr_getstack(&attr, &lo, &n);
  pthread_attr_destroy(&attr);
  e.sched_stack = lo;
  e.sched_stack_bytes = n;
#else
  (void)e;
#endif
}

void resume(Emu& e, Fiber& f) {
  e.cur = &f;
  asan_before_switch(e, &e.sched_asan_fake, &f);
  tsan_switch(e, &f);
#if CUEMU_X86_SWITCH
  cuemu_switch(&e.sched_sp, f.sp);
#else
  swapcontext(&e.sched_ctx, &f.ctx);
#endif
  asan_after_switch(e.sched_asan_fake);
  e.cur = nullptr;
}

// The calling fiber has blocked or finished: switch straight to the next ready lane of its warp (one
// switch per lane and collective instead of two), or back to the scheduler after the last.
void yield_to_scheduler(Emu& e) {
  Fiber& f = *e.cur;
  Fiber* next = nullptr;
  while (++e.pos < 32) {
    const unsigned l = e.order[e.pos];
    if (l >= e.warp_lanes) continue;
    Fiber& g = e.fibers[e.warp_first + l];
    if (g.state == State::Ready) {
      next = &g;
      break;
    }
  }
  // A finished fiber's stack is left for good (its next use starts afresh): no fake stack to keep.
  asan_before_switch(e, f.state == State::Done ? nullptr : &f.asan_fake, next);
  tsan_switch(e, next);
#if CUEMU_X86_SWITCH
  if (next) {
    e.cur = next;
    cuemu_switch(&f.sp, next->sp);
  } else {
    cuemu_switch(&f.sp, e.sched_sp);
  }
#else
  if (next) {
    e.cur = next;
    swapcontext(&f.ctx, &next->ctx);
  } else {
    swapcontext(&f.ctx, &e.sched_ctx);
  }
#endif
  asan_after_switch(f.asan_fake);
}

const char* where(const Emu& e);

// The running thread is about to exit: a chained launch's thread must have waited for the grids before
// it; the last thread of a cluster's block takes its shared memory away (filled with 0xFF, and poisoned
// under AddressSanitizer), so a block that reads it afterwards through an address mapped before reads
// garbage, or is stopped by the sanitizer.
void thread_exits(Emu& e) {
  Running& l = *e.launch;
  Fiber& f = *e.cur;
  if (l.chained && !f.waited)
    die("thread (%u,%u,%u) of %s exited without wait_for_prior_grids (griddepcontrol.wait): the kernel was launched "
        "chained (IP_LAUNCH_CHAINED), so on a GPU it may run while the kernel before it still writes, and every "
        "chained kernel here waits first (kernels/launch.h)",
        f.c.thread_idx.x, f.c.thread_idx.y, f.c.thread_idx.z, where(e));
  if (l.cluster > 1 && ++l.exited_threads[f.slot] == l.block.x * l.block.y * l.block.z) {
    l.exited_blocks |= 1u << f.slot;
    raw_fill(l.smem + f.slot * l.smem_span, 0xFF, l.smem_bytes);
    CUEMU_POISON(l.smem + f.slot * l.smem_span, l.smem_bytes);
  }
}

void fiber_main() {
  Emu& e = emu();
  asan_after_switch(nullptr);  // a fiber's first entry: no fake stack of its own yet
  tsan_acquire(&e.tsan_sync->block_start);  // after what the host (and, one block at a time, the earlier blocks) did
  e.launch->body(e.launch->launch);
  tsan_release(&e.tsan_sync->block_end);
  thread_exits(e);
  e.cur->state = State::Done;
  ++e.arrivals;
  yield_to_scheduler(e);
  die("a finished fiber was resumed");
}

const char* where(const Emu& e) {
  static thread_local char buf[512];
  const Running& l = *e.launch;
  const uint3 b = e.cur ? e.cur->c.block_idx : l.block_idx;
  if (l.cluster > 1)
    std::snprintf(buf, sizeof buf,
                  "kernel %s (launched at %s:%d), block (%u,%u,%u) of (%u,%u,%u), in the cluster of %u blocks from x = %u",
                  l.site->kernel, l.site->file, l.site->line, b.x, b.y, b.z, l.grid.x, l.grid.y, l.grid.z, l.cluster,
                  l.block_idx.x);
  else
    std::snprintf(buf, sizeof buf, "kernel %s (launched at %s:%d), block (%u,%u,%u) of (%u,%u,%u)", l.site->kernel,
                  l.site->file, l.site->line, b.x, b.y, b.z, l.grid.x, l.grid.y, l.grid.z);
  return buf;
}

[[noreturn]] void deadlock(Emu& e, const char* why) {
  int ready = 0, barrier = 0, cluster = 0, warp = 0, asleep = 0, done = 0;
  for (const Fiber& f : e.fibers) {
    switch (f.state) {
      case State::Ready: ++ready; break;
      case State::AtBarrier: ++barrier; break;
      case State::AtCluster: ++cluster; break;
      case State::AtWarp: ++warp; break;
      case State::Asleep: ++asleep; break;
      case State::Preempted: ++ready; break;
      case State::Done: ++done; break;
    }
  }
  std::string lanes;
  for (const Fiber& f : e.fibers) {
    if (f.state != State::AtWarp || lanes.size() > 400) continue;
    char b[96];
    std::snprintf(b, sizeof b, " t%u(warp %u lane %u mask %08x)",
                  f.c.thread_idx.x + f.c.block_dim.x * (f.c.thread_idx.y + f.c.block_dim.y * f.c.thread_idx.z), f.warp,
                  f.lane, f.mask);
    lanes += b;
  }
  e.cur = nullptr;  // where() names the launch's first block
  char at_cluster[64] = "";
  if (e.launch->cluster > 1) std::snprintf(at_cluster, sizeof at_cluster, ", %d at the cluster barrier", cluster);
  char slots[96] = "";
  if (e.launch->slots > 1 && e.launch->cluster == 1)
    std::snprintf(slots, sizeof slots, " (%u blocks resident)", e.launch->slots);
  die("%s in %s%s: %d threads at __syncthreads%s, %d at warp collectives, %d in a spin-wait (__nanosleep), %d "
      "exited.%s%s",
      why, where(e), slots, barrier, at_cluster, warp, asleep, done, lanes.empty() ? "" : " Waiting lanes:",
      lanes.c_str());
}

// Releases the warp collectives of warp w whose lanes have all arrived; returns whether any was.
bool release_warp(Emu& e, unsigned base, unsigned w, unsigned n_threads) {
  bool released = false;
  const unsigned first = base + w * 32, lanes = std::min(32u, n_threads - w * 32);
  const unsigned existing = lanes == 32 ? 0xFFFFFFFFu : ((1u << lanes) - 1u);
  unsigned handled = 0;
  for (unsigned l = 0; l < lanes; ++l) {
    Fiber& f = e.fibers[first + l];
    if (f.state != State::AtWarp || ((handled >> l) & 1u)) continue;
    const unsigned mask = f.mask;
    if (!((mask >> l) & 1u))
      die("lane %u of warp %u calls a warp collective with mask %08x, which leaves it out, in %s", l, w, mask,
          where(e));
    const unsigned need = mask & existing;
    bool all = true;
    for (unsigned m = 0; m < lanes && all; ++m) {
      if (!((need >> m) & 1u)) continue;
      const Fiber& g = e.fibers[first + m];
      if (g.state == State::Done)
        die("lane %u of warp %u exited while lanes of mask %08x wait for it in a warp collective, in %s", m, w, mask,
            where(e));
      if (g.state != State::AtWarp)
        all = false;
      else if (g.mask != mask || g.fn != f.fn)
        die("lanes %u and %u of warp %u meet in different warp collectives (masks %08x and %08x), in %s", l, m, w, mask,
            g.mask, where(e));
    }
    if (!all) continue;
    const void* in[32] = {};
    void* out[32] = {};
    int arg[32] = {};
    for (unsigned m = 0; m < lanes; ++m) {
      if (!((need >> m) & 1u)) continue;
      const Fiber& g = e.fibers[first + m];
      in[m] = g.in;
      out[m] = g.out;
      arg[m] = g.arg;
    }
    f.fn(in, out, arg, need);
    for (unsigned m = 0; m < lanes; ++m)
      if ((need >> m) & 1u) e.fibers[first + m].state = State::Ready;
    handled |= need;
    released = true;
  }
  return released;
}

// The order of the warps of a block and of the lanes in each warp (CUEMU_ORDER), drawn per block.
void permute(Emu& e, std::vector<unsigned>& v, unsigned n) {
  v.resize(n);
  for (unsigned i = 0; i < n; ++i) v[i] = i;
  if (e.order_kind == Emu::Order::Reverse) std::reverse(v.begin(), v.end());
  if (e.order_kind == Emu::Order::Shuffle)
    for (unsigned i = n; i > 1; --i) std::swap(v[i - 1], v[next_random(e.shuffle_state) % i]);
}
void set_order(Emu& e, unsigned n_threads, unsigned cluster) {
  permute(e, e.order, 32);
  permute(e, e.warp_order, (n_threads + 31) / 32);
  permute(e, e.block_order, cluster);
}

// ---------------------------------------------------------------- memory
void* guarded_alloc(std::size_t bytes, bool device) {
  Emu& e = emu();
  const std::size_t span = round_up(std::max<std::size_t>(bytes, 1), 256);
  const std::size_t map_bytes = round_up(span, kPage) + 2 * kPage;  // guard, data, guard
  void* m = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  auto* map = static_cast<unsigned char*>(m);
  mprotect(map, kPage, PROT_NONE);
  mprotect(map + map_bytes - kPage, kPage, PROT_NONE);
  unsigned char* user = map + map_bytes - kPage - span;  // 256-aligned, ends at the upper guard page
  std::memset(user, 0xFF, span);  // cudaMalloc does not clear memory; a read before a write shows as NaN / -1
  CUEMU_POISON(map + kPage, static_cast<std::size_t>(user - (map + kPage)));  // below the allocation
  CUEMU_POISON(user + bytes, span - bytes);                                   // and after its end
  e.allocs[reinterpret_cast<std::uintptr_t>(user)] = {map, map_bytes, user, bytes, device};
  ++e.counts.allocations;
  if (device) {
    e.device_bytes += bytes;
    e.peak_device_bytes = std::max(e.peak_device_bytes, e.device_bytes);
  }
  return user;
}

bool guarded_free(void* p, bool device) {
  Emu& e = emu();
  auto it = e.allocs.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == e.allocs.end() || it->second.device != device) return false;
  if (device) e.device_bytes -= it->second.bytes;
  CUEMU_UNPOISON(it->second.map, it->second.map_bytes);  // the addresses may be mapped again
  munmap(it->second.map, it->second.map_bytes);
  e.allocs.erase(it);
  return true;
}

// The bytes between an allocation's end and the guard page (up to 255, from the 256-byte rounding) keep
// their 0xFF fill unless something wrote past the end: checked after every launch.
void check_slack(const LaunchSite& site) {
  for (const auto& [u, al] : emu().allocs) {
    const std::size_t span = round_up(std::max<std::size_t>(al.bytes, 1), 256);
    const std::size_t i = al.bytes + raw_find_not(al.user + al.bytes, 0xFF, span - al.bytes);  // poisoned bytes
    if (i < span)
      die("kernel %s (launched at %s:%d) wrote %zu bytes past the end of a %zu-byte %s allocation at %p", site.kernel,
          site.file, site.line, i - al.bytes + 1, al.bytes, al.device ? "device" : "host", static_cast<void*>(al.user));
  }
}

// Describes an address relative to the allocations, for the fault handler.
void describe_address(const void* a, char* buf, std::size_t n) {
  Emu& e = emu();
  const auto x = reinterpret_cast<std::uintptr_t>(a);
  for (const auto& [u, al] : e.allocs) {
    const auto lo = reinterpret_cast<std::uintptr_t>(al.map), hi = lo + al.map_bytes;
    if (x < lo || x >= hi) continue;
    if (x >= u)
      std::snprintf(buf, n, "%zu bytes past the end of a %zu-byte %s allocation at %p",
                    static_cast<std::size_t>(x - u) - al.bytes, al.bytes, al.device ? "device" : "host", al.user);
    else
      std::snprintf(buf, n, "%zu bytes before a %zu-byte %s allocation at %p", static_cast<std::size_t>(u - x),
                    al.bytes, al.device ? "device" : "host", al.user);
    return;
  }
  for (const Stack& s : e.stacks)
    if (x >= reinterpret_cast<std::uintptr_t>(s.base) && x < reinterpret_cast<std::uintptr_t>(s.base + kPage)) {
      std::snprintf(buf, n, "a thread's stack overflowed (%zu bytes per thread)", kStackBytes);
      return;
    }
  if (e.smem_buf && x >= reinterpret_cast<std::uintptr_t>(e.smem_buf) &&
      x < reinterpret_cast<std::uintptr_t>(e.smem_buf) + e.smem_cap + kPage) {
    std::snprintf(buf, n, "past the end of the %zu bytes of dynamic shared memory",
                  e.launch ? e.launch->smem_bytes : 0);
    return;
  }
  std::snprintf(buf, n, "not in any device allocation");
}

void on_fault(int sig, siginfo_t* info, void*) {
  Emu& e = emu();
  char what[256];
  describe_address(info->si_addr, what, sizeof what);
  char msg[1024];
  if (e.launch && e.cur)
    std::snprintf(msg, sizeof msg, "cuemu: invalid memory access at %p (%s) by thread (%u,%u,%u) of %s\n",
                  info->si_addr, what, e.cur->c.thread_idx.x, e.cur->c.thread_idx.y, e.cur->c.thread_idx.z, where(e));
  else
    std::snprintf(msg, sizeof msg, "cuemu: invalid memory access at %p (%s) outside any kernel\n", info->si_addr, what);
  (void)!write(2, msg, std::strlen(msg));
  signal(sig, SIG_DFL);
  raise(sig);
}

void install_fault_handler() {
  static bool done = false;
  if (done) return;
  done = true;
  static std::vector<unsigned char> alt(64 * 1024);
  stack_t ss{};
  ss.ss_sp = alt.data();
  ss.ss_size = alt.size();
  sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sa.sa_sigaction = &on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigaction(SIGSEGV, &sa, nullptr);
  sigaction(SIGBUS, &sa, nullptr);
}

cudaError_t set_error(cudaError_t err) {
  emu().last_error = err;
  return err;
}

bool valid_stream(cudaStream_t s) {
  Emu& e = emu();
  return s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread || e.streams.count(s) != 0;
}

constexpr std::size_t kSmemDefault = 48 * 1024;
constexpr std::size_t kSmemOptin = 227 * 1024;  // sm_90

}  // namespace

Counts counts() { return emu().counts; }

// ---------------------------------------------------------------- device-side entry points
const ThreadCoords& coords() {
  Emu& e = emu();
  if (!e.cur) die("threadIdx/blockIdx used outside a kernel");
  return e.cur->c;
}

unsigned lane_id() {
  coords();  // dies outside a kernel
  return emu().cur->lane;
}

unsigned char* dynamic_shared() {
  Emu& e = emu();
  if (!e.launch || !e.cur) die("dynamic shared memory used outside a kernel");
  return e.launch->smem + e.cur->slot * e.launch->smem_span;
}

unsigned cluster_block_rank() {
  coords();  // dies outside a kernel
  const Emu& e = emu();
  return e.launch->cluster > 1 ? e.cur->slot : 0;  // resident blocks of a launch without clusters: rank 0 each
}

unsigned cluster_num_blocks() {
  coords();
  return emu().launch->cluster;
}

void cluster_sync() {
  Emu& e = emu();
  if (!e.cur) die("cluster barrier outside a kernel");
  Fiber& f = *e.cur;
  // A launch without clusters is one of one-block clusters: with several blocks resident, a barrier of the
  // block (with one, the whole launch's barrier is the block's).
  f.state = e.launch->cluster == 1 && e.launch->slots > 1 ? State::AtBarrier : State::AtCluster;
  unsigned char* sync = f.state == State::AtBarrier ? &e.tsan_sync->barrier[f.slot][f.tsan_barriers++ & 1]
                                                    : &e.tsan_sync->cluster[f.tsan_clusters++ & 1];
  tsan_release(sync);
  ++e.arrivals;
  yield_to_scheduler(e);
  tsan_acquire(sync);
}

void* cluster_map_shared(void* p, unsigned rank) {
  Emu& e = emu();
  if (!e.cur) die("cluster shared memory mapped outside a kernel");
  const Running& l = *e.launch;
  unsigned char* const mine = l.smem + e.cur->slot * l.smem_span;
  auto* const c = static_cast<unsigned char*>(p);
  if (rank >= l.cluster) die("block rank %u mapped in a cluster of %u blocks, in %s", rank, l.cluster, where(e));
  if (l.cluster > 1 && rank != e.cur->slot && e.cur->tsan_clusters == 0)
    die("block rank %u's shared memory mapped before the calling thread's first cluster barrier (another block's "
        "shared memory may be accessed only once every block of the cluster has started, after the first "
        "cluster_sync; kernels/cluster.cuh maps only from then on), in %s",
        rank, where(e));
  if (l.cluster > 1 && (l.exited_blocks >> rank & 1u))
    die("block rank %u's shared memory mapped after every thread of that block exited (a block must not exit while "
        "another may still access its shared memory: a cluster_sync before the exit), in %s",
        rank, where(e));
  if (c < mine || c >= mine + l.smem_bytes)
    die("an address mapped to block rank %u is not in the block's %zu bytes of dynamic shared memory (the emulator "
        "maps only those), in %s",
        rank, l.smem_bytes, where(e));
  if (l.cluster > 1 && rank != e.cur->slot && g_preempt > 0)
    preempt_point(nullptr);  // another block's shared memory is about to be accessed (CUEMU_PREEMPT)
  return l.cluster > 1 ? l.smem + rank * l.smem_span + (c - mine) : c;  // without clusters: the block's own
}

void syncthreads() {
  Emu& e = emu();
  if (!e.cur) die("__syncthreads outside a kernel");
  Fiber& f = *e.cur;
  f.state = State::AtBarrier;
  unsigned char* sync = &e.tsan_sync->barrier[f.slot][f.tsan_barriers++ & 1];
  tsan_release(sync);
  ++e.arrivals;
  yield_to_scheduler(e);
  tsan_acquire(sync);
}

namespace {
void syncwarp_fn(const void* const*, void* const*, const int*, unsigned) {}
}  // namespace

void syncwarp(unsigned mask) {
  warp_collective(&syncwarp_fn, mask, nullptr, nullptr, 0);
}

void warp_collective(WarpFn fn, unsigned mask, const void* in, void* out, int arg) {
  Emu& e = emu();
  if (!e.cur) die("warp collective outside a kernel");
  Fiber& f = *e.cur;
  f.fn = fn;
  f.mask = mask;
  f.in = in;
  f.out = out;
  f.arg = arg;
  f.state = State::AtWarp;
  // __syncwarp orders the memory accesses of the lanes of its mask (shuffles and votes do not). Every
  // lane of the mask takes part in each __syncwarp with that mask (else the emulator reports it), so the
  // lanes count those calls alike: the count's parity picks the address, the mask's hash the pair.
  unsigned char* sync = nullptr;
  if (CUEMU_TSAN && fn == &syncwarp_fn) {
    unsigned k = 0;
    while (k < f.tsan_n_masks && f.tsan_masks[k] != mask) ++k;
    if (k == f.tsan_n_masks) {
      if (k == 8)
        die("a thread used more than 8 different __syncwarp masks (the race check counts 8), in %s", where(e));
      f.tsan_masks[k] = mask;
      ++f.tsan_n_masks;
    }
    const unsigned h = (mask * 0x9E3779B1u) >> 29;
    sync = &e.tsan_sync->warp[f.slot][f.warp][h][f.tsan_mask_calls[k]++ & 1];
    tsan_release(sync);
  }
  ++e.arrivals;
  yield_to_scheduler(e);
  if (sync) tsan_acquire(sync);
}

void fatal_shfl_source(int lane, int src, unsigned mask) {
  Emu& e = emu();
  die("lane %d reads lane %d in a shuffle with mask %08x, which does not include it, in %s", lane, src, mask, where(e));
}

void griddep_wait() {
  Emu& e = emu();
  if (!e.cur) die("wait_for_prior_grids outside a kernel");
  e.cur->waited = true;
}

void fatal_misaligned(const void* p, std::size_t align, const char* what) {
  Emu& e = emu();
  if (!e.cur) die("%s at %p, not aligned to %zu bytes, outside a kernel", what, p, align);
  die("%s at %p, not aligned to the %zu bytes of its type (a misaligned address on a GPU), by thread (%u,%u,%u) of %s",
      what, p, align, e.cur->c.thread_idx.x, e.cur->c.thread_idx.y, e.cur->c.thread_idx.z, where(e));
}

void fatal_trap() {
  Emu& e = emu();
  if (!e.cur) die("__trap outside a kernel");
  die("__trap by thread (%u,%u,%u) of %s", e.cur->c.thread_idx.x, e.cur->c.thread_idx.y, e.cur->c.thread_idx.z,
      where(e));
}

void sleep() {
  Emu& e = emu();
  if (!e.cur) die("__nanosleep outside a kernel");
  e.cur->state = State::Asleep;
  yield_to_scheduler(e);
}

unsigned set_resident_blocks(unsigned k) {
  Emu& e = emu();
  if (k < 1 || k > 64) die("set_resident_blocks(%u): expected a number of blocks from 1 to 64", k);
  if (e.launch) die("set_resident_blocks inside a kernel");
  const unsigned before = e.resident;
  e.resident = k;
  return before;
}

double set_preempt(double p) {
  Emu& e = emu();
  if (!(p >= 0 && p <= 1)) die("set_preempt(%g): expected a probability from 0 to 1", p);
  if (e.launch) die("set_preempt inside a kernel");
  const double before = g_preempt;
  g_preempt = p;
  return before;
}

namespace {
// Device (or page-locked host) memory: what other blocks see, unlike shared memory or a stack.
bool in_allocation(const Emu& e, const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  auto it = e.allocs.upper_bound(a);
  if (it == e.allocs.begin()) return false;
  --it;
  return a < it->first + it->second.bytes;
}

// Barriers (block and cluster) the fiber has passed.
[[maybe_unused]] std::uint32_t tsan_syncs(const Fiber& f) {
  return f.tsan_barriers + f.tsan_clusters;
}
}  // namespace

void tsan_strong_read(const void* p) {
#if CUEMU_TSAN
  Emu& e = emu();
  if (!e.cur || !e.launch || e.launch->slots < 2 || !in_allocation(e, p)) return;
  const Fiber& f = *e.cur;
  const std::size_t me = static_cast<std::size_t>(&f - e.fibers.data());
  Emu::TsanReads& reads = e.tsan_reads[f.slot];
  for (unsigned i = 0; i < reads.n; ++i)
    if (reads.r[i].p == p && reads.r[i].fiber == me) return;  // the earliest such read is the one barriers follow
  reads.r[reads.next] = {p, me, tsan_syncs(f)};  // over the oldest once full
  reads.next = (reads.next + 1) % Emu::kTsanReads;
  if (reads.n < Emu::kTsanReads) ++reads.n;
#else
  (void)p;
#endif
}

void tsan_atomic(const void* p) {
#if CUEMU_TSAN
  Emu& e = emu();
  if (!e.cur || !e.launch || e.launch->slots < 2 || !in_allocation(e, p)) return;
  Fiber& f = *e.cur;
  if (f.tsan_fenced) {
    __tsan_release(const_cast<void*>(p));
    f.tsan_fenced = false;
  }
  tsan_strong_read(p);
#else
  (void)p;
#endif
}

void tsan_fence() {
#if CUEMU_TSAN
  Emu& e = emu();
  if (!e.cur || !e.launch || e.launch->slots < 2) return;
  Fiber& f = *e.cur;
  const std::size_t me = static_cast<std::size_t>(&f - e.fibers.data());
  const Emu::TsanReads& reads = e.tsan_reads[f.slot];
  for (unsigned i = 0; i < reads.n; ++i)
    if (reads.r[i].fiber == me || reads.r[i].syncs < tsan_syncs(f)) __tsan_acquire(const_cast<void*>(reads.r[i].p));
  f.tsan_fenced = true;
#endif
}

void preempt_point(const void* p) {
  Emu& e = emu();
  if (!e.cur || !e.launch || e.launch->slots < 2) return;  // nothing else to run in between
  if (p && !in_allocation(e, p)) return;  // an atomic: only device memory is seen by other blocks
  // A draw in [0, 1) from the top 53 bits.
  if (static_cast<double>(next_random(e.preempt_state) >> 11) * 0x1.0p-53 >= g_preempt) return;
  ++e.counts.preemptions;
  e.preempted = true;
  e.cur->state = State::Preempted;
  e.pos = 32;  // straight back to the scheduler, not to the next lane of the warp
  yield_to_scheduler(e);
}

namespace {
struct MmaIn {
  std::uint32_t a[4], b[2];
  float c[4];
  bool f16;  // the halves are f16 (m16n8k16 .f16), else bf16
};
// The low (element 2j) and high (element 2j + 1) half of a register, as bf16 or f16.
float half_of(std::uint32_t r, bool high, bool f16) {
  const std::uint32_t h = high ? r >> 16 : r & 0xFFFFu;
  if (!f16) return __uint_as_float(h << 16);
  // IEEE half: 1 sign, 5 exponent (bias 15), 10 fraction bits; every value is a float.
  const float sign = (h & 0x8000u) ? -1.0f : 1.0f;
  const int e = static_cast<int>((h >> 10) & 0x1Fu), m = static_cast<int>(h & 0x3FFu);
  if (e == 0) return sign * std::ldexp(static_cast<float>(m), -24);
  if (e == 31) return m == 0 ? sign * HUGE_VALF : std::numeric_limits<float>::quiet_NaN();
  return sign * std::ldexp(static_cast<float>(1024 + m), e - 25);
}

void mma_fn(const void* const* in, void* const* out, const int*, unsigned mask) {
  if (mask != 0xFFFFFFFFu) die("mma.sync needs all 32 lanes (mask %08x)", mask);
  float A[16][16], B[16][8], C[16][8];
  const bool f16 = static_cast<const MmaIn*>(in[0])->f16;
  for (int lane = 0; lane < 32; ++lane) {
    const auto& x = *static_cast<const MmaIn*>(in[lane]);
    if (x.f16 != f16) die("mma.sync: lanes disagree on the instruction (bf16 and f16)");
    const int g = lane >> 2, t = lane & 3;
    // A (row major 16x16): register j holds elements 2j (low half) and 2j+1 (high half);
    // element i sits at row g (+8 for i = 2,3,6,7) and column 2t + (i & 1) (+8 for i >= 4).
    for (int i = 0; i < 8; ++i) {
      const std::uint32_t r = x.a[i / 2];
      const float v = half_of(r, (i & 1) != 0, f16);
      const int row = g + (((i >> 1) & 1) ? 8 : 0);
      const int col = 2 * t + (i & 1) + (i >= 4 ? 8 : 0);
      A[row][col] = v;
    }
    // B (column major 16x8): element i at k = 2t + (i & 1) (+8 for i >= 2), n = g.
    for (int i = 0; i < 4; ++i) {
      const std::uint32_t r = x.b[i / 2];
      B[2 * t + (i & 1) + (i >= 2 ? 8 : 0)][g] = half_of(r, (i & 1) != 0, f16);
    }
    // C/D: element i at row g (+8 for i >= 2), column 2t + (i & 1).
    for (int i = 0; i < 4; ++i) C[g + (i >= 2 ? 8 : 0)][2 * t + (i & 1)] = x.c[i];
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane >> 2, t = lane & 3;
    auto* d = static_cast<float*>(out[lane]);
    for (int i = 0; i < 4; ++i) {
      const int row = g + (i >= 2 ? 8 : 0), col = 2 * t + (i & 1);
      double s = C[row][col];
      for (int k = 0; k < 16; ++k) s += static_cast<double>(A[row][k]) * B[k][col];
      d[i] = static_cast<float>(s);
    }
  }
}
}  // namespace

void mma_m16n8k16_bf16(float (&c)[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t a2, std::uint32_t a3,
                       std::uint32_t b0, std::uint32_t b1) {
  MmaIn in{{a0, a1, a2, a3}, {b0, b1}, {c[0], c[1], c[2], c[3]}, false};
  float d[4];
  warp_collective(&mma_fn, 0xFFFFFFFFu, &in, d, 0);
  for (int i = 0; i < 4; ++i) c[i] = d[i];
}

void mma_m16n8k16_f16(float (&c)[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t a2, std::uint32_t a3,
                      std::uint32_t b0, std::uint32_t b1) {
  MmaIn in{{a0, a1, a2, a3}, {b0, b1}, {c[0], c[1], c[2], c[3]}, true};
  float d[4];
  warp_collective(&mma_fn, 0xFFFFFFFFu, &in, d, 0);
  for (int i = 0; i < 4; ++i) c[i] = d[i];
}

// ---------------------------------------------------------------- launches
// The static __shared__ arrays of the program: the section cuemu_shared, and the arrays GCC left out of
// it. GCC ignores a section attribute on the static locals of function templates (g++ 12.2, tried on
// 2026-12-05), so the __shared__ arrays of template kernels and device functions land in .bss like any
// static; they are found here in the program's symbol table instead: the objects of writable sections with
// unique binding (static locals of inline and template functions) whose names are in namespace ip::cuda
// (_ZZN2ip4cuda...). So inline and template host functions in ip::cuda must not have static locals: the
// emulator would overwrite them at every block start (none had on 2026-12-05; test
// Cuemu.StaticSharedArraysOfTemplateKernelsAreFilledAtEveryBlockStart).
// Calls f(symbol, its name, the section headers, their count, their names, the load bias) for every
// entry of the program's symbol tables (/proc/self/exe). Returns 1, 0 when the program has none
// (stripped), -1 when it cannot be read.
template <class F>
int for_each_program_symbol(F&& f) {
  const int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  void* m = mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return -1;
  const auto* base = static_cast<const unsigned char*>(m);
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(base);
  const auto* sh = reinterpret_cast<const Elf64_Shdr*>(base + eh->e_shoff);
  // Where the program is loaded (PIE): the first object dl_iterate_phdr reports is the program.
  std::uintptr_t bias = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) {
        *static_cast<std::uintptr_t*>(out) = info->dlpi_addr;
        return 1;
      },
      &bias);
  const char* const shstr = reinterpret_cast<const char*>(base + sh[eh->e_shstrndx].sh_offset);
  bool found = false;
  for (unsigned i = 0; i < eh->e_shnum; ++i) {
    if (sh[i].sh_type != SHT_SYMTAB) continue;
    found = true;
    const auto* sym = reinterpret_cast<const Elf64_Sym*>(base + sh[i].sh_offset);
    const char* const str = reinterpret_cast<const char*>(base + sh[sh[i].sh_link].sh_offset);
    for (std::size_t j = 0; j < sh[i].sh_size / sizeof(Elf64_Sym); ++j)
      f(sym[j], str + sym[j].st_name, sh, static_cast<unsigned>(eh->e_shnum), shstr, bias);
  }
  munmap(m, static_cast<std::size_t>(st.st_size));
  return found ? 1 : 0;
}

void find_static_regions(Emu& e) {
  e.regions_found = true;
  unsigned char* const lo = __start_cuemu_shared;
  unsigned char* const hi = __stop_cuemu_shared;
  if (lo && hi > lo) e.static_regions.push_back({lo, static_cast<std::size_t>(hi - lo), "cuemu_shared"});
  const int read = for_each_program_symbol([&e](const Elf64_Sym& y, const char* name, const Elf64_Shdr* sh,
                                               unsigned n_sections, const char* shstr, std::uintptr_t bias) {
    if (ELF64_ST_TYPE(y.st_info) != STT_OBJECT || ELF64_ST_BIND(y.st_info) != STB_GNU_UNIQUE || y.st_size == 0 ||
        y.st_shndx == SHN_UNDEF || y.st_shndx >= n_sections || !(sh[y.st_shndx].sh_flags & SHF_WRITE) ||
        std::strncmp(name, "_ZZN2ip4cuda", 12) != 0 || std::strcmp(shstr + sh[y.st_shndx].sh_name, "cuemu_shared") == 0)
      return;
    e.static_regions.push_back({reinterpret_cast<unsigned char*>(bias + y.st_value), y.st_size, name});
  });
  if (read < 0) die("cannot read /proc/self/exe for the static __shared__ arrays");
  e.symtab_read = read > 0;
  if (!e.symtab_read)
    std::fprintf(stderr, "cuemu: the program has no symbol table (stripped?): the __shared__ arrays of template "
                         "kernels are not filled with 0xFF at block starts\n");
  for (const Emu::Region& g : e.static_regions) e.static_bytes += g.n;
  if (std::getenv("CUEMU_VERBOSE"))
    for (const Emu::Region& g : e.static_regions)
      std::fprintf(stderr, "cuemu: static __shared__ %s, %zu bytes at %p\n", g.name.c_str(), g.n, static_cast<void*>(g.p));
}

// (Race check) Forgets the accesses to [p, p + n): shared memory that another block is now to use, which
// on a GPU it uses after the one before it (whole 8-byte cells, the unit of ThreadSanitizer's shadow: a
// neighbour's accesses in the first and last cell are forgotten too).
void tsan_forget(const void* p, std::size_t n) {
#if CUEMU_TSAN
  const unsigned long lo = reinterpret_cast<std::uintptr_t>(p) & ~7ul;
  const unsigned long hi = (reinterpret_cast<std::uintptr_t>(p) + n + 7) & ~7ul;
  if (hi == lo) return;
  __tsan_java_free(lo, hi - lo);
  __tsan_java_alloc(lo, hi - lo);
#else
  (void)p, (void)n;
#endif
}

void fill_static(Emu& e) {
  for (const Emu::Region& g : e.static_regions) raw_fill(g.p, 0xFF, g.n);
}

// With several blocks resident (and no clusters): before slot r's block takes its turn, its copy of the
// static __shared__ arrays goes into place (a cluster's blocks share them, see run_grid).
void own_static(Emu& e, unsigned r) {
  if (e.static_copies.empty() || e.static_owner == static_cast<int>(r)) return;
  if (e.static_owner >= 0) {
    unsigned char* save = e.static_copies[static_cast<unsigned>(e.static_owner)].data();
    for (const Emu::Region& g : e.static_regions) {
      raw_copy(save, g.p, g.n);
      save += g.n;
    }
  }
  const unsigned char* load = e.static_copies[r].data();
  for (const Emu::Region& g : e.static_regions) {
    raw_copy(g.p, load, g.n);
    tsan_forget(g.p, g.n);  // another block's arrays now
    load += g.n;
  }
  e.static_owner = static_cast<int>(r);
}

namespace {
// ---------------------------------------------------------------- the memory-access profile (cuemu.h)
struct MemKey {
  std::uint64_t block;
  std::uintptr_t pc;
  std::uint32_t nth, warp;
  MemSpace space;
  MemOp op;
  bool operator==(const MemKey&) const = default;
};
struct MemKeyHash {
  std::size_t operator()(const MemKey& k) const {
    std::uint64_t h = k.block * 0x9E3779B97F4A7C15ull;
    h ^= (k.pc + 0x632BE59BD9B4E019ull + (h << 6) + (h >> 2));
    h ^= ((std::uint64_t{k.nth} << 32 | k.warp) + 0x85EBCA77C2B2AE63ull + (h << 6) + (h >> 2));
    h ^= static_cast<std::uint64_t>(k.space) << 8 | static_cast<std::uint64_t>(k.op);
    return static_cast<std::size_t>(h ^ (h >> 29));
  }
};
struct MemAccess {
  std::uintptr_t addr;
  std::uint32_t size;
  std::uint32_t lane;
};
struct MemProf {
  bool enabled = false;   // memprof_enable
  FILE* out = nullptr;    // CUEMU_MEMPROF's file
  std::uint64_t launches = 0;
  std::vector<std::unordered_map<std::uintptr_t, std::uint32_t>> nth;  // by fiber: executions of each pc
  std::unordered_map<MemKey, std::vector<MemAccess>, MemKeyHash> groups;  // the requests being filled
  std::map<std::tuple<std::uintptr_t, MemSpace, MemOp>, MemRow> rows;
  std::unordered_set<std::uint64_t> load_sectors, store_sectors;
  std::vector<MemLaunch> taken;
  std::string label;
  int run = -1;
  struct Module {
    std::uintptr_t pc = 0;  // relative to the module's load address
    std::string file = "?";
    long long mtime = 0;
  };
  std::map<std::uintptr_t, Module> modules;  // by absolute pc
};
MemProf& memprof() {
  static MemProf* m = new MemProf;
  return *m;
}

// One request's units and ideal units.
void memprof_request(std::vector<MemAccess>& acc, MemSpace space, MemOp op, MemRow& row) {
  ++row.requests;
  row.lanes += acc.size();
  for (const MemAccess& a : acc) row.bytes += a.size;
  if (space == MemSpace::global) {
    // distinct bytes (merged intervals) and the sectors they lie in
    std::vector<std::pair<std::uintptr_t, std::uintptr_t>> iv;
    iv.reserve(acc.size());
    for (const MemAccess& a : acc) iv.emplace_back(a.addr, a.addr + a.size);
    std::sort(iv.begin(), iv.end());
    std::uint64_t unique = 0, sectors = 0;
    std::uintptr_t lo = iv[0].first, hi = iv[0].second, last_sector = ~std::uintptr_t{0};
    const auto close = [&] {
      unique += hi - lo;
      for (std::uintptr_t s = lo / 32; s <= (hi - 1) / 32; ++s)
        if (s != last_sector) {
          ++sectors;
          last_sector = s;
        }
    };
    for (std::size_t i = 1; i < iv.size(); ++i) {
      if (iv[i].first <= hi) {
        hi = std::max(hi, iv[i].second);
      } else {
        close();
        lo = iv[i].first;
        hi = iv[i].second;
      }
    }
    close();
    row.units += sectors;
    row.ideal += (unique + 31) / 32;
    if (op == MemOp::atomic) {
      std::vector<std::uintptr_t> addr;
      for (const MemAccess& a : acc) addr.push_back(a.addr);
      std::sort(addr.begin(), addr.end());
      row.addresses += static_cast<std::uint64_t>(std::unique(addr.begin(), addr.end()) - addr.begin());
    }
    return;
  }
  // Shared memory: banks of 4-byte words, a phase of lanes at a time.
  std::uint32_t size = 1;
  for (const MemAccess& a : acc) size = std::max(size, a.size);
  const std::uint32_t phase_lanes = size <= 4 ? 32 : size <= 8 ? 16 : 8;
  std::sort(acc.begin(), acc.end(), [](const MemAccess& x, const MemAccess& y) { return x.lane < y.lane; });
  std::size_t i = 0;
  while (i < acc.size()) {
    const std::uint32_t phase = acc[i].lane / phase_lanes;
    std::vector<std::uintptr_t> words;
    std::uint32_t per_bank[32] = {};
    for (; i < acc.size() && acc[i].lane / phase_lanes == phase; ++i) {
      for (std::uintptr_t w = acc[i].addr / 4; w <= (acc[i].addr + acc[i].size - 1) / 4; ++w) {
        words.push_back(w);
        if (op == MemOp::atomic) ++per_bank[w % 32];  // same-address atomics take a turn each
      }
    }
    std::sort(words.begin(), words.end());
    words.erase(std::unique(words.begin(), words.end()), words.end());
    if (op != MemOp::atomic)
      for (std::uintptr_t w : words) ++per_bank[w % 32];
    row.units += *std::max_element(std::begin(per_bank), std::end(per_bank));
    row.ideal += (words.size() + 31) / 32;
    if (op == MemOp::atomic) row.addresses += words.size();
  }
}

void memprof_flush() {
  MemProf& m = memprof();
  for (auto& [k, acc] : m.groups) {
    MemRow& row = m.rows[{k.pc, k.space, k.op}];
    row.space = k.space;
    row.op = k.op;
    row.pc = k.pc;
    memprof_request(acc, k.space, k.op, row);
  }
  m.groups.clear();
}

void json_string(FILE* f, const std::string& s) { std::fputs(ip::json_string(s).c_str(), f); }

// The thread running a profiled launch (the kernel's fibers run on it): another thread's accesses in
// instrumented code (kernel_bench's watchdog) never touch the emulator's state.
thread_local bool t_profiling = false;

void memprof_begin(Emu& e) {
  MemProf& m = memprof();
  static const bool from_env = [&m] {
    const char* path = std::getenv("CUEMU_MEMPROF");
    if (!path || !*path) return false;
    if (!memprof_instrumented())
      die("CUEMU_MEMPROF=%s: this program's kernels are not instrumented for the memory-access profile (build "
          "them with INDEXPOOL_EMU_MEMPROF=ON, as make mem-profile does)", path);
    m.out = std::fopen(path, "w");
    if (!m.out) die("CUEMU_MEMPROF=%s: cannot open the file for writing", path);
    // How it was made: the program's command line and the time, as the first line.
    std::string cmd;
    if (FILE* c = std::fopen("/proc/self/cmdline", "r")) {
      for (int ch; (ch = std::fgetc(c)) != EOF;) cmd += ch ? static_cast<char>(ch) : ' ';
      std::fclose(c);
    }
    while (!cmd.empty() && cmd.back() == ' ') cmd.pop_back();
    char when[32] = "";
    const std::time_t now = std::time(nullptr);
    std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    std::fprintf(m.out, "{\"profile\": \"cuemu memory-access profile (emu/cuemu.h)\", \"command\": ");
    json_string(m.out, cmd);
    std::fprintf(m.out, ", \"started\": \"%s\"}\n", when);
    return true;
  }();
  (void)from_env;
  g_memprof = t_profiling = m.enabled || m.out;  // (g_memprof: the running launch is profiled)
  if (!g_memprof) return;
  m.groups.clear();
  m.rows.clear();
  m.load_sectors.clear();
  m.store_sectors.clear();
  m.nth.assign(e.fibers.size(), {});
}

void memprof_block_start(std::size_t fiber) {
  MemProf& m = memprof();
  if (g_memprof && fiber < m.nth.size()) m.nth[fiber].clear();
}


// The program's functions by address, from its symbol table (dladdr sees only exported symbols, and a
// program exports none of its kernels).
const std::unordered_map<std::uintptr_t, std::string>& program_functions() {
  static const auto* table = [] {
    auto* t = new std::unordered_map<std::uintptr_t, std::string>;
    for_each_program_symbol([t](const Elf64_Sym& y, const char* name, const Elf64_Shdr*, unsigned, const char*,
                                std::uintptr_t bias) {
      if (ELF64_ST_TYPE(y.st_info) == STT_FUNC && y.st_value) t->emplace(bias + y.st_value, name);
    });
    return t;
  }();
  return *table;
}

// The kernel's function name, demangled ("" when the program has no symbol for it).
std::string kernel_symbol(const void* kernel) {
  static std::map<const void*, std::string> names;
  auto it = names.find(kernel);
  if (it != names.end()) return it->second;
  std::string mangled;
  Dl_info info{};
  if (dladdr(kernel, &info) && info.dli_sname) {
    mangled = info.dli_sname;
  } else {
    const auto& f = program_functions();
    const auto at = f.find(reinterpret_cast<std::uintptr_t>(kernel));
    if (at != f.end()) mangled = at->second;
  }
  std::string name = mangled;
  if (!mangled.empty()) {
    int status = 0;
    char* d = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
    if (status == 0 && d) name = d;
    std::free(d);
  }
  return names.emplace(kernel, name).first->second;
}

void memprof_end(const LaunchSite& site, const void* kernel, dim3 grid, dim3 block) {
  MemProf& m = memprof();
  if (!g_memprof) return;
  memprof_flush();
  g_memprof = false;
  t_profiling = false;
  MemLaunch l;
  l.index = m.launches++;
  l.symbol = kernel_symbol(kernel);
  l.label = m.label;
  l.run = m.run;
  l.kernel = site.kernel;
  l.file = site.file;
  l.line = site.line;
  l.grid = grid;
  l.block = block;
  l.unique_load_sectors = m.load_sectors.size();
  l.unique_store_sectors = m.store_sectors.size();
  for (auto& [key, row] : m.rows) {
    MemRow r = row;
    auto mod = m.modules.find(r.pc);
    if (mod == m.modules.end()) {
      Dl_info info{};
      MemProf::Module v;
      v.pc = r.pc;
      if (dladdr(reinterpret_cast<void*>(r.pc), &info) && info.dli_fname) {
        v.pc = r.pc - reinterpret_cast<std::uintptr_t>(info.dli_fbase);
        char* full = realpath(info.dli_fname, nullptr);  // (the program's own name may be relative)
        v.file = full ? full : info.dli_fname;
        std::free(full);
        struct stat st {};
        if (stat(v.file.c_str(), &st) == 0) v.mtime = static_cast<long long>(st.st_mtime);
      }
      mod = m.modules.emplace(r.pc, std::move(v)).first;
    }
    r.pc = mod->second.pc;
    r.module = mod->second.file;
    r.module_mtime = mod->second.mtime;
    l.rows.push_back(std::move(r));
  }
  if (m.out) {
    static const char* const kSpace[] = {"global", "shared"};
    static const char* const kOp[] = {"load", "store", "atomic"};
    std::fprintf(m.out, "{\"launch\": %llu, \"case\": ", static_cast<unsigned long long>(l.index));
    json_string(m.out, l.label);
    std::fprintf(m.out, ", \"run\": %d, \"kernel\": ", l.run);
    json_string(m.out, l.kernel);
    std::fprintf(m.out, ", \"symbol\": ");
    json_string(m.out, l.symbol);
    std::fprintf(m.out, ", \"site\": ");
    json_string(m.out, l.file + ":" + std::to_string(l.line));
    std::fprintf(m.out, ", \"grid\": [%u, %u, %u], \"block\": [%u, %u, %u], \"unique_load_sectors\": %llu, "
                 "\"unique_store_sectors\": %llu, \"rows\": [", grid.x, grid.y, grid.z, block.x, block.y, block.z,
                 static_cast<unsigned long long>(l.unique_load_sectors),
                 static_cast<unsigned long long>(l.unique_store_sectors));
    for (std::size_t i = 0; i < l.rows.size(); ++i) {
      const MemRow& r = l.rows[i];
      std::fprintf(m.out, "%s{\"pc\": \"0x%llx\", \"module\": ", i ? ", " : "", static_cast<unsigned long long>(r.pc));
      json_string(m.out, r.module);
      std::fprintf(m.out, ", \"module_mtime\": %lld, \"space\": \"%s\", \"op\": \"%s\", \"requests\": %llu, \"lanes\": %llu, \"bytes\": %llu, "
                   "\"units\": %llu, \"ideal\": %llu, \"addresses\": %llu}",
                   r.module_mtime, kSpace[static_cast<int>(r.space)], kOp[static_cast<int>(r.op)],
                   static_cast<unsigned long long>(r.requests), static_cast<unsigned long long>(r.lanes),
                   static_cast<unsigned long long>(r.bytes), static_cast<unsigned long long>(r.units),
                   static_cast<unsigned long long>(r.ideal), static_cast<unsigned long long>(r.addresses));
    }
    std::fprintf(m.out, "]}\n");
    std::fflush(m.out);
  }
  if (m.enabled) m.taken.push_back(std::move(l));
}
}  // namespace

bool g_memprof = false;

// Defined by emu/memprof_hooks.cc, which only programs whose kernels are instrumented link.
extern "C" const int cuemu_memprof_hooks __attribute__((weak));

bool memprof_instrumented() {
  return &cuemu_memprof_hooks != nullptr;
}

void memprof_enable(bool on) {
  if (emu().launch) die("memprof_enable inside a kernel");
  if (on && !memprof_instrumented())
    die("memprof_enable: this program's kernels are not instrumented (build them with INDEXPOOL_EMU_MEMPROF=ON, "
        "as make mem-profile does)");
  memprof().enabled = on;
}

std::vector<MemLaunch> memprof_take() {
  return std::exchange(memprof().taken, {});
}

void memprof_label(const std::string& label) {
  memprof().label = label;
  memprof().run = -1;
}

void memprof_run(int run) {
  memprof().run = run;
}

void memprof_access(const void* p, std::size_t n, MemOp op, const void* pc) {
  if (!t_profiling || n == 0) return;
  MemProf& m = memprof();
  Emu& e = emu();
  if (!g_memprof || !e.launch || !e.cur) return;
  // A CUDA thread's access: on its fiber's stack (not the emulator's own context running a collective).
  const auto fi = static_cast<std::size_t>(e.cur - e.fibers.data());
  const auto sp = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
  const auto stack = reinterpret_cast<std::uintptr_t>(e.stacks[fi].base) + kPage;
  if (sp < stack || sp >= stack + kStackBytes) return;
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  const Running& l = *e.launch;
  const auto smem = reinterpret_cast<std::uintptr_t>(l.smem);
  // Dynamic shared memory, device memory (one map lookup), then the static __shared__ arrays (a scan).
  MemSpace space = MemSpace::shared;
  if (a >= smem && a < smem + l.slots * l.smem_span) {
  } else if (in_allocation(e, p)) {
    space = MemSpace::global;
  } else if (std::none_of(e.static_regions.begin(), e.static_regions.end(), [a](const Emu::Region& g) {
               return a >= reinterpret_cast<std::uintptr_t>(g.p) && a < reinterpret_cast<std::uintptr_t>(g.p) + g.n;
             })) {
    return;  // a local variable, a kernel parameter, host memory
  }
  const Fiber& f = *e.cur;
  const std::uint64_t block = (1ull * f.c.block_idx.z * l.grid.y + f.c.block_idx.y) * l.grid.x + f.c.block_idx.x;
  const auto at = reinterpret_cast<std::uintptr_t>(pc);
  const std::uint32_t nth = m.nth[fi][at]++;
  m.groups[MemKey{block, at, nth, f.warp, space, op}].push_back(
      MemAccess{a, static_cast<std::uint32_t>(n), f.lane});
  if (space == MemSpace::global && op != MemOp::atomic) {
    auto& sectors = op == MemOp::store ? m.store_sectors : m.load_sectors;
    for (std::uintptr_t s = a / 32; s <= (a + n - 1) / 32; ++s) sectors.insert(s);
  }
}

void memprof_atomic(const void* p, std::size_t n) {
  if (g_memprof) memprof_access(p, n, MemOp::atomic, __builtin_return_address(0));
}

bool slot_done(const Emu& e, unsigned r, unsigned n_threads) {
  for (unsigned i = r * n_threads; i < (r + 1) * n_threads; ++i)
    if (e.fibers[i].state != State::Done) return false;
  return true;
}

// Turns in a row in which threads slept in a spin-wait and no thread of the launch reached a barrier, a
// warp collective or its end: then the wait never ends.
constexpr int kIdleTurns = 10000;

// Runs the blocks resident at once, the blocks of a cluster or the resident blocks of a launch without
// clusters (slot r's threads are fibers r * n_threads ...), in turns: in each turn each block (in
// e.block_order) runs each of its warps in turn (in e.warp_order), whose lanes run (in e.order) until none
// can go on, releasing its collectives as they complete. After a turn a block's barrier is released once
// every thread of the block that has not exited waits at it, and the cluster's barrier once every thread
// of the cluster waits at it (here none may have exited: the kernels do not rely on what a GPU does with
// exited threads at a cluster barrier, and an early return before one is reported); threads asleep in a
// spin-wait (__nanosleep) wake for the next turn; and a finished block's slot goes to the launch's next
// block (`next_block`, with resident blocks of a launch without clusters; it returns false when none is
// left). Anything else is a
// deadlock, and so are kIdleTurns turns in a row of threads sleeping with nothing else happening.
template <class NextBlock>
void run_blocks(Emu& e, unsigned n_threads, NextBlock&& next_block) {
  const unsigned slots = e.launch->slots;
  const bool resident = e.launch->cluster == 1 && slots > 1;
  int idle = 0;
  for (;;) {
    const std::uint64_t arrivals = e.arrivals;
    if (resident) permute(e, e.block_order, slots);  // another order of the blocks' turns every turn
    for (unsigned r : e.block_order) {
      const unsigned base = r * n_threads;
      own_static(e, r);
      e.preempted = false;
      for (unsigned w : e.warp_order) {
        const unsigned first = base + w * 32, lanes = std::min(32u, n_threads - w * 32);
        e.warp_first = first;
        e.warp_lanes = lanes;
        for (;;) {
          for (unsigned j = 0; j < 32; ++j) {
            const unsigned l = e.order[j];
            if (l >= lanes || e.fibers[first + l].state != State::Ready) continue;
            e.pos = j;
            resume(e, e.fibers[first + l]);  // runs this lane and then every later ready lane in turn
            break;
          }
          if (e.preempted || !release_warp(e, base, w, n_threads)) break;
        }
        if (e.preempted) break;  // the block's turn ends here (CUEMU_PREEMPT); its other threads go on next turn
      }
      e.preempted = false;
    }
    bool started = false;
    if (resident)
      for (unsigned r = 0; r < slots; ++r)
        if (slot_done(e, r, n_threads) && next_block(r)) started = true;
    bool all_done = true, any_warp = false, all_cluster = true, any_cluster = false, any_asleep = false,
         any_preempted = false;
    for (Fiber& f : e.fibers) {
      if (f.state == State::Preempted) {  // it made progress (an atomic or a fence) and goes on next turn
        any_preempted = true;
        f.state = State::Ready;
      }
      if (f.state != State::Done) all_done = false;
      if (f.state == State::AtWarp) any_warp = true;
      if (f.state == State::Asleep) any_asleep = true;
      if (f.state == State::AtCluster) any_cluster = true;
      else all_cluster = false;
    }
    if (all_done) return;
    if (any_warp && !any_asleep && !any_preempted)
      deadlock(e, "deadlock (threads wait in a warp collective for lanes that wait at a barrier or exited)");
    if (all_cluster) {
      for (Fiber& f : e.fibers) f.state = State::Ready;
      continue;
    }
    bool released = false;
    for (unsigned r = 0; r < slots; ++r) {
      bool all_barrier = true, any_barrier = false;
      for (unsigned i = r * n_threads; i < (r + 1) * n_threads; ++i) {
        const State s = e.fibers[i].state;
        if (s == State::AtBarrier) any_barrier = true;
        else if (s != State::Done) all_barrier = false;
      }
      if (!any_barrier || !all_barrier) continue;
      for (unsigned i = r * n_threads; i < (r + 1) * n_threads; ++i)
        if (e.fibers[i].state == State::AtBarrier) e.fibers[i].state = State::Ready;
      released = true;
    }
    if (any_asleep) {
      if (released || started || any_preempted || e.arrivals != arrivals)
        idle = 0;
      else if (++idle >= kIdleTurns)
        deadlock(e, slots > 1 ? "a spin-wait that never ends (__nanosleep: for many turns no thread of the resident "
                                "blocks got anywhere)"
                              : "a spin-wait that never ends (__nanosleep with one block resident: blocks run one "
                                "after another here, so a wait on another block never ends; set CUEMU_RESIDENT or "
                                "cuemu::set_resident_blocks for a kernel whose blocks wait for each other; on a "
                                "GPU: a wait on a block that is not resident, or a hang)");
      for (Fiber& f : e.fibers)
        if (f.state == State::Asleep) f.state = State::Ready;
      continue;
    }
    if (released || started || any_preempted) continue;
    deadlock(e, any_cluster ? "deadlock (threads wait at the cluster barrier for threads that wait at __syncthreads "
                              "or exited)"
                            : "deadlock");
  }
}

void run_grid(const LaunchSite& site, const void* kernel, dim3 grid, dim3 block, std::size_t smem, cudaStream_t stream,
              BlockBody body, void* launch, unsigned cluster, bool chained) {
  Emu& e = emu();
  install_fault_handler();
  if (e.launch) die("kernel %s launched from inside a kernel (%s:%d)", site.kernel, site.file, site.line);
  const unsigned long long threads = 1ull * block.x * block.y * block.z;
  if (threads == 0 || threads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64 || grid.x == 0 ||
      grid.y == 0 || grid.z == 0 || grid.y > 65535 || grid.z > 65535 || grid.x > 0x7FFFFFFFu) {
    set_error(cudaErrorInvalidConfiguration);
    if (std::getenv("CUEMU_VERBOSE"))
      std::fprintf(stderr, "cuemu: %s (%s:%d): invalid configuration grid (%u,%u,%u) block (%u,%u,%u)\n", site.kernel,
                   site.file, site.line, grid.x, grid.y, grid.z, block.x, block.y, block.z);
    return;
  }
  // Clusters (sm_90): along x, dividing the grid; at most 8 blocks, or 16 for a kernel allowed
  // non-portable sizes (cudaFuncAttributeNonPortableClusterSizeAllowed), as on an H100/H200.
  const unsigned max_cluster = e.non_portable_cluster.count(kernel) ? 16u : 8u;
  if (cluster == 0 || cluster > max_cluster || grid.x % cluster != 0) {
    set_error(cudaErrorInvalidClusterSize);
    std::fprintf(stderr, "cuemu: %s (%s:%d): a cluster of %u blocks for a grid of %u along x (at most %u blocks, "
                 "dividing the grid)\n", site.kernel, site.file, site.line, cluster, grid.x, max_cluster);
    return;
  }
  // The kernel's cudaFuncAttributeMaxDynamicSharedMemorySize bounds every launch of it, also when set below
  // the 48 KiB a kernel gets unasked (cudaFuncAttributes::maxDynamicSharedSizeBytes, driver_types.h). (On a
  // GPU the default is 48 KiB less the kernel's static shared memory, which the emulator does not know per
  // kernel.)
  const auto attr = e.max_dyn_smem.find(kernel);
  const std::size_t allowed = attr == e.max_dyn_smem.end() ? kSmemDefault : static_cast<std::size_t>(attr->second);
  if (smem > kSmemOptin || smem > allowed) {
    set_error(cudaErrorInvalidValue);
    std::fprintf(stderr, "cuemu: %s (%s:%d): %zu bytes of dynamic shared memory, above the %zu allowed\n", site.kernel,
                 site.file, site.line, smem, allowed);
    return;
  }
  if (!valid_stream(stream)) {
    set_error(cudaErrorInvalidResourceHandle);
    return;
  }
  // Blocks resident at once: a cluster's, or with CUEMU_RESIDENT up to that many of a launch without.
  const unsigned long long n_clusters = 1ull * (grid.x / cluster) * grid.y * grid.z;
  const unsigned resident =
      e.resident_only.empty() || std::strstr(site.kernel, e.resident_only.c_str()) ? e.resident : 1u;
  const unsigned slots =
      cluster > 1 ? cluster : static_cast<unsigned>(std::min<unsigned long long>(resident, n_clusters));
  // Dynamic shared memory (each resident block its own, one after another) ends at a guard page.
  const std::size_t smem_span = round_up(std::max<std::size_t>(smem, 16), 16);
  const std::size_t smem_total = smem_span * slots;
  if (smem_total > e.smem_cap) {
    if (e.smem_buf) {
      unsigned char* const old = e.smem_buf - (round_up(e.smem_cap, kPage) - e.smem_cap);
      CUEMU_UNPOISON(old, round_up(e.smem_cap, kPage));
      munmap(old, round_up(e.smem_cap, kPage) + kPage);
    }
    const std::size_t m = round_up(smem_total, kPage);
    void* p = mmap(nullptr, m + kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) die("cannot map shared memory");
    mprotect(static_cast<unsigned char*>(p) + m, kPage, PROT_NONE);
    e.smem_cap = smem_total;
    e.smem_buf = static_cast<unsigned char*>(p) + (m - smem_total);
  }
  if (e.launched.insert(kernel).second) ++e.counts.first_launches;
  Running l;
  l.site = &site;
  l.body = body;
  l.launch = launch;
  l.grid = grid;
  l.block = block;
  l.smem_bytes = smem;
  l.smem_span = smem_span;
  l.chained = chained;
  l.cluster = cluster;
  l.slots = slots;
  l.smem = e.smem_buf + (e.smem_cap - smem_total);
  // Only the blocks' own bytes are addressable: not what lies before the first block's, nor the rounding
  // after each block's (smem_span - smem), where a neighbour's begins.
  CUEMU_UNPOISON(e.smem_buf, e.smem_cap);
  CUEMU_POISON(e.smem_buf, e.smem_cap - smem_total);
  for (unsigned r = 0; r < slots; ++r) CUEMU_POISON(l.smem + r * smem_span + smem, smem_span - smem);
  const unsigned n = static_cast<unsigned>(threads);
  e.fibers.assign(static_cast<std::size_t>(n) * slots, Fiber{});
  note_scheduler_stack(e);
#if CUEMU_TSAN
  e.tsan_host = __tsan_get_current_fiber();
#endif
  e.launch = &l;
  if (!e.regions_found) find_static_regions(e);
  memprof_begin(e);
  const std::size_t static_bytes = e.static_bytes;
  // Clusters run one at a time (a block without clusters is a cluster of one), in the order CUEMU_ORDER
  // gives them too (a kernel may not depend on it): shuffle visits cluster (a * i + c) mod n at step i,
  // with a coprime to n (no table for huge grids). Resident blocks start in that order too.
  unsigned long long mul = 1, add = 0;
  if (e.order_kind == Emu::Order::Reverse) {
    mul = n_clusters - 1;  // (n-1) i + (n-1) = n-1-i mod n
    add = n_clusters - 1;
  } else if (e.order_kind == Emu::Order::Shuffle && n_clusters > 1) {
    mul = 1 + next_random(e.shuffle_state) % (n_clusters - 1);
    while (std::gcd(mul, n_clusters) != 1) mul = mul % (n_clusters - 1) + 1;
    add = next_random(e.shuffle_state) % n_clusters;
  }
  const unsigned cx = grid.x / cluster;
  const auto cluster_at = [&](unsigned long long step) {
    const unsigned long long b =
        static_cast<unsigned long long>((static_cast<unsigned __int128>(mul) * step + add) % n_clusters);
    return make_uint3(static_cast<unsigned>(b % cx) * cluster, static_cast<unsigned>((b / cx) % grid.y),
                      static_cast<unsigned>(b / (1ull * cx * grid.y)));
  };
  const auto start_block = [&](unsigned r, uint3 idx) {
    for (unsigned i = 0; i < n; ++i) {
      Fiber& f = e.fibers[static_cast<std::size_t>(r) * n + i];
      f = Fiber{};
      f.c.thread_idx = make_uint3(i % block.x, (i / block.x) % block.y, i / (block.x * block.y));
      f.c.block_idx = idx;
      f.c.block_dim = block;
      f.c.grid_dim = grid;
      f.lane = i % 32;
      f.warp = i / 32;
      f.slot = r;
      start_fiber(e, f, static_cast<std::size_t>(r) * n + i);
      if (g_memprof) memprof_block_start(static_cast<std::size_t>(r) * n + i);
    }
    e.tsan_reads[r] = {};
  };
  if (slots > 1 && cluster == 1) {
    if (!e.symtab_read)
      die("%u blocks resident (CUEMU_RESIDENT) in a program without a symbol table: the __shared__ arrays of "
          "template kernels would be shared between the blocks (build the emulator programs unstripped)",
          slots);
    // Resident blocks: each slot its own copy of the static __shared__ arrays, swapped in for its turns.
    e.static_copies.assign(static_bytes ? slots : 0, std::vector<unsigned char>(static_bytes, 0xFF));
    e.static_owner = -1;
    unsigned long long step = 0;
    const auto next_block = [&](unsigned r) {
      if (step == n_clusters) return false;
      l.block_idx = cluster_at(step++);
      raw_fill(l.smem + r * smem_span, 0xFF, smem);  // (not a memset the race check counts as the host's)
      tsan_forget(l.smem + r * smem_span, smem);  // the block before it in this slot is done with it
      if (static_bytes) {
        std::fill(e.static_copies[r].begin(), e.static_copies[r].end(), 0xFF);
        if (e.static_owner == static_cast<int>(r)) e.static_owner = -1;  // the section's bytes are stale
      }
      tsan_release(&e.tsan_sync->block_start);  // (race check) the fill comes before the block
      start_block(r, l.block_idx);
      return true;
    };
    // (race check) The blocks come after the host's work and before its next, in no order among
    // themselves: only device-memory atomics and fences order them (tsan_fence, tsan_atomic).
    tsan_acquire(&e.tsan_sync->block_end);
    tsan_release(&e.tsan_sync->block_start);
    for (unsigned r = 0; r < slots; ++r) next_block(r);
    set_order(e, n, slots);
    run_blocks(e, n, next_block);
    tsan_acquire(&e.tsan_sync->block_end);
    e.static_copies.clear();
    e.static_owner = -1;
    memprof_end(site, kernel, grid, block);
    e.launch = nullptr;
    check_slack(site);
    return;
  }
  const auto no_next = [](unsigned) { return false; };
  for (unsigned long long step = 0; step < n_clusters; ++step) {
    l.block_idx = cluster_at(step);
    tsan_acquire(&e.tsan_sync->block_end);  // (race check) after the earlier blocks, the fills below
    l.exited_blocks = 0;
    std::fill(std::begin(l.exited_threads), std::end(l.exited_threads), 0u);
    for (unsigned r = 0; r < cluster; ++r) {
      CUEMU_UNPOISON(l.smem + r * smem_span, smem);  // (a cluster before this one exited and poisoned it)
      std::memset(l.smem + r * smem_span, 0xFF, smem);
    }
    fill_static(e);
    tsan_release(&e.tsan_sync->block_start);  // and the block after them and the host's work
    for (unsigned r = 0; r < cluster; ++r) start_block(r, make_uint3(l.block_idx.x + r, l.block_idx.y, l.block_idx.z));
    set_order(e, n, cluster);
    run_blocks(e, n, no_next);
    memprof_flush();  // this cluster's requests are complete
    // The blocks of a cluster share the kernel's static __shared__ arrays here (one copy per kernel), so a
    // kernel launched with clusters must keep to dynamic shared memory: a static array it wrote (to
    // anything but 0xFF bytes) is reported.
    if (cluster > 1)
      for (const Emu::Region& g : e.static_regions)
        if (raw_find_not(g.p, 0xFF, g.n) < g.n)
            die("kernel %s (launched at %s:%d with clusters of %u blocks) wrote static __shared__ memory (%s), which "
                "the blocks of a cluster would share on the emulator; a kernel launched with clusters must use "
                "dynamic shared memory only",
                site.kernel, site.file, site.line, cluster, g.name.c_str());
  }
  tsan_acquire(&e.tsan_sync->block_end);  // the host's next reads and launches come after the blocks
  memprof_end(site, kernel, grid, block);
  e.launch = nullptr;
  check_slack(site);
}

std::vector<std::string> static_shared_arrays() {
  Emu& e = emu();
  if (!e.regions_found) find_static_regions(e);
  std::vector<std::string> names;
  for (const Emu::Region& g : e.static_regions) names.push_back(g.name + " " + std::to_string(g.n));
  return names;
}

}  // namespace cuemu

// ---------------------------------------------------------------- the CUDA runtime API, on the host
using cuemu::emu;

namespace {
cudaError_t ok() {
  return cudaSuccess;
}
}  // namespace

extern "C" {

cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return ok();
}
cudaError_t cudaSetDevice(int d) {
  return d == 0 ? ok() : cuemu::set_error(cudaErrorInvalidDevice);
}
cudaError_t cudaGetDevice(int* d) {
  *d = 0;
  return ok();
}
cudaError_t cudaDeviceSynchronize() {
  return ok();
}
cudaError_t cudaGetLastError() {
  const cudaError_t e = emu().last_error;
  emu().last_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() {
  return emu().last_error;
}

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotSupported: return "cudaErrorNotSupported";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidClusterSize: return "cudaErrorInvalidClusterSize";
    default: return "cudaError (cuemu)";
  }
}
const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotSupported: return "operation not supported (cuemu)";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidClusterSize: return "invalid cluster size";
    default: return "error (cuemu)";
  }
}

namespace {
// What the emulated device reports: 16 GiB, or CUEMU_DEVICE_MEMORY bytes (tests of what fits a device).
std::size_t total_mem() {
  static const std::size_t total = [] {
    const char* v = std::getenv("CUEMU_DEVICE_MEMORY");
    if (!v || !*v) return std::size_t{16} << 30;
    char* end = nullptr;
    const unsigned long long n = std::strtoull(v, &end, 10);
    if (*end || n == 0) {
      std::fprintf(stderr, "cuemu: CUEMU_DEVICE_MEMORY = '%s' is not a positive number of bytes\n", v);
      std::abort();
    }
    return static_cast<std::size_t>(n);
  }();
  return total;
}
}  // namespace

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int d) {
  if (d != 0) return cuemu::set_error(cudaErrorInvalidDevice);
  *p = cudaDeviceProp{};
  std::snprintf(p->name, sizeof p->name, "cuemu (CPU emulation, sm_90 limits)");
  p->major = 9;
  p->minor = 0;
  p->totalGlobalMem = total_mem();
  p->multiProcessorCount = 132;
  p->l2CacheSize = 50 << 20;
  p->sharedMemPerBlock = 48 * 1024;
  p->sharedMemPerBlockOptin = 227 * 1024;
  p->sharedMemPerMultiprocessor = 228 * 1024;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsPerMultiProcessor = 2048;
  p->warpSize = 32;
  p->regsPerBlock = 65536;
  p->maxThreadsDim[0] = 1024;
  p->maxThreadsDim[1] = 1024;
  p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 0x7FFFFFFF;
  p->maxGridSize[1] = 65535;
  p->maxGridSize[2] = 65535;
  p->memoryBusWidth = 5120;
  return ok();
}

cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int d) {
  if (d != 0) return cuemu::set_error(cudaErrorInvalidDevice);
  switch (a) {
    case cudaDevAttrMultiProcessorCount: *v = 132; return ok();
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = 227 * 1024; return ok();
    case cudaDevAttrMaxSharedMemoryPerBlock: *v = 48 * 1024; return ok();
    case cudaDevAttrL2CacheSize: *v = 50 << 20; return ok();
    case cudaDevAttrMaxThreadsPerBlock: *v = 1024; return ok();
    case cudaDevAttrWarpSize: *v = 32; return ok();
    case cudaDevAttrComputeCapabilityMajor: *v = 9; return ok();
    case cudaDevAttrComputeCapabilityMinor: *v = 0; return ok();
    default: return cuemu::set_error(cudaErrorNotSupported);
  }
}

cudaError_t cudaFuncSetAttribute(const void* f, cudaFuncAttribute a, int v) {
  if (a == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (v < 0 || static_cast<std::size_t>(v) > 227 * 1024) return cuemu::set_error(cudaErrorInvalidValue);
    emu().max_dyn_smem[f] = v;
  }
  if (a == cudaFuncAttributeNonPortableClusterSizeAllowed) {
    if (v) emu().non_portable_cluster.insert(f);
    else emu().non_portable_cluster.erase(f);
  }
  return ok();
}

// What an sm_90 SM would hold by threads (2048), shared memory (228 KiB, 1 KiB reserved per block) and
// registers, taking every kernel to use the most a thread can have (255, allocated as 256): the emulator
// knows no register counts, and the fewest resident blocks make launchers that size their grid by
// occupancy give each block several work items, so tests of moderate size reach those loops.
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, const void*, int threads, std::size_t smem) {
  if (blocks == nullptr || threads < 1 || threads > 1024) return cuemu::set_error(cudaErrorInvalidValue);
  const int warps = (threads + 31) / 32;
  const int by_threads = 2048 / threads;
  const int by_regs = 65536 / (warps * 32 * 256);
  const int by_smem = static_cast<int>(228 * 1024 / (smem + 1024));
  *blocks = std::min({by_threads, by_regs, by_smem, 32});
  return ok();
}

// An sm_90 build's kernel: compiled for sm_90 (PTX and binary version 90), the emulator's device; what the
// emulator does not know (registers, static shared memory, local memory) is 0.
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* a, const void* f) {
  if (a == nullptr || f == nullptr) return cuemu::set_error(cudaErrorInvalidValue);
  *a = cudaFuncAttributes{};
  a->maxThreadsPerBlock = 1024;
  a->ptxVersion = 90;
  a->binaryVersion = 90;
  const auto it = emu().max_dyn_smem.find(f);
  a->maxDynamicSharedSizeBytes = it == emu().max_dyn_smem.end() ? 48 * 1024 : it->second;
  return ok();
}

// Clusters an sm_90 would hold at once: 132 SMs / cluster blocks (one block an SM); an error for a size the
// kernel may not launch with (more than 8 without cudaFuncAttributeNonPortableClusterSizeAllowed, or 16).
cudaError_t cudaOccupancyMaxActiveClusters(int* clusters, const void* f, const cudaLaunchConfig_t* config) {
  if (clusters == nullptr || config == nullptr) return cuemu::set_error(cudaErrorInvalidValue);
  unsigned cluster = 1;
  for (unsigned i = 0; i < config->numAttrs; ++i)
    if (config->attrs[i].id == cudaLaunchAttributeClusterDimension)
      cluster = config->attrs[i].val.clusterDim.x * config->attrs[i].val.clusterDim.y * config->attrs[i].val.clusterDim.z;
  const unsigned max_cluster = emu().non_portable_cluster.count(f) ? 16u : 8u;
  if (cluster == 0 || cluster > max_cluster) return cuemu::set_error(cudaErrorInvalidClusterSize);
  *clusters = static_cast<int>(132 / cluster);
  return ok();
}

cudaError_t cudaMalloc(void** p, std::size_t n) {
  if (n == 0) {
    *p = nullptr;
    return ok();
  }
  if (emu().device_bytes + n > total_mem()) return cuemu::set_error(cudaErrorMemoryAllocation);
  *p = cuemu::guarded_alloc(n, true);
  return *p ? ok() : cuemu::set_error(cudaErrorMemoryAllocation);
}
cudaError_t cudaFree(void* p) {
  if (!p) return ok();
  return cuemu::guarded_free(p, true) ? ok() : cuemu::set_error(cudaErrorInvalidDevicePointer);
}
cudaError_t cudaMallocHost(void** p, std::size_t n) {
  *p = cuemu::guarded_alloc(n, false);
  return *p ? ok() : cuemu::set_error(cudaErrorMemoryAllocation);
}
cudaError_t cudaFreeHost(void* p) {
  if (!p) return ok();
  return cuemu::guarded_free(p, false) ? ok() : cuemu::set_error(cudaErrorInvalidValue);
}
cudaError_t cudaMemGetInfo(std::size_t* free_b, std::size_t* total) {
  *total = total_mem();
  *free_b = total_mem() - emu().device_bytes;
  return ok();
}

cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t n, cudaMemcpyKind) {
  if (n) std::memmove(dst, src, n);
  return ok();
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t n, cudaMemcpyKind k, cudaStream_t s) {
  if (!cuemu::valid_stream(s)) return cuemu::set_error(cudaErrorInvalidResourceHandle);
  return cudaMemcpy(dst, src, n, k);
}
cudaError_t cudaMemcpy2DAsync(void* dst, std::size_t dpitch, const void* src, std::size_t spitch, std::size_t width,
                              std::size_t height, cudaMemcpyKind, cudaStream_t s) {
  if (!cuemu::valid_stream(s)) return cuemu::set_error(cudaErrorInvalidResourceHandle);
  if (width > dpitch || width > spitch) return cuemu::set_error(cudaErrorInvalidValue);
  for (std::size_t r = 0; r < height; ++r)
    std::memmove(static_cast<char*>(dst) + r * dpitch, static_cast<const char*>(src) + r * spitch, width);
  return ok();
}
cudaError_t cudaMemset(void* p, int v, std::size_t n) {
  if (n) std::memset(p, v, n);
  return ok();
}
cudaError_t cudaMemsetAsync(void* p, int v, std::size_t n, cudaStream_t s) {
  if (!cuemu::valid_stream(s)) return cuemu::set_error(cudaErrorInvalidResourceHandle);
  return cudaMemset(p, v, n);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  *s = reinterpret_cast<cudaStream_t>(new char);
  emu().streams.insert(*s);
  return ok();
}
cudaError_t cudaStreamCreate(cudaStream_t* s) {
  return cudaStreamCreateWithFlags(s, 0);
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  if (!emu().streams.erase(s)) return cuemu::set_error(cudaErrorInvalidResourceHandle);
  delete reinterpret_cast<char*>(s);
  return ok();
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  return cuemu::valid_stream(s) ? ok() : cuemu::set_error(cudaErrorInvalidResourceHandle);
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned) {
  if (!cuemu::valid_stream(s) || !emu().events.count(e)) return cuemu::set_error(cudaErrorInvalidResourceHandle);
  return ok();
}

namespace {
struct EmuEvent {
  double ms = -1;  // host time of the last record
};
double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

cudaError_t cudaEventCreate(cudaEvent_t* e) {
  *e = reinterpret_cast<cudaEvent_t>(new EmuEvent);
  emu().events.insert(*e);
  return ok();
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) {
  return cudaEventCreate(e);
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  if (!emu().events.erase(e)) return cuemu::set_error(cudaErrorInvalidResourceHandle);
  delete reinterpret_cast<EmuEvent*>(e);
  return ok();
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  if (!emu().events.count(e) || !cuemu::valid_stream(s)) return cuemu::set_error(cudaErrorInvalidResourceHandle);
  reinterpret_cast<EmuEvent*>(e)->ms = now_ms();
  return ok();
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  return emu().events.count(e) ? ok() : cuemu::set_error(cudaErrorInvalidResourceHandle);
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
  return cudaEventSynchronize(e);
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  if (!emu().events.count(a) || !emu().events.count(b)) return cuemu::set_error(cudaErrorInvalidResourceHandle);
  const auto* x = reinterpret_cast<EmuEvent*>(a);
  const auto* y = reinterpret_cast<EmuEvent*>(b);
  if (x->ms < 0 || y->ms < 0) return cuemu::set_error(cudaErrorInvalidResourceHandle);
  *ms = static_cast<float>(y->ms - x->ms);
  return ok();
}

cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = CUDART_VERSION;
  return ok();
}
cudaError_t cudaDriverGetVersion(int* v) {
  *v = CUDART_VERSION;
  return ok();
}
// The profiler API has nothing to start here. With CUEMU_PROFILER_LOG=<file>, each call appends a line
// ("cudaProfilerStart", "cudaProfilerStop") to that file in one write, so a test can see where a capture
// with nsys --capture-range=cudaProfilerApi would begin and end, in time order with other tools'
// records appended to the same file.
static void log_profiler_call(const char* what) {
  const char* path = std::getenv("CUEMU_PROFILER_LOG");
  if (!path || !*path) return;
  const int fd = ::open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::fprintf(stderr, "cuemu: cannot append to CUEMU_PROFILER_LOG='%s'\n", path);
    return;
  }
  const std::string line = std::string(what) + "\n";
  [[maybe_unused]] const ssize_t n = ::write(fd, line.data(), line.size());
  ::close(fd);
}
cudaError_t cudaProfilerStart() {
  log_profiler_call("cudaProfilerStart");
  return ok();
}
cudaError_t cudaProfilerStop() {
  log_profiler_call("cudaProfilerStop");
  return ok();
}

}  // extern "C"
