// Chapter 02: which GPUs a build's code runs on (tensor/cuda/architectures.hpp, Note
// [Which GPUs a build runs on]), without a GPU: the rule against the cards a participant
// meets, and the error that names CMAKE_CUDA_ARCHITECTURES.
#include <catch2/catch.hpp>

#include "tensor/cuda/architectures.hpp"

using ddp::cuda::build_runs_on;

TEST_CASE("The default architectures run on A100, A10, L4, H100 and newer, not on a T4",
          "[ch02][arch]") {
  const char* d = "80-real;90";  // cmake/DdpDependencies.cmake's default
  CHECK(build_runs_on(d, 8, 0));   // A100: sm_80 machine code
  CHECK(build_runs_on(d, 8, 6));   // A10: sm_80 code runs on 8.6
  CHECK(build_runs_on(d, 8, 9));   // L4, L40S
  CHECK(build_runs_on(d, 9, 0));   // H100, H200
  CHECK(build_runs_on(d, 10, 0));  // B200: the PTX of 9.0, compiled by the driver
  CHECK_FALSE(build_runs_on(d, 7, 5));  // T4
  CHECK_FALSE(build_runs_on(d, 7, 0));  // V100
}

TEST_CASE("Machine code runs within its major version, PTX on everything at or above it",
          "[ch02][arch]") {
  CHECK(build_runs_on("86-real", 8, 9));
  CHECK_FALSE(build_runs_on("86-real", 8, 0));   // not backwards
  CHECK_FALSE(build_runs_on("86-real", 9, 0));   // no PTX: not forwards across a major
  CHECK(build_runs_on("75-virtual", 9, 0));      // PTX only
  CHECK_FALSE(build_runs_on("90-virtual", 8, 9));
  CHECK(build_runs_on("75", 7, 5));
  CHECK_FALSE(build_runs_on("native", 7, 5));  // resolved at configure, never passed on
  CHECK(build_runs_on("all-major", 6, 1));
  CHECK_FALSE(build_runs_on("", 8, 0));
  CHECK_FALSE(build_runs_on("foo;90-real", 8, 0));  // a word that is not a number: skipped
  CHECK(build_runs_on("75-real,80-real", 8, 6));     // commas, as the build passes them
}

TEST_CASE("The error names the GPU, its capability and the fix", "[ch02][arch]") {
  const std::string m = ddp::cuda::no_code_for_gpu("80-real;90", 0, "Tesla T4", 7, 5);
  CHECK_THAT(m, Catch::Contains("cuda:0 (Tesla T4) has compute capability 7.5"));
  CHECK_THAT(m, Catch::Contains("CMAKE_CUDA_ARCHITECTURES=80-real;90"));
  CHECK_THAT(m, Catch::Contains("-DCMAKE_CUDA_ARCHITECTURES=75"));
}
