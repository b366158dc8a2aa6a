// What every benchmark in bench/ measures with: a wall clock, and min / median over
// repetitions (the anchors report the same pair, see bench/anchors/RESULTS.md).
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace ddp::bench {

inline double now_seconds() {
  using Clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

struct Timing {
  double min_s = 0.0;
  double median_s = 0.0;
};

// times: one entry per timed repetition, at least one.
inline Timing summarize(std::vector<double> times) {
  std::sort(times.begin(), times.end());
  const std::size_t n = times.size();
  const double median = n % 2 == 1 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
  return {times.front(), median};
}

// GFLOP/s of an n x n x n matrix product that took `seconds`: 2 n^3 / t
// (n^3 multiply-adds, two floating-point operations each).
inline double gemm_gflops(int n, double seconds) {
  const double nd = n;
  return 2.0 * nd * nd * nd / seconds / 1e9;
}

}  // namespace ddp::bench
