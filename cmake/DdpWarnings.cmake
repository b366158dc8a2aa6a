# Compiler flags every ddp.cpp target shares: warnings on (and clean), the CPU
# architecture, sanitizers. Applied per target so that third-party headers stay quiet.
include_guard(GLOBAL)

function(ddp_set_warnings target)
  set(cxx_warnings -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                   -Wcast-align -Wunused -Woverloaded-virtual -Wnull-dereference
                   -Wimplicit-fallthrough)
  # GCC 12 warns "'__Y' may be used uninitialized" inside its own AVX-512 intrinsics
  # (avx512fintrin.h) wherever Eigen's AVX-512 GEMM is inlined, i.e. on any AVX-512 CPU
  # with -march=native. A false positive, GCC bug 105593, fixed in GCC 13.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    list(APPEND cxx_warnings -Wno-maybe-uninitialized)
  endif()
  if(DDP_WERROR)
    list(APPEND cxx_warnings -Werror)
  endif()
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:${cxx_warnings}>
    # nvcc passes host-compiler warnings through -Xcompiler.
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra --expt-relaxed-constexpr>)
  if(DDP_NATIVE)
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-march=native>
      $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-march=native>)
  endif()
endfunction()

# DDP_SANITIZE: OFF, ON or "address" (AddressSanitizer + UBSan, the asan preset), or
# "thread" (ThreadSanitizer, the tsan preset). DDP_SANITIZER says which, for the tests
# (cmake/DdpTesting.cmake scales their timeouts and points them at the suppressions).
if(DDP_SANITIZE STREQUAL "thread")
  set(DDP_SANITIZER thread)
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=thread>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-omit-frame-pointer>)
  add_link_options(-fsanitize=thread)
elseif(DDP_SANITIZE)
  if(NOT DDP_SANITIZE MATCHES "^(ON|on|On|TRUE|true|1|YES|yes|address)$")
    message(FATAL_ERROR "DDP_SANITIZE=${DDP_SANITIZE}: expected OFF, ON (= address) or thread")
  endif()
  set(DDP_SANITIZER address)
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-omit-frame-pointer>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize-recover=undefined>)
  add_link_options(-fsanitize=address,undefined)
else()
  set(DDP_SANITIZER none)
endif()

# ---- A compiler bug the build checks for ---------------------------------------------
# Note [GCC 12 SLP miscompile]
# GCC 12.2 at -O2 and above, targeting AVX-512 (-march=native on an AVX-512 CPU) or tuning
# for one (-mtune=rocketlake, ...), can build two small constant arrays side by side
# wrongly: its SLP vectorizer stores {1, 1, 1, 0} with the same 256-bit broadcast of 1 as
# {1, 1, 1, 1}, so the last element silently becomes 1. The probe below runs that pattern
# with the flags of this build; when it comes out wrong, every file is compiled with
# -fno-tree-slp-vectorize, which avoids it. (Eigen's matmul kernels are written with
# intrinsics and lose nothing; loops still vectorize.) tests/ch00/test_dependencies.cpp
# runs the pattern with the build's flags and, with the vectorizer turned back on for one
# function, checks that the probe's verdict (DDP_AVOID_SLP) is what the compiler does.
set(DDP_AVOID_SLP OFF)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND NOT CMAKE_CROSSCOMPILING)
  include(CheckCXXSourceRuns)
  set(_ddp_probe [[
#include <cstdint>
#include <vector>
__attribute__((noinline)) void sink(const void* p) { asm volatile("" : : "r"(p) : "memory"); }
__attribute__((noinline)) int last_element() {  // not in main(), which GCC optimises less
  const std::vector<std::int64_t> last_zero{1, 1, 1, 0};
  const std::vector<std::int64_t> all_ones{1, 1, 1, 1};
  sink(&last_zero);
  sink(&all_ones);
  return static_cast<int>(last_zero[3]);
}
int main() { return last_element() == 0 ? 0 : 1; }
]])
  set(_ddp_probe_flags "-O3")
  if(DDP_NATIVE)
    string(APPEND _ddp_probe_flags " -march=native")
  endif()
  set(CMAKE_REQUIRED_QUIET ON)
  set(CMAKE_REQUIRED_FLAGS "${_ddp_probe_flags}")
  # One cached answer per -march choice: toggling DDP_NATIVE re-runs the probe.
  check_cxx_source_runs("${_ddp_probe}" DDP_SLP_OK_NATIVE_${DDP_NATIVE})
  if(NOT DDP_SLP_OK_NATIVE_${DDP_NATIVE})
    set(CMAKE_REQUIRED_FLAGS "${_ddp_probe_flags} -fno-tree-slp-vectorize")
    check_cxx_source_runs("${_ddp_probe}" DDP_SLP_FIX_OK_NATIVE_${DDP_NATIVE})
    if(NOT DDP_SLP_FIX_OK_NATIVE_${DDP_NATIVE})
      message(FATAL_ERROR "g++ ${CMAKE_CXX_COMPILER_VERSION} with '${_ddp_probe_flags}' "
                          "miscompiles a constant array, even with -fno-tree-slp-vectorize.\n"
                          "hint: configure with -DDDP_NATIVE=OFF, or use GCC 13 or newer")
    endif()
    set(DDP_AVOID_SLP ON)
    add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fno-tree-slp-vectorize>
                        $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-fno-tree-slp-vectorize>)
    message(STATUS "g++ ${CMAKE_CXX_COMPILER_VERSION} with '${_ddp_probe_flags}' miscompiles "
                   "small constant arrays (Note [GCC 12 SLP miscompile] in "
                   "cmake/DdpWarnings.cmake): compiling with -fno-tree-slp-vectorize")
  endif()
  unset(CMAKE_REQUIRED_FLAGS)
  unset(CMAKE_REQUIRED_QUIET)
endif()
