// The CPU check (see cpu_check.hpp). Compiled for plain x86-64 whatever DDP_NATIVE says.
#include "base/cpu_check.hpp"

#include <unistd.h>

#include <cstdlib>

#include "base/exit_codes.hpp"

#ifndef DDP_BUILD_ISA
#define DDP_BUILD_ISA ""  // not built with -march=native, or not on x86-64: nothing to check
#endif

namespace ddp::cpu {

std::string missing_features(std::string_view built, bool (*supports)(std::string_view name)) {
  std::string missing;
  while (!built.empty()) {
    const std::size_t space = built.find(' ');
    const std::string_view name = built.substr(0, space);
    if (!name.empty() && !supports(name)) {
      if (!missing.empty()) missing += ' ';
      missing.append(name);
    }
    built = space == std::string_view::npos ? std::string_view() : built.substr(space + 1);
  }
  return missing;
}

bool cpu_supports(std::string_view name) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  // Before main() libgcc may not have looked at the CPU yet: ask it to (once is enough,
  // again is harmless). __builtin_cpu_supports wants a string literal: a line per name.
  __builtin_cpu_init();
#define DDP_ISA(n) \
  if (name == n) return __builtin_cpu_supports(n);
  DDP_ISA("sse4.2") DDP_ISA("popcnt") DDP_ISA("avx") DDP_ISA("avx2") DDP_ISA("fma")
  DDP_ISA("bmi") DDP_ISA("bmi2") DDP_ISA("avx512f") DDP_ISA("avx512cd") DDP_ISA("avx512bw")
  DDP_ISA("avx512dq") DDP_ISA("avx512vl") DDP_ISA("avx512vnni") DDP_ISA("avx512ifma")
  DDP_ISA("avx512vbmi") DDP_ISA("avx512vbmi2") DDP_ISA("avx512bitalg")
  DDP_ISA("avx512vpopcntdq") DDP_ISA("avx512bf16") DDP_ISA("avx512fp16") DDP_ISA("avxvnni")
  DDP_ISA("f16c") DDP_ISA("movbe") DDP_ISA("aes") DDP_ISA("pclmul") DDP_ISA("sha")
  DDP_ISA("gfni") DDP_ISA("vaes") DDP_ISA("vpclmulqdq")
#undef DDP_ISA
#endif
  (void)name;
  return true;
}

std::string_view build_isa() { return DDP_BUILD_ISA; }

std::string missing_message(const std::string& missing) {
  return "ddp: this CPU lacks " + missing +
         ", which this build uses: it was compiled with -march=native on a newer CPU "
         "(DDP_NATIVE=ON, the default), and would stop here with \"Illegal instruction\"\n"
         "hint: build on this kind of node (in a job), or configure with -DDDP_NATIVE=OFF "
         "for a build that runs on every x86-64 node\n";
}

namespace {

// Before main() and before the other static constructors (priority 101 runs first).
__attribute__((constructor(101))) void check_this_cpu() {
  const std::string missing = missing_features(DDP_BUILD_ISA, cpu_supports);
  if (missing.empty()) return;
  const std::string message = missing_message(missing);
  (void)!::write(STDERR_FILENO, message.data(), message.size());
  std::_Exit(kExitUsage);
}

}  // namespace

// Referenced by the linker flag in base/CMakeLists.txt (-u), so that every program that
// links ddp::base takes this file, and its constructor, out of the static library.
extern "C" void ddp_cpu_check_anchor() {}

}  // namespace ddp::cpu
