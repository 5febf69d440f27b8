// CUPTI Range Profiler: metric planning on the host (no GPU) and user-range, user-replay collection on a
// device. See cupti_counters.h. The flow follows CUPTI 13's range profiling documentation:
//   host: cuptiProfilerHostInitialize(chip, counter availability) -> ConfigAddMetrics -> GetConfigImage
//   target: cuptiProfilerInitialize -> cuptiRangeProfilerEnable(ctx) -> GetCounterDataSize /
//           CounterDataImageInitialize -> SetConfig(user range, user replay)
//           -> { Start, PushRange, work, PopRange, Stop } until isAllPassSubmitted -> DecodeData
//   host: cuptiProfilerHostEvaluateToGpuValues(counter data, range 0)
#include "kernels/cupti_counters.h"

#include <cuda_runtime.h>
#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include <fmt/format.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "kernels/cuda_check.h"

namespace ip::cupti {
namespace {

// A CUPTI parameter struct, zeroed, with its size set.
template <class T>
T params(std::size_t size) {
  T p{};
  p.structSize = size;
  return p;
}

std::string result_name(CUptiResult r) {
  const char* s = nullptr;
  if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s) return fmt::format("CUPTI error {}", static_cast<int>(r));
  return s;
}

// INDEXPOOL_CUPTI_TRACE=1 prints each CUPTI call of the device path to stderr before it is made and its
// result after, so a call that crashes inside CUPTI is named by the last line printed.
bool tracing() {
  static const bool on = [] {
    const char* v = std::getenv("INDEXPOOL_CUPTI_TRACE");
    return v && *v && std::string(v) != "0";
  }();
  return on;
}
void trace(const char* call) {
  if (tracing()) std::fprintf(stderr, "cupti: %s ...\n", call), std::fflush(stderr);
}

// Throws CountersUnavailable with the explanation of a failed CUPTI call.
void check(CUptiResult r, const char* call) {
  if (tracing()) std::fprintf(stderr, "cupti: %s -> %s\n", call, result_name(r).c_str()), std::fflush(stderr);
  if (r != CUPTI_SUCCESS) throw CountersUnavailable(explain(r, call), environment_result(r));
}
// trace + call + check in one: IP_CUPTI_CALL(cuptiX, &params).
#define IP_CUPTI_CALL(fn, arg) (trace(#fn), check(fn(arg), #fn))

// The profiler host object for one chip (and, on a device, its counter availability image).
class HostObject {
 public:
  HostObject(const std::string& chip, const std::vector<std::uint8_t>* availability) {
    auto p = params<CUpti_Profiler_Host_Initialize_Params>(CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE);
    p.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    p.pChipName = chip.c_str();
    p.pCounterAvailabilityImage = availability && !availability->empty() ? availability->data() : nullptr;
    const CUptiResult r = cuptiProfilerHostInitialize(&p);
    if (r != CUPTI_SUCCESS) {
      std::string chips;
      for (const auto& c : supported_chips()) chips += (chips.empty() ? "" : " ") + c;
      throw Error(fmt::format("CUPTI cannot profile chip '{}' ({}); chips this CUPTI knows: {}", chip, result_name(r),
                              chips));
    }
    obj_ = p.pHostObject;
  }
  ~HostObject() {
    auto p = params<CUpti_Profiler_Host_Deinitialize_Params>(CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE);
    p.pHostObject = obj_;
    cuptiProfilerHostDeinitialize(&p);
  }
  HostObject(const HostObject&) = delete;
  HostObject& operator=(const HostObject&) = delete;
  CUpti_Profiler_Host_Object* get() const { return obj_; }

 private:
  CUpti_Profiler_Host_Object* obj_ = nullptr;
};

// Checks the metrics, schedules them and returns the plan and the config image.
MetricPlan make_plan(const HostObject& host, const std::string& chip, const std::vector<std::string>& metrics,
                     std::vector<std::uint8_t>& config) {
  IP_REQUIRE(!metrics.empty(), "no metrics to collect (profile.metrics is empty)");
  MetricPlan plan;
  plan.chip = chip;
  for (const auto& m : metrics) {
    auto p = params<CUpti_Profiler_Host_GetMetricProperties_Params>(CUpti_Profiler_Host_GetMetricProperties_Params_STRUCT_SIZE);
    p.pHostObject = host.get();
    p.pMetricName = m.c_str();
    const CUptiResult r = cuptiProfilerHostGetMetricProperties(&p);
    if (r != CUPTI_SUCCESS)
      throw UnknownMetric(m, fmt::format("metric '{}' is not known to CUPTI for chip {} ({}); 'ncu --query-metrics "
                                         "--chip {}' lists the valid names",
                                         m, chip, result_name(r), chip == "GH100" ? "gh100" : chip));
    MetricInfo info;
    info.name = m;
    info.unit = p.pDimUnit ? p.pDimUnit : "";
    info.description = p.pDescription ? p.pDescription : "";
    // Counters (x.sum) add up over the calls of a stage; ratios, averages and percentages do not.
    info.sums = m.size() > 4 && m.compare(m.size() - 4, 4, ".sum") == 0 && info.unit != "percent";
    plan.metrics.push_back(std::move(info));
  }
  std::vector<const char*> names;
  for (const auto& m : metrics) names.push_back(m.c_str());
  auto add = params<CUpti_Profiler_Host_ConfigAddMetrics_Params>(CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE);
  add.pHostObject = host.get();
  add.ppMetricNames = names.data();
  add.numMetrics = names.size();
  if (const CUptiResult r = cuptiProfilerHostConfigAddMetrics(&add); r != CUPTI_SUCCESS)
    throw Error(fmt::format("CUPTI cannot schedule the metrics for chip {}: {}", chip, result_name(r)));
  auto size = params<CUpti_Profiler_Host_GetConfigImageSize_Params>(CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE);
  size.pHostObject = host.get();
  if (const CUptiResult r = cuptiProfilerHostGetConfigImageSize(&size); r != CUPTI_SUCCESS)
    throw Error(fmt::format("cuptiProfilerHostGetConfigImageSize: {}", result_name(r)));
  config.assign(size.configImageSize, 0);
  auto img = params<CUpti_Profiler_Host_GetConfigImage_Params>(CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE);
  img.pHostObject = host.get();
  img.configImageSize = config.size();
  img.pConfigImage = config.data();
  if (const CUptiResult r = cuptiProfilerHostGetConfigImage(&img); r != CUPTI_SUCCESS)
    throw Error(fmt::format("cuptiProfilerHostGetConfigImage: {}", result_name(r)));
  auto np = params<CUpti_Profiler_Host_GetNumOfPasses_Params>(CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE);
  np.configImageSize = config.size();
  np.pConfigImage = config.data();
  if (const CUptiResult r = cuptiProfilerHostGetNumOfPasses(&np); r != CUPTI_SUCCESS)
    throw Error(fmt::format("cuptiProfilerHostGetNumOfPasses: {}", result_name(r)));
  plan.passes = np.numOfPasses;
  return plan;
}

using CtxGetCurrent = int (*)(CUcontext*);

// The current driver context, through the runtime's driver entry point (no link against libcuda, so
// every binary still starts on machines without a driver).
CUcontext current_context() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  IP_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 12000, cudaEnableDefault, &q));
  if (!fn || q != cudaDriverEntryPointSuccess) throw CountersUnavailable("the CUDA driver has no cuCtxGetCurrent");
  CUcontext ctx = nullptr;
  if (reinterpret_cast<CtxGetCurrent>(fn)(&ctx) != 0 || !ctx)
    throw CountersUnavailable("no current CUDA context to profile");
  return ctx;
}

}  // namespace

namespace {
// What the user can do about a failed CUPTI call that is the machine's doing; nullptr for the others.
const char* environment_advice(CUptiResult r) {
  switch (r) {
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
      return " — this user may not read GPU performance counters (ERR_NVGPUCTRPERM). Run as root, or let every "
             "user profile: load the nvidia module with NVreg_RestrictProfilingToAdminUsers=0 "
             "(https://developer.nvidia.com/ERR_NVGPUCTRPERM); in a container, add --cap-add=SYS_ADMIN";
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
    case CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED:
    case CUPTI_ERROR_HARDWARE_BUSY:
      return " — another profiler holds the counters (running under Nsight Systems or Nsight Compute?). Under "
             "nsys/ncu use 'indexpool run --profile' (in-process CUPTI off) or set profile.counters = off";
    case CUPTI_ERROR_NOT_INITIALIZED:
    case CUPTI_ERROR_INVALID_DEVICE:
    case CUPTI_ERROR_INVALID_CONTEXT:
      return " — no usable CUDA device or context (counters need the cuda backend on a GPU)";
    case CUPTI_ERROR_NOT_SUPPORTED:
    case CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED:
    case CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED:
      return " — this device or configuration does not support counter collection (MIG, vGPU, WSL, "
             "confidential computing and pre-Turing GPUs are not supported)";
    default: return nullptr;
  }
}
}  // namespace

bool environment_result(int code) { return environment_advice(static_cast<CUptiResult>(code)) != nullptr; }

std::string explain(int code, const std::string& call) {
  const auto r = static_cast<CUptiResult>(code);
  const char* advice = environment_advice(r);
  return fmt::format("{} failed: {}{}", call, result_name(r), advice ? advice : "");
}

std::vector<std::string> supported_chips() {
  auto p = params<CUpti_Profiler_Host_GetSupportedChips_Params>(CUpti_Profiler_Host_GetSupportedChips_Params_STRUCT_SIZE);
  if (cuptiProfilerHostGetSupportedChips(&p) != CUPTI_SUCCESS) return {};
  std::vector<std::string> out;
  for (std::size_t i = 0; i < p.numChips; ++i) out.emplace_back(p.ppChipNames[i]);
  return out;
}

MetricPlan plan_metrics(const std::string& chip, const std::vector<std::string>& metrics) {
  HostObject host(chip, nullptr);
  std::vector<std::uint8_t> config;
  return make_plan(host, chip, metrics, config);
}

namespace {

void require_device(int device) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || device < 0 || device >= n) {
    cudaGetLastError();
    throw CountersUnavailable(fmt::format("no CUDA device {} (counters need a GPU and the cuda backend)", device));
  }
}

// The chip name of a device; the profiler interface must be initialized (CUPTI's samples call
// cuptiProfilerInitialize first, and the call is not documented to work without it).
std::string chip_name(int device) {
  auto p = params<CUpti_Device_GetChipName_Params>(CUpti_Device_GetChipName_Params_STRUCT_SIZE);
  p.deviceIndex = static_cast<std::size_t>(device);
  IP_CUPTI_CALL(cuptiDeviceGetChipName, &p);
  return p.pChipName;
}

}  // namespace

std::string device_chip(int device) {
  require_device(device);
  auto init = params<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
  IP_CUPTI_CALL(cuptiProfilerInitialize, &init);
  struct Deinitialize {  // on return and on a throw alike
    ~Deinitialize() {
      auto de = params<CUpti_Profiler_DeInitialize_Params>(CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE);
      cuptiProfilerDeInitialize(&de);
    }
  } deinitialize;
  return chip_name(device);
}

struct RangeProfiler::Impl {
  CUcontext ctx = nullptr;
  std::unique_ptr<HostObject> host;
  MetricPlan plan;
  std::vector<std::string> metrics;
  std::vector<std::uint8_t> config, counter_data;
  CUpti_RangeProfiler_Object* obj = nullptr;
  bool profiler_initialized = false;
  // Also runs when the constructor throws halfway, so a failed start leaves CUPTI as it found it.
  ~Impl() {
    if (obj) {
      auto p = params<CUpti_RangeProfiler_Disable_Params>(CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE);
      p.pRangeProfilerObject = obj;
      cuptiRangeProfilerDisable(&p);
    }
    if (profiler_initialized) {
      auto p = params<CUpti_Profiler_DeInitialize_Params>(CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE);
      cuptiProfilerDeInitialize(&p);
    }
  }
};

RangeProfiler::RangeProfiler(int device, const std::vector<std::string>& metrics) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.metrics = metrics;
  require_device(device);
  IP_CUDA_CHECK(cudaSetDevice(device));
  IP_CUDA_CHECK(cudaFree(nullptr));  // creates the primary context
  m.ctx = current_context();

  // The order of CUPTI's range-profiling samples: initialize, chip name, counter availability, host
  // configuration, enable, counter data image, set config.
  auto init = params<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
  IP_CUPTI_CALL(cuptiProfilerInitialize, &init);
  m.profiler_initialized = true;
  const std::string chip = chip_name(device);

  // Which counters this context may use right now (another profiler or a busy device shows here).
  auto av = params<CUpti_Profiler_GetCounterAvailability_Params>(CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE);
  av.ctx = m.ctx;
  IP_CUPTI_CALL(cuptiProfilerGetCounterAvailability, &av);
  std::vector<std::uint8_t> availability(av.counterAvailabilityImageSize);
  av.pCounterAvailabilityImage = availability.data();
  IP_CUPTI_CALL(cuptiProfilerGetCounterAvailability, &av);

  trace("cuptiProfilerHostInitialize (with the counter availability image)");
  m.host = std::make_unique<HostObject>(chip, &availability);
  trace("host configuration (cuptiProfilerHostGetMetricProperties, ConfigAddMetrics, GetConfigImage, GetNumOfPasses)");
  m.plan = make_plan(*m.host, chip, metrics, m.config);

  auto en = params<CUpti_RangeProfiler_Enable_Params>(CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE);
  en.ctx = m.ctx;
  IP_CUPTI_CALL(cuptiRangeProfilerEnable, &en);
  m.obj = en.pRangeProfilerObject;

  std::vector<const char*> names;
  for (const auto& s : m.metrics) names.push_back(s.c_str());
  auto sz = params<CUpti_RangeProfiler_GetCounterDataSize_Params>(CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE);
  sz.pRangeProfilerObject = m.obj;
  sz.pMetricNames = names.data();
  sz.numMetrics = names.size();
  sz.maxNumOfRanges = 1;  // one range per measure()
  sz.maxNumRangeTreeNodes = 1;
  IP_CUPTI_CALL(cuptiRangeProfilerGetCounterDataSize, &sz);
  m.counter_data.assign(sz.counterDataSize, 0);
}

RangeProfiler::~RangeProfiler() = default;  // Impl's destructor disables and deinitializes

const MetricPlan& RangeProfiler::plan() const { return impl_->plan; }

std::vector<double> RangeProfiler::measure(const std::string& range, const std::function<void()>& run,
                                           const std::function<void()>& restore) {
  Impl& m = *impl_;
  // A fresh counter data image for this range.
  auto ci = params<CUpti_RangeProfiler_CounterDataImage_Initialize_Params>(CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE);
  ci.pRangeProfilerObject = m.obj;
  ci.counterDataSize = m.counter_data.size();
  ci.pCounterData = m.counter_data.data();
  IP_CUPTI_CALL(cuptiRangeProfilerCounterDataImageInitialize, &ci);

  auto sc = params<CUpti_RangeProfiler_SetConfig_Params>(CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE);
  sc.pRangeProfilerObject = m.obj;
  sc.configSize = m.config.size();
  sc.pConfig = m.config.data();
  sc.counterDataImageSize = m.counter_data.size();
  sc.pCounterDataImage = m.counter_data.data();
  sc.range = CUPTI_UserRange;
  sc.replayMode = CUPTI_UserReplay;
  sc.maxRangesPerPass = 1;
  sc.numNestingLevels = 1;
  sc.minNestingLevel = 1;
  sc.passIndex = 0;
  sc.targetNestingLevel = 1;
  IP_CUPTI_CALL(cuptiRangeProfilerSetConfig, &sc);

  bool all_submitted = false;
  for (std::size_t pass = 0; !all_submitted; ++pass) {
    // A schedule that never completes would loop forever: CUPTI said how many passes it needs.
    IP_REQUIRE(pass < m.plan.passes + 2, "CUPTI range '{}': not all passes submitted after {} passes", range, pass);
    if (pass > 0 && restore) restore();
    IP_CUDA_CHECK(cudaDeviceSynchronize());  // nothing from before the range may count in it
    auto st = params<CUpti_RangeProfiler_Start_Params>(CUpti_RangeProfiler_Start_Params_STRUCT_SIZE);
    st.pRangeProfilerObject = m.obj;
    IP_CUPTI_CALL(cuptiRangeProfilerStart, &st);
    auto push = params<CUpti_RangeProfiler_PushRange_Params>(CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE);
    push.pRangeProfilerObject = m.obj;
    push.pRangeName = range.c_str();
    IP_CUPTI_CALL(cuptiRangeProfilerPushRange, &push);
    run();
    IP_CUDA_CHECK(cudaDeviceSynchronize());
    auto pop = params<CUpti_RangeProfiler_PopRange_Params>(CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE);
    pop.pRangeProfilerObject = m.obj;
    IP_CUPTI_CALL(cuptiRangeProfilerPopRange, &pop);
    auto stop = params<CUpti_RangeProfiler_Stop_Params>(CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE);
    stop.pRangeProfilerObject = m.obj;
    IP_CUPTI_CALL(cuptiRangeProfilerStop, &stop);
    all_submitted = stop.isAllPassSubmitted != 0;
  }
  auto dd = params<CUpti_RangeProfiler_DecodeData_Params>(CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE);
  dd.pRangeProfilerObject = m.obj;
  IP_CUPTI_CALL(cuptiRangeProfilerDecodeData, &dd);
  if (dd.numOfRangeDropped > 0)
    throw CountersUnavailable(fmt::format("CUPTI dropped {} range(s) of '{}'", dd.numOfRangeDropped, range), false);
  auto info = params<CUpti_RangeProfiler_GetCounterDataInfo_Params>(CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE);
  info.pCounterDataImage = m.counter_data.data();
  info.counterDataImageSize = m.counter_data.size();
  IP_CUPTI_CALL(cuptiRangeProfilerGetCounterDataInfo, &info);
  if (info.numTotalRanges < 1)
    throw CountersUnavailable(fmt::format("CUPTI recorded no range for '{}' (did it launch any kernel?)", range),
                              false);

  std::vector<const char*> names;
  for (const auto& s : m.metrics) names.push_back(s.c_str());
  std::vector<double> values(names.size(), 0.0);
  auto ev = params<CUpti_Profiler_Host_EvaluateToGpuValues_Params>(CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE);
  ev.pHostObject = m.host->get();
  ev.pCounterDataImage = m.counter_data.data();
  ev.counterDataImageSize = m.counter_data.size();
  ev.rangeIndex = 0;
  ev.ppMetricNames = names.data();
  ev.numMetrics = names.size();
  ev.pMetricValues = values.data();
  IP_CUPTI_CALL(cuptiProfilerHostEvaluateToGpuValues, &ev);
  return values;
}

}  // namespace ip::cupti
