// The skip protocol of every test that needs a GPU: without a usable one, say why and
// exit with kSkipped, which ctest reports as "Skipped" (SKIP_RETURN_CODE, see
// cmake/DdpTesting.cmake), never as "Passed". Chapter 02. Used by cuda_main.cpp (the
// main() of the Catch2 GPU tests) and by GPU programs run under mpirun.
#pragma once

#include <cstdio>
#include <string>

#include "tensor/cuda/device_info.hpp"

#if defined(DDP_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace ddp::test {

inline constexpr int kSkipped = 77;  // DDP_SKIP_RETURN_CODE in cmake/DdpTesting.cmake

// Why no GPU can be used, in the words of the CUDA runtime when there is one.
inline std::string no_gpu_reason() {
  if (!cuda::is_built()) return "ddp.cpp was built without CUDA";
#if defined(DDP_HAVE_CUDA)
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    return std::string("cudaGetDeviceCount: ") + cudaGetErrorName(status) + ", " +
           cudaGetErrorString(status);
  }
#endif
  return "the CUDA runtime reports 0 devices (check CUDA_VISIBLE_DEVICES)";
}

// Prints "SKIPPED: no usable CUDA GPU (why)" and returns kSkipped, for main() to return.
inline int skip_without_gpu() {
  std::printf("SKIPPED: no usable CUDA GPU (%s)\n", no_gpu_reason().c_str());
  std::fflush(stdout);
  return kSkipped;
}

}  // namespace ddp::test
