// An NVTX injection library for tests: it records what a tool such as Nsight Systems would receive from a
// process, with no GPU and no tool installed. NVTX3 loads the library named by NVTX_INJECTION64_PATH at
// the process's first NVTX call and calls its InitializeInjectionNvtx2, which fills NVTX's callback
// tables (nvtx3/nvtxDetail/nvtxTypes.h). This one writes one line per event to the file named by
// IP_NVTX_RECORD (appending; stderr when unset):
//
//   domain <domain> <name>                   nvtxDomainCreateA
//   register <domain> <text>                 nvtxDomainRegisterStringA
//   push <thread> <domain> <R|A> <text>      nvtxDomainRangePushEx; R: a registered string, A: an ASCII message
//   pop <thread> <domain>                    nvtxDomainRangePop
//   mark <thread> <domain> <R|A> <text>      nvtxDomainMarkEx
//
// <domain> is the number of the domain in creation order (1, 2, ...), or 0 for the default domain
// (nvtxRangePushA/Ex, nvtxRangePop, nvtxMarkA/Ex); <thread> is the kernel's thread id. Other NVTX calls
// (start/end ranges, categories, wide strings, resources) are written as `other <what>`, so a test sees
// that they happened. Every line is written whole under a lock, so threads do not interleave within one.
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <string>

#define NVTX_NO_IMPL  // declarations and the callback types (nvtxDetail/nvtxTypes.h) only: this library is the tool
#include <nvtx3/nvToolsExt.h>

namespace {

struct Domain {
  int id = 0;
  std::string name;
};

struct Recorder {
  std::mutex mu;
  FILE* out = stderr;
  std::deque<Domain> domains;       // stable addresses: a domain handle points at its entry
  std::deque<std::string> strings;  // likewise for registered strings

  Recorder() {
    if (const char* path = std::getenv("IP_NVTX_RECORD")) {
      out = std::fopen(path, "a");
      if (!out) {
        std::fprintf(stderr, "nvtx_recorder: cannot open IP_NVTX_RECORD='%s' for appending\n", path);
        std::abort();
      }
      std::setvbuf(out, nullptr, _IOLBF, 0);  // line-buffered: the file is complete even after _exit
    }
  }
  void line(const std::string& s) {
    const std::lock_guard<std::mutex> lock(mu);
    std::fputs(s.c_str(), out);
    std::fputc('\n', out);
  }
};

Recorder& rec() {
  static Recorder* r = new Recorder;  // never destroyed: NVTX calls may come from static destructors
  return *r;
}

std::string tid() {
  return std::to_string(static_cast<long>(::syscall(SYS_gettid)));
}

int domain_id(nvtxDomainHandle_t d) {
  return d ? reinterpret_cast<const Domain*>(d)->id : 0;
}

// "R text" or "A text" (or "? <type>" for the message types a test here does not expect).
std::string message(const nvtxEventAttributes_t* a) {
  if (!a) return "? null-attributes";
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII: return std::string("A ") + (a->message.ascii ? a->message.ascii : "");
    case NVTX_MESSAGE_TYPE_REGISTERED:
      return std::string("R ") +
             (a->message.registered ? *reinterpret_cast<const std::string*>(a->message.registered) : std::string());
    default: return "? type-" + std::to_string(static_cast<int>(a->messageType));
  }
}

nvtxDomainHandle_t NVTX_API domain_create(const char* name) {
  Recorder& r = rec();
  const std::lock_guard<std::mutex> lock(r.mu);
  r.domains.push_back({static_cast<int>(r.domains.size()) + 1, name ? name : ""});
  std::fprintf(r.out, "domain %d %s\n", r.domains.back().id, r.domains.back().name.c_str());
  return reinterpret_cast<nvtxDomainHandle_t>(&r.domains.back());
}

nvtxStringHandle_t NVTX_API register_string(nvtxDomainHandle_t d, const char* s) {
  Recorder& r = rec();
  const std::lock_guard<std::mutex> lock(r.mu);
  r.strings.emplace_back(s ? s : "");
  std::fprintf(r.out, "register %d %s\n", domain_id(d), r.strings.back().c_str());
  return reinterpret_cast<nvtxStringHandle_t>(&r.strings.back());
}

int NVTX_API domain_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  rec().line("push " + tid() + " " + std::to_string(domain_id(d)) + " " + message(a));
  return 0;
}
int NVTX_API domain_pop(nvtxDomainHandle_t d) {
  rec().line("pop " + tid() + " " + std::to_string(domain_id(d)));
  return 0;
}
void NVTX_API domain_mark(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  rec().line("mark " + tid() + " " + std::to_string(domain_id(d)) + " " + message(a));
}
int NVTX_API push_ex(const nvtxEventAttributes_t* a) {
  return domain_push(nullptr, a);
}
int NVTX_API push_a(const char* m) {
  rec().line("push " + tid() + " 0 A " + (m ? m : ""));
  return 0;
}
int NVTX_API pop() {
  return domain_pop(nullptr);
}
void NVTX_API mark_ex(const nvtxEventAttributes_t* a) {
  domain_mark(nullptr, a);
}
void NVTX_API mark_a(const char* m) {
  rec().line("mark " + tid() + " 0 A " + (m ? m : ""));
}

// Calls NVTX makes that the tests here do not expect: recorded by name, so a test can see them.
template <int Module, int Id>
std::uint64_t NVTX_API other() {
  rec().line("other module-" + std::to_string(Module) + "-callback-" + std::to_string(Id));
  return 0;  // 0 also for the calls that return a handle or an id
}

bool install(NvtxGetExportTableFunc_t get) {
  const auto* cb = static_cast<const NvtxExportTableCallbacks*>(get(NVTX_ETID_CALLBACKS));
  if (!cb || cb->struct_size < sizeof(NvtxExportTableCallbacks) || !cb->GetModuleFunctionTable) return false;
  NvtxFunctionTable core = nullptr, core2 = nullptr;
  unsigned int n_core = 0, n_core2 = 0;
  if (!cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &n_core) ||
      !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &n_core2))
    return false;
  const auto set = [](NvtxFunctionTable t, unsigned int n, unsigned int id, NvtxFunctionPointer f) {
    if (id < n && t[id]) *t[id] = f;
  };
  // Everything first as "other", then the calls this library understands.
#define IP_OTHER(mod, tbl, n, id) set(tbl, n, id, reinterpret_cast<NvtxFunctionPointer>(&other<mod, id>))
  IP_OTHER(1, core, n_core, NVTX_CBID_CORE_MarkW);
  IP_OTHER(1, core, n_core, NVTX_CBID_CORE_RangeStartEx);
  IP_OTHER(1, core, n_core, NVTX_CBID_CORE_RangeStartA);
  IP_OTHER(1, core, n_core, NVTX_CBID_CORE_RangeStartW);
  IP_OTHER(1, core, n_core, NVTX_CBID_CORE_RangeEnd);
  IP_OTHER(1, core, n_core, NVTX_CBID_CORE_RangePushW);
  IP_OTHER(5, core2, n_core2, NVTX_CBID_CORE2_DomainRangeStartEx);
  IP_OTHER(5, core2, n_core2, NVTX_CBID_CORE2_DomainRangeEnd);
  IP_OTHER(5, core2, n_core2, NVTX_CBID_CORE2_DomainRegisterStringW);
  IP_OTHER(5, core2, n_core2, NVTX_CBID_CORE2_DomainCreateW);
#undef IP_OTHER
  set(core, n_core, NVTX_CBID_CORE_MarkEx, reinterpret_cast<NvtxFunctionPointer>(&mark_ex));
  set(core, n_core, NVTX_CBID_CORE_MarkA, reinterpret_cast<NvtxFunctionPointer>(&mark_a));
  set(core, n_core, NVTX_CBID_CORE_RangePushEx, reinterpret_cast<NvtxFunctionPointer>(&push_ex));
  set(core, n_core, NVTX_CBID_CORE_RangePushA, reinterpret_cast<NvtxFunctionPointer>(&push_a));
  set(core, n_core, NVTX_CBID_CORE_RangePop, reinterpret_cast<NvtxFunctionPointer>(&pop));
  set(core2, n_core2, NVTX_CBID_CORE2_DomainCreateA, reinterpret_cast<NvtxFunctionPointer>(&domain_create));
  set(core2, n_core2, NVTX_CBID_CORE2_DomainRegisterStringA, reinterpret_cast<NvtxFunctionPointer>(&register_string));
  set(core2, n_core2, NVTX_CBID_CORE2_DomainRangePushEx, reinterpret_cast<NvtxFunctionPointer>(&domain_push));
  set(core2, n_core2, NVTX_CBID_CORE2_DomainRangePop, reinterpret_cast<NvtxFunctionPointer>(&domain_pop));
  set(core2, n_core2, NVTX_CBID_CORE2_DomainMarkEx, reinterpret_cast<NvtxFunctionPointer>(&domain_mark));
  return true;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
  if (!get || !install(get)) {
    std::fprintf(stderr, "nvtx_recorder: NVTX gave no usable callback tables; nothing will be recorded\n");
    return 0;
  }
  rec().line("attached");
  return 1;
}
