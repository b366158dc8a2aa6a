// ch00_setup: prints how this build of ddp.cpp was configured, one line per fact, so
// that "it works on my machine" becomes a table two people can compare. Chapter 00.
//
// Every line is read from the program itself (compiler macros, library headers and
// the libraries at run time), not from CMake's cache: it shows what was really built
// and linked. It starts no MPI job and touches no GPU memory.
#include <mpi.h>
#include <zlib.h>

#include <Eigen/Core>
#include <cstdio>
#include <exception>
#include <string>

#include "tensor/cuda/device_info.hpp"
#include "base/error.hpp"
#include "tensor/threads.hpp"

namespace {

// ---- Facts, each as one string ------------------------------------------------------

std::string compiler() {
#if defined(__clang__)
  return "clang " __clang_version__;
#elif defined(__GNUC__)
  return "g++ " __VERSION__;
#else
  return "unknown compiler";
#endif
}

// __cplusplus is 202002L for C++20.
std::string cxx_standard() {
  const long year = __cplusplus / 100;
  return "C++" + std::to_string(year % 100) + " (__cplusplus " + std::to_string(__cplusplus) + ")";
}

std::string assertions() {
#ifdef NDEBUG
  return "off (NDEBUG; the tests turn them back on)";
#else
  return "on";
#endif
}

std::string sanitizers() {
#if defined(__SANITIZE_ADDRESS__)
  return "AddressSanitizer + UBSan (the asan preset)";
#elif defined(__SANITIZE_THREAD__)
  return "ThreadSanitizer (the tsan preset)";
#else
  return "none";
#endif
}

std::string cuda() {
  if (!ddp::cuda::is_built()) {
    return "not built (no nvcc at configure time, or -DDDP_CUDA=OFF)";
  }
  const int count = ddp::cuda::device_count();
  std::string text = "built; " + std::to_string(count) + " GPU(s) usable";
  for (int i = 0; i < count; ++i) {
    text += "\n" + std::string(18, ' ') + "cuda:" + std::to_string(i) + "  " +
            ddp::cuda::device_name(i);
  }
  if (count == 0) text += " (GPU tests will report Skipped)";
  return text;
}

std::string eigen() {
  return std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
         std::to_string(EIGEN_MINOR_VERSION) + ", SIMD: " + Eigen::SimdInstructionSetsInUse();
}

// The header the program was compiled against, and the library it runs with.
std::string zlib() { return std::string(zlibVersion()) + " (compiled against " ZLIB_VERSION ")"; }

// MPI_Get_library_version is one of the few MPI calls allowed before MPI_Init, so the
// program needs neither mpirun nor an MPI job to answer.
std::string mpi() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  const int status = MPI_Get_library_version(version, &length);
  DDP_CHECK(status == MPI_SUCCESS, "MPI_Get_library_version failed with code ", status);
  std::string text(version, static_cast<std::size_t>(length));
  text = text.substr(0, text.find_first_of(",\n"));  // "Open MPI v4.1.4, package: ..."
  return text + " (MPI standard " + std::to_string(MPI_VERSION) + "." +
         std::to_string(MPI_SUBVERSION) + ")";
}

void row(const char* name, const std::string& value) {
  std::printf("  %-15s %s\n", name, value.c_str());
}

}  // namespace

int main() {
  try {
    std::printf("ddp.cpp %s (build type %s)\n", DDP_VERSION, DDP_BUILD_TYPE);
    row("compiler", compiler());
    row("standard", cxx_standard());
    row("assertions", assertions());
    row("sanitizers", sanitizers());
    row("CPU threads",
        std::to_string(ddp::get_num_threads()) + " (OpenMP; set OMP_NUM_THREADS to change)");
    row("CUDA", cuda());
    row("Eigen", eigen());
    row("zlib", zlib());
    row("MPI", mpi());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ch00_setup: error: %s\n", e.what());
    return 1;
  }
}
