// How much further than the release build a test may go in this build: sanitizer builds
// run slower and keep more memory resident (ASan's shadow and its quarantine of freed
// blocks), so tests that bound their own time or memory multiply the bound by
// time_scale() or memory_scale(). The factors are set in one place, cmake/DdpTesting.cmake
// (Note [Tests under sanitizers]), and arrive as $DDP_TEST_TIME_SCALE and
// $DDP_TEST_MEMORY_SCALE; without them (a release build, or a test binary run by hand)
// they are 1. Header-only.
#pragma once

#include <cstdlib>
#include <string>

namespace ddp::test {

// The same for the time bounds a test sets itself (an alarm, a deadline), where ctest's
// TIMEOUT does not reach: $DDP_TEST_TIME_SCALE, the factor ctest's TIMEOUTs get.
inline unsigned time_scale() {
  const char* text = std::getenv("DDP_TEST_TIME_SCALE");
  if (text == nullptr || *text == '\0') return 1;
  const long scale = std::strtol(text, nullptr, 10);
  return scale >= 1 ? static_cast<unsigned>(scale) : 1;  // never tighter than release
}

inline double memory_scale() {
  const char* text = std::getenv("DDP_TEST_MEMORY_SCALE");
  if (text == nullptr || *text == '\0') return 1.0;
  const double scale = std::strtod(text, nullptr);
  return scale >= 1.0 ? scale : 1.0;  // never tighter than the release build's bound
}

}  // namespace ddp::test
