// NVTX ranges for Nsight Systems and Nsight Compute: one domain, "IndexPool", registered strings for the
// stage names, RAII thread ranges (push on construction, pop on destruction).
//
// Header-only. With NVTX (IP_HAVE_NVTX, from the generated build config: a CUDA build with the toolkit's
// header-only NVTX3) the ranges call the NVTX C API, which costs a function pointer call and does
// nothing when no tool (nsys, ncu) is attached. Without NVTX the classes still exist (the tests use
// them) but the IP_RANGE* macros, the only thing the pipeline and the runner use, compile to nothing.
//
// Stage names (what `ncu --nvtx --nvtx-include "IndexPool@<stage>/"` and nsys timelines show):
//   workload     generating or importing a point's requests
//   pool         weights + pooling + quantization of the index (one fused backend call, so the weights
//                are inside this range, not a range of their own)
//   score        compressed scoring of the index
//   topk         top-k selection of groups
//   attention    block-sparse attention over the selection
//   fidelity     exact indexer, block oracle and dense attention for the fidelity metrics
//   stats        feeding the step's attention mass back into the access statistics
//   cache_model  replaying the selections through the cache hierarchy
//   output       writing the point to the results file
//   sweep        every point of a run (the runner's loop)
//   batch_step   select.batched on cuda: one decode step of all the point's requests (score, top-k and
//                attention launches together; experiments/batched_run.cc)
// and one range per sweep point, named "point <index>: <axis>=<value>;..." (see point_range_name).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "indexpool/build_config.h"

#if IP_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace ip::prof {

inline constexpr const char* kDomainName = "IndexPool";

enum class Stage : int {
  workload, pool, score, topk, attention, fidelity, stats, cache_model, output, sweep, batch_step, count
};

inline const char* stage_name(Stage s) {
  static constexpr const char* kNames[] = {"workload", "pool",        "score",  "topk",  "attention",
                                           "fidelity", "stats",       "cache_model", "output", "sweep",
                                           "batch_step"};
  const int i = static_cast<int>(s);
  return i >= 0 && i < static_cast<int>(Stage::count) ? kNames[i] : "unknown";
}

#if IP_HAVE_NVTX
// The process-wide IndexPool domain (created on first use; NVTX keeps it for the life of the process).
inline nvtxDomainHandle_t domain() {
  static const nvtxDomainHandle_t d = nvtxDomainCreateA(kDomainName);
  return d;
}
#endif

// A string registered once with NVTX in the IndexPool domain. Tools match registered strings cheaply
// (nsys --nvtx-capture considers only registered strings unless NSYS_NVTX_PROFILER_REGISTER_ONLY=0).
class RegisteredString {
 public:
  explicit RegisteredString(std::string text) : text_(std::move(text)) {
#if IP_HAVE_NVTX
    handle_ = nvtxDomainRegisterStringA(domain(), text_.c_str());
#endif
  }
  RegisteredString(const RegisteredString&) = delete;
  RegisteredString& operator=(const RegisteredString&) = delete;
  const std::string& text() const { return text_; }
#if IP_HAVE_NVTX
  // Null when no tool is attached (NVTX then has nothing to register with).
  nvtxStringHandle_t handle() const { return handle_; }
#endif

 private:
  std::string text_;
#if IP_HAVE_NVTX
  nvtxStringHandle_t handle_ = nullptr;
#endif
};

// Interns `text`: the same text always gives the same object (a stable address for the life of the
// process), registered with NVTX once. Thread-safe. Meant for a bounded set of names (stages, kernels);
// per-point names use unregistered messages (ScopedRange(std::string_view)).
inline const RegisteredString& intern(std::string_view text) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<RegisteredString>, std::less<>> strings;
  const std::lock_guard<std::mutex> lock(mu);
  auto it = strings.find(text);
  if (it == strings.end())
    it = strings.emplace(std::string(text), std::make_unique<RegisteredString>(std::string(text))).first;
  return *it->second;
}

// The registered name of a stage (interned once per stage).
inline const RegisteredString& stage_string(Stage s) {
  static const RegisteredString* table[static_cast<int>(Stage::count)] = {};
  static std::once_flag once;
  std::call_once(once, [] {
    for (int i = 0; i < static_cast<int>(Stage::count); ++i) table[i] = &intern(stage_name(static_cast<Stage>(i)));
  });
  const int i = static_cast<int>(s);
  return i >= 0 && i < static_cast<int>(Stage::count) ? *table[i] : intern("unknown");
}

// A thread range in the IndexPool domain, from construction to destruction. Ranges nest (LIFO per thread).
class ScopedRange {
 public:
  explicit ScopedRange(Stage s) : ScopedRange(stage_string(s)) {
    outer_stage_ = current_ref();
    current_ref() = s;
    restores_stage_ = true;
  }
  explicit ScopedRange(const RegisteredString& name) {
#if IP_HAVE_NVTX
    nvtxEventAttributes_t a{};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    if (name.handle()) {
      a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
      a.message.registered = name.handle();
    } else {
      a.messageType = NVTX_MESSAGE_TYPE_ASCII;
      a.message.ascii = name.text().c_str();
    }
    nvtxDomainRangePushEx(domain(), &a);
#endif
    ++depth_ref();
  }
  // An unregistered message (copied by the tool at push time), for names made at run time.
  explicit ScopedRange(std::string_view message) {
#if IP_HAVE_NVTX
    const std::string text(message);
    nvtxEventAttributes_t a{};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = text.c_str();
    nvtxDomainRangePushEx(domain(), &a);
#endif
    ++depth_ref();
  }
  ~ScopedRange() {
    if (restores_stage_) current_ref() = outer_stage_;
#if IP_HAVE_NVTX
    nvtxDomainRangePop(domain());
#endif
    --depth_ref();
  }
  ScopedRange(const ScopedRange&) = delete;
  ScopedRange& operator=(const ScopedRange&) = delete;

  // Ranges open on this thread (maintained here, so it works with no tool attached).
  static int depth() { return depth_ref(); }
  // The innermost Stage range open on this thread (Stage::count: none). Lets a profiling backend
  // attribute a call to the stage the pipeline is in (top-k inside `fidelity` is fidelity work).
  static Stage current_stage() { return current_ref(); }

 private:
  static Stage& current_ref() {
    thread_local Stage s = Stage::count;
    return s;
  }
  Stage outer_stage_ = Stage::count;
  bool restores_stage_ = false;
  static int& depth_ref() {
    thread_local int d = 0;
    return d;
  }
};

}  // namespace ip::prof

#define IP_RANGE_CAT2(a, b) a##b
#define IP_RANGE_CAT(a, b) IP_RANGE_CAT2(a, b)
#if IP_HAVE_NVTX
// A range over the rest of the enclosing scope, named after a Stage enumerator: IP_RANGE(pool);
#define IP_RANGE(stage) const ::ip::prof::ScopedRange IP_RANGE_CAT(ip_range_, __LINE__)(::ip::prof::Stage::stage)
// A range with a name made at run time (an unregistered message): IP_RANGE_MESSAGE(point_name);
#define IP_RANGE_MESSAGE(text) const ::ip::prof::ScopedRange IP_RANGE_CAT(ip_range_, __LINE__)(std::string_view(text))
#else
#define IP_RANGE(stage) static_cast<void>(0)
#define IP_RANGE_MESSAGE(text) static_cast<void>(0)
#endif
