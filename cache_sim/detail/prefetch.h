// A prefetch the compiler keeps. g++ 12 at -O2 deletes a loop whose body is only __builtin_prefetch
// of an address it loads from memory (seen in the victim look-ahead of lru: the loop compiled to
// nothing), as if the prefetch had no effect; an asm volatile cannot be deleted.
#pragma once

namespace ip::cache::detail {

inline void prefetch_kept(const void* p) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p);
#endif
}

}  // namespace ip::cache::detail
