// How much further than the release build a test may go in this build: sanitizer builds
// keep more memory resident (ASan's shadow and its quarantine of freed blocks), so the
// tests that bound their own memory multiply the bound by memory_scale(). The factor is
// set in one place, cmake/DdpTesting.cmake (Note [Tests under sanitizers]), and arrives
// as $DDP_TEST_MEMORY_SCALE; without it (a release build, or a test binary run by hand)
// it is 1. Header-only.
#pragma once

#include <cstdlib>
#include <string>

namespace ddp::test {

inline double memory_scale() {
  const char* text = std::getenv("DDP_TEST_MEMORY_SCALE");
  if (text == nullptr || *text == '\0') return 1.0;
  const double scale = std::strtod(text, nullptr);
  return scale >= 1.0 ? scale : 1.0;  // never tighter than the release build's bound
}

}  // namespace ddp::test
