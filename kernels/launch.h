// Kernel launches and dynamic shared memory, written once for nvcc and for the CPU emulator (emu/),
// which compiles the same kernel sources with the host compiler.
//   IP_LAUNCH(grid, block, smem_bytes, stream, kernel)(args...)   is   kernel<<<grid, block, smem, stream>>>(args...)
//   IP_DYNAMIC_SHARED(float, smem);                                is   extern __shared__ float smem[];
#pragma once

#if defined(IP_CUEMU)
#define IP_LAUNCH(grid, block, smem, stream, ...) \
  ::cuemu::launch(__FILE__, __LINE__, #__VA_ARGS__, grid, block, smem, stream, __VA_ARGS__)
#define IP_DYNAMIC_SHARED(type, name) type* const name = reinterpret_cast<type*>(::cuemu::dynamic_shared())
#else
#define IP_LAUNCH(grid, block, smem, stream, ...) __VA_ARGS__<<<grid, block, smem, stream>>>
#define IP_DYNAMIC_SHARED(type, name) extern __shared__ __align__(16) type name[]
#endif
