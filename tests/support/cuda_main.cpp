// main() of every test that needs a GPU (ddp_add_test(... CUDA), cmake/DdpTesting.cmake).
// Chapter 02. Without a usable GPU it prints why and exits with 77, which ctest reports
// as "Skipped" (SKIP_RETURN_CODE): a GPU test that could not run must never look passed.
// Listing the tests (catch_discover_tests runs `--list-test-names-only` at build time,
// usually on a machine without a GPU) works everywhere.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>
#include <string_view>

#include "tensor/cuda/device_info.hpp"

#if defined(DDP_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace {

constexpr int kSkipped = 77;  // DDP_SKIP_RETURN_CODE in cmake/DdpTesting.cmake

bool asks_for_a_list(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]).starts_with("--list")) return true;
  }
  return false;
}

// Why no GPU can be used, in the words of the CUDA runtime when there is one.
std::string no_gpu_reason() {
  if (!ddp::cuda::is_built()) return "ddp.cpp was built without CUDA";
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

}  // namespace

int main(int argc, char** argv) {
  if (!asks_for_a_list(argc, argv) && ddp::cuda::device_count() == 0) {
    std::printf("SKIPPED: no usable CUDA GPU (%s)\n", no_gpu_reason().c_str());
    std::fflush(stdout);
    return kSkipped;
  }
  return Catch::Session().run(argc, argv);
}
