// The tests' own bfloat16 rounding, written from the definition rather than from the bit
// trick in dist/parallel/comm_hooks.cpp: of the two bf16 values around x (its top 16 bits
// cut, and the next one away from zero), take the nearer in exact double arithmetic; on a
// tie, the one whose last bit is 0. Slow and obvious, as a reference should be.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace ddp::test {

// bf16 bits -> the value they stand for, with the pattern just past the largest finite
// one (0x7f80, Inf) read as 2^128, the value an unbounded exponent would give: IEEE
// rounds to Inf exactly when that value is the nearer (or the even, on a tie).
inline double bf16_value_unbounded(std::uint16_t bits) {
  if ((bits & 0x7fffu) == 0x7f80u) return (bits & 0x8000u ? -1.0 : 1.0) * std::ldexp(1.0, 128);
  return static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16));
}

inline std::uint16_t reference_bf16(float x) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  if (std::isnan(x)) return 0x7fc0u;  // some NaN: the tests only ask "is it a NaN"
  if (std::isinf(x)) return static_cast<std::uint16_t>(bits >> 16);
  const auto toward_zero = static_cast<std::uint16_t>(bits >> 16);
  if ((bits & 0xffffu) == 0) return toward_zero;  // exact
  const auto away = static_cast<std::uint16_t>(toward_zero + 1);  // same sign, one ulp out
  const double below = std::fabs(static_cast<double>(x) - bf16_value_unbounded(toward_zero));
  const double above = std::fabs(static_cast<double>(x) - bf16_value_unbounded(away));
  if (below != above) return below < above ? toward_zero : away;
  return (toward_zero & 1u) == 0 ? toward_zero : away;
}

inline float reference_bf16_value(float x) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(reference_bf16(x)) << 16);
}

}  // namespace ddp::test
