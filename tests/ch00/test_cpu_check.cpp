// Chapter 00: the CPU check (base/cpu_check.hpp) that stops a -march=native build on a CPU
// without the instructions it uses, before "Illegal instruction" does. The decision on
// made-up CPUs; the message names what is missing and the fix.
#include <catch2/catch.hpp>

#include <string_view>

#include "base/cpu_check.hpp"

namespace {

bool old_cpu(std::string_view name) {  // an AVX2 machine of the Haswell generation
  return name == "sse4.2" || name == "popcnt" || name == "avx" || name == "avx2" ||
         name == "fma" || name == "bmi" || name == "bmi2";
}
bool any_cpu(std::string_view) { return true; }

}  // namespace

TEST_CASE("cpu check: the build's instruction sets this CPU lacks, in the build's order",
          "[ch00][cpu]") {
  using ddp::cpu::missing_features;
  CHECK(missing_features("avx2 fma avx512f avx512bw avx512vl", old_cpu) ==
        "avx512f avx512bw avx512vl");
  CHECK(missing_features("avx2 fma", old_cpu).empty());
  CHECK(missing_features("", old_cpu).empty());  // not a native build: nothing to check
  CHECK(missing_features("avx512f", any_cpu).empty());
  CHECK(missing_features(" avx512f  avx2 ", old_cpu) == "avx512f");  // stray spaces
}

TEST_CASE("cpu check: the message names the missing sets and -DDDP_NATIVE=OFF", "[ch00][cpu]") {
  const std::string m = ddp::cpu::missing_message("avx512f avx512bw");
  CHECK_THAT(m, Catch::Contains("this CPU lacks avx512f avx512bw"));
  CHECK_THAT(m, Catch::Contains("-march=native"));
  CHECK_THAT(m, Catch::Contains("-DDDP_NATIVE=OFF"));
}

TEST_CASE("cpu check: every set this build was compiled for is one this CPU has",
          "[ch00][cpu]") {
  // The test runs where it was built: nothing may be missing. A native build on x86-64
  // must have found what -march=native means, or its check would pass anything.
#if DDP_NATIVE_BUILD && defined(__x86_64__)
  CHECK_THAT(std::string(ddp::cpu::build_isa()), Catch::Contains("sse4.2"));
#endif
  CHECK(ddp::cpu::missing_features(ddp::cpu::build_isa(), ddp::cpu::cpu_supports).empty());
}
