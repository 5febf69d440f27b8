// The memory-access profile's hooks (emu/cuemu.h, "The memory-access profile"): the functions GCC's
// ThreadSanitizer instrumentation calls, defined here in place of ThreadSanitizer's runtime. Only
// programs whose kernels are built with INDEXPOOL_EMU_MEMPROF=ON link this file (never a sanitizer build:
// the real runtime defines the same names). Loads and stores go to cuemu::memprof_access, which keeps a
// CUDA thread's accesses to device and shared memory; the atomic operations the instrumentation turns
// into calls (std::atomic in host code, the emulator's atomics) are carried out here, sequentially
// consistent, and not recorded (the emulator's atomics record themselves, memprof_atomic).
#include <cstddef>
#include <cstdint>

#include "emu/cuemu.h"

extern "C" {

// The emulator looks for this to tell an instrumented program (cuemu::memprof_instrumented).
extern const int cuemu_memprof_hooks;
const int cuemu_memprof_hooks = 1;

void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_vptr_update(void**, void*) {}
void __tsan_vptr_read(void**) {}

#define CUEMU_HOOK(name, n, op)                                                                         \
  void name(void* p) {                                                                                  \
    if (cuemu::g_memprof) cuemu::memprof_access(p, n, cuemu::MemOp::op, __builtin_return_address(0)); \
  }
#define CUEMU_HOOKS(n)                                   \
  CUEMU_HOOK(__tsan_read##n, n, load)                    \
  CUEMU_HOOK(__tsan_write##n, n, store)                  \
  CUEMU_HOOK(__tsan_unaligned_read##n, n, load)          \
  CUEMU_HOOK(__tsan_unaligned_write##n, n, store)        \
  CUEMU_HOOK(__tsan_volatile_read##n, n, load)           \
  CUEMU_HOOK(__tsan_volatile_write##n, n, store)         \
  CUEMU_HOOK(__tsan_unaligned_volatile_read##n, n, load) \
  CUEMU_HOOK(__tsan_unaligned_volatile_write##n, n, store)
CUEMU_HOOKS(1)
CUEMU_HOOKS(2)
CUEMU_HOOKS(4)
CUEMU_HOOKS(8)
CUEMU_HOOKS(16)
#undef CUEMU_HOOKS
#undef CUEMU_HOOK

void __tsan_read_range(void* p, unsigned long n) {
  if (cuemu::g_memprof) cuemu::memprof_access(p, n, cuemu::MemOp::load, __builtin_return_address(0));
}
void __tsan_write_range(void* p, unsigned long n) {
  if (cuemu::g_memprof) cuemu::memprof_access(p, n, cuemu::MemOp::store, __builtin_return_address(0));
}

// Atomics: ThreadSanitizer's interface (tsan_interface_atomic.h), the memory order as GCC's __ATOMIC_*.
#define CUEMU_ATOMICS(bits, T)                                                                              \
  T __tsan_atomic##bits##_load(const volatile T* a, int) { return __atomic_load_n(a, __ATOMIC_SEQ_CST); }   \
  void __tsan_atomic##bits##_store(volatile T* a, T v, int) { __atomic_store_n(a, v, __ATOMIC_SEQ_CST); }   \
  T __tsan_atomic##bits##_exchange(volatile T* a, T v, int) {                                              \
    return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST);                                                    \
  }                                                                                                         \
  T __tsan_atomic##bits##_fetch_add(volatile T* a, T v, int) { return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); } \
  T __tsan_atomic##bits##_fetch_sub(volatile T* a, T v, int) { return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST); } \
  T __tsan_atomic##bits##_fetch_and(volatile T* a, T v, int) { return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST); } \
  T __tsan_atomic##bits##_fetch_or(volatile T* a, T v, int) { return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST); }   \
  T __tsan_atomic##bits##_fetch_xor(volatile T* a, T v, int) { return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST); } \
  T __tsan_atomic##bits##_fetch_nand(volatile T* a, T v, int) {                                            \
    return __atomic_fetch_nand(a, v, __ATOMIC_SEQ_CST);                                                    \
  }                                                                                                         \
  int __tsan_atomic##bits##_compare_exchange_strong(volatile T* a, T* c, T v, int, int) {                  \
    return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                \
  }                                                                                                         \
  int __tsan_atomic##bits##_compare_exchange_weak(volatile T* a, T* c, T v, int, int) {                    \
    return __atomic_compare_exchange_n(a, c, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                 \
  }                                                                                                         \
  T __tsan_atomic##bits##_compare_exchange_val(volatile T* a, T c, T v, int, int) {                        \
    __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                      \
    return c;                                                                                               \
  }
CUEMU_ATOMICS(8, std::int8_t)
CUEMU_ATOMICS(16, std::int16_t)
CUEMU_ATOMICS(32, std::int32_t)
CUEMU_ATOMICS(64, std::int64_t)
#undef CUEMU_ATOMICS

void __tsan_atomic_thread_fence(int) {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
void __tsan_atomic_signal_fence(int) {
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

}  // extern "C"
