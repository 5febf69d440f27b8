// Kernel launch records through CUPTI's Activity API (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL): name
// (demangled), duration, grid, block, registers per thread, static and dynamic shared memory of every
// kernel the process runs while a recorder is alive. Host-only header; built with CUPTI.
//
// Each launch can carry a tag: the recorder pushes it as a CUPTI external correlation id around the
// work (push_tag/pop_tag), and every kernel launched in between gets it (0: untagged). The runner tags
// each stage call and replay pass, so records of counter replay passes can be told apart.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ip::cupti {

struct KernelRecord {
  std::string name;  // demangled (the mangled name when demangling fails)
  std::uint64_t start_ns = 0, duration_ns = 0;  // GPU timestamps, nanoseconds
  int grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  int registers_per_thread = 0;
  std::int64_t static_shared_bytes = 0, dynamic_shared_bytes = 0;
  std::uint32_t device = 0, stream = 0;
  std::uint64_t tag = 0;  // the innermost tag pushed when the kernel was launched (0: none)
};

// One recorder at a time per process (CUPTI's activity buffers are process-wide). Throws
// CountersUnavailable (cupti_counters.h) when CUPTI refuses, e.g. when Nsight already subscribed.
class KernelRecorder {
 public:
  KernelRecorder();
  ~KernelRecorder();
  KernelRecorder(const KernelRecorder&) = delete;
  KernelRecorder& operator=(const KernelRecorder&) = delete;

  void push_tag(std::uint64_t tag);
  void pop_tag();
  // Flushes CUPTI's buffers (after synchronizing the device) and returns the launches completed since
  // the last call, in completion-buffer order; `dropped` receives the records CUPTI had to drop.
  std::vector<KernelRecord> collect(std::size_t* dropped = nullptr);
};

// "name<T>(int, float*)" from a mangled C++ name; the input when it is not one.
std::string demangle(const char* name);

}  // namespace ip::cupti
