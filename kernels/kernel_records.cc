// CUPTI Activity API: concurrent-kernel records joined with external correlation ids (see
// kernel_records.h).
#include "kernels/kernel_records.h"

#include <cuda_runtime.h>
#include <cupti.h>
#include <cxxabi.h>

#include <fmt/format.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "kernels/cupti_counters.h"

namespace ip::cupti {
namespace {

constexpr std::size_t kBufferBytes = 8u << 20;  // per activity buffer
constexpr std::size_t kAlign = 8;

// Completed buffers' records, parsed at completion (CUPTI may call from its own thread).
struct Collected {
  std::mutex mu;
  std::vector<KernelRecord> kernels;            // correlation id in `tag` until joined
  std::vector<std::uint32_t> kernel_correlation;
  std::map<std::uint32_t, std::uint64_t> external;  // correlation id -> external id
  std::size_t dropped = 0;
};
Collected& collected() {
  static Collected c;
  return c;
}
std::atomic<bool> g_active{false};

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(kAlign, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext ctx, std::uint32_t stream, std::uint8_t* buffer, std::size_t size,
                               std::size_t valid) {
  Collected& c = collected();
  {
    const std::lock_guard<std::mutex> lock(c.mu);
    CUpti_Activity* rec = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
      if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
        KernelRecord r;
        r.name = demangle(k->name);
        r.start_ns = k->start;
        r.duration_ns = k->end >= k->start ? k->end - k->start : 0;
        r.grid[0] = k->gridX, r.grid[1] = k->gridY, r.grid[2] = k->gridZ;
        r.block[0] = k->blockX, r.block[1] = k->blockY, r.block[2] = k->blockZ;
        r.registers_per_thread = k->registersPerThread;
        r.static_shared_bytes = k->staticSharedMemory;
        r.dynamic_shared_bytes = k->dynamicSharedMemory;
        r.device = k->deviceId;
        r.stream = k->streamId;
        c.kernels.push_back(std::move(r));
        c.kernel_correlation.push_back(k->correlationId);
      } else if (rec->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
        const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(rec);
        c.external[e->correlationId] = e->externalId;
      }
    }
    std::size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS) c.dropped += dropped;
  }
  std::free(buffer);
}

void check(CUptiResult r, const char* call) {
  if (r != CUPTI_SUCCESS) throw CountersUnavailable(explain(r, call));
}

}  // namespace

std::string demangle(const char* name) {
  if (!name) return "";
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || !out) return name;
  std::string s(out);
  std::free(out);
  return s;
}

KernelRecorder::KernelRecorder() {
  bool expected = false;
  if (!g_active.compare_exchange_strong(expected, true))
    throw CountersUnavailable("a kernel recorder is already active in this process");
  try {
    check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks");
    check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "cuptiActivityEnable(CONCURRENT_KERNEL)");
    check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION), "cuptiActivityEnable(EXTERNAL_CORRELATION)");
    // CUPTI writes an external-correlation record only in front of an API record (cupti_activity.h,
    // cuptiActivityPushExternalCorrelationId), so the runtime and driver API kinds must be on for tags to
    // reach the kernels: without them every tag read 0 on an H200 (2026-12-04). The API records
    // themselves are skipped when the buffers are parsed.
    check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME), "cuptiActivityEnable(RUNTIME)");
    check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER), "cuptiActivityEnable(DRIVER)");
  } catch (...) {
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_DRIVER);
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME);
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    g_active = false;
    throw;
  }
}

KernelRecorder::~KernelRecorder() {
  cudaDeviceSynchronize();
  cuptiActivityFlushAll(1);
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_DRIVER);
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME);
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  Collected& c = collected();
  const std::lock_guard<std::mutex> lock(c.mu);
  c.kernels.clear();
  c.kernel_correlation.clear();
  c.external.clear();
  c.dropped = 0;
  g_active = false;
}

void KernelRecorder::push_tag(std::uint64_t tag) {
  check(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, tag),
        "cuptiActivityPushExternalCorrelationId");
}

void KernelRecorder::pop_tag() {
  std::uint64_t last = 0;
  check(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last),
        "cuptiActivityPopExternalCorrelationId");
}

std::vector<KernelRecord> KernelRecorder::collect(std::size_t* dropped) {
  if (cudaDeviceSynchronize() != cudaSuccess) cudaGetLastError();
  check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  Collected& c = collected();
  const std::lock_guard<std::mutex> lock(c.mu);
  std::vector<KernelRecord> out = std::move(c.kernels);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const auto it = c.external.find(c.kernel_correlation[i]);
    out[i].tag = it == c.external.end() ? 0 : it->second;
  }
  if (dropped) *dropped = c.dropped;
  c.kernels.clear();
  c.kernel_correlation.clear();
  c.external.clear();
  c.dropped = 0;
  return out;
}

}  // namespace ip::cupti
