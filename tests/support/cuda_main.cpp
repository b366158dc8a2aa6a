// main() of every test that needs a GPU (ddp_add_test(... CUDA), cmake/DdpTesting.cmake).
// Chapter 02. Without a usable GPU it prints why and exits with 77, which ctest reports
// as "Skipped" (SKIP_RETURN_CODE): a GPU test that could not run must never look passed.
// Listing the tests (catch_discover_tests runs `--list-test-names-only` at build time,
// usually on a machine without a GPU) works everywhere.
#include <string_view>

#include "tests/support/catch_session.hpp"  // Catch2, compiled once
#include "tensor/cuda/device_info.hpp"
#include "tests/support/no_gpu.hpp"

namespace {

bool asks_for_a_list(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]).starts_with("--list")) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (!asks_for_a_list(argc, argv) && ddp::cuda::device_count() == 0) {
    return ddp::test::skip_without_gpu();
  }
  return ddp::test::run_catch_session(argc, argv);
}
