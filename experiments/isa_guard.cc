// Linked into the command-line programs: before anything else runs (a constructor of the highest priority an
// application may use), exits 1 with a message naming the missing extensions when this CPU lacks some the
// build's code was compiled for (core/cpu_isa.h). Compiled for plain x86-64 (experiments/CMakeLists.txt).
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "core/cpu_isa.h"

namespace {

__attribute__((constructor(101))) void require_build_isa() {
  char message[1024];
  if (ip::isa_mismatch_message(program_invocation_short_name, ip::kBuildIsa, ip::cpu_isa(), message, sizeof message)) {
    std::fputs(message, stderr);
    std::_Exit(1);
  }
}

}  // namespace
