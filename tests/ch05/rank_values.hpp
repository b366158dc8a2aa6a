// Test helper for chapter 05: what rank r holds at index i in the tcp group's reduction
// tests (test_tcp_small.cpp, test_tcp_shm.cpp), and the naive reduction over ranks that
// they compare with: values whose float sum depends on the order of the additions.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "dist/process_group.hpp"  // ReduceOp

namespace ddp::test {

// Rank r's element i: a hash of (r, i), spread over magnitudes (floats from 1e-3 to 1e5,
// both signs, so that float addition in another order rounds differently; int64 up to
// 2^50, both signs, so Avg must truncate toward zero).
inline std::uint64_t mix(int r, std::int64_t i) {
  std::uint64_t x = static_cast<std::uint64_t>(i) * 0x9E3779B97F4A7C15ULL +
                    static_cast<std::uint64_t>(r + 1) * 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBULL;
  return x ^ (x >> 29);
}
template <typename T>
T value(int r, std::int64_t i) {
  const std::uint64_t h = mix(r, i);
  if constexpr (std::is_same_v<T, float>) {
    const float sign = (h & 1) ? -1.0f : 1.0f;
    const float mantissa = static_cast<float>((h >> 8) % 100000) / 1000.0f;  // [0, 100)
    constexpr float kScale[5] = {0.01f, 0.1f, 1.0f, 10.0f, 100.0f};
    return sign * mantissa * kScale[(h >> 40) % 5];
  } else {
    return static_cast<std::int64_t>(h >> 14) - (std::int64_t{1} << 49);
  }
}

// The naive reduction over ranks 0..w-1, in double for floats.
template <typename T>
double reference(ReduceOp op, int w, std::int64_t i) {
  if constexpr (std::is_same_v<T, float>) {
    double acc = value<T>(0, i);
    for (int r = 1; r < w; ++r) {
      const double v = value<T>(r, i);
      acc = op == ReduceOp::Max   ? std::max(acc, v)
            : op == ReduceOp::Min ? std::min(acc, v)
                                  : acc + v;
    }
    return op == ReduceOp::Avg ? acc / w : acc;
  } else {
    return 0;  // int64: see reference_int
  }
}
inline std::int64_t reference_int(ReduceOp op, int w, std::int64_t i) {
  std::int64_t acc = value<std::int64_t>(0, i);
  for (int r = 1; r < w; ++r) {
    const std::int64_t v = value<std::int64_t>(r, i);
    acc = op == ReduceOp::Max ? std::max(acc, v) : op == ReduceOp::Min ? std::min(acc, v) : acc + v;
  }
  return op == ReduceOp::Avg ? acc / w : acc;  // C++ division truncates toward zero
}

// Whether a float32 reduction `got` of element i is the naive one: exact for Max and Min
// (one of the inputs), and for Sum and Avg within w roundings of the sum of magnitudes.
inline bool float_ok(float got, ReduceOp op, int w, std::int64_t i) {
  const double want = reference<float>(op, w, i);
  if (op == ReduceOp::Max || op == ReduceOp::Min) return static_cast<double>(got) == want;
  double magnitude = 0;
  for (int r = 0; r < w; ++r) magnitude += std::abs(value<float>(r, i));
  if (op == ReduceOp::Avg) magnitude /= w;
  return std::abs(got - want) <= w * 1.2e-7 * magnitude;
}

}  // namespace ddp::test
