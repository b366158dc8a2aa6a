// What the chapter 02 GPU tests share: the comparison of a GPU result with its CPU twin,
// and a way to build the same non-contiguous view on both devices. Every GPU test
// computes an op twice, on cuda:0 and on the CPU (chapter 01's tested backend), from
// the same input values, and compares element by element.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "tensor/tensor.hpp"

namespace ddp::test {

inline constexpr Device kGpu = Device::cuda(0);

// Tolerances of the chapter: elementwise ops and reductions agree to 1e-5, matmul to
// 1e-4 (cuBLAS sums in another order than Eigen), random numbers to 1e-6.
inline constexpr double kElementwiseTol = 1e-5;
inline constexpr double kMatmulTol = 1e-4;
inline constexpr double kRandomTol = 1e-6;

// Every element as a double (exact for float32, and for int64 below 2^53).
inline std::vector<double> values_of(const Tensor& t) {
  std::vector<double> out;
  if (t.dtype() == DType::Float32) {
    for (float v : t.to_vector<float>()) out.push_back(v);
  } else {
    for (std::int64_t v : t.to_vector<std::int64_t>()) out.push_back(static_cast<double>(v));
  }
  return out;
}

// "" when `got` and `want` have the same shape and dtype and every element satisfies
// |got - want| <= tol * max(1, |want|) (relative error, absolute near zero; NaN matches
// NaN, infinities must be equal). Otherwise a message with the first mismatch and the
// number of mismatches. Use as CHECK(mismatch(...) == "") so that the message prints.
inline std::string mismatch(const Tensor& got, const Tensor& want, double tol) {
  std::ostringstream os;
  if (got.shape() != want.shape() || got.dtype() != want.dtype()) {
    os << "got " << got.describe() << ", want " << want.describe();
    return os.str();
  }
  const std::vector<double> g = values_of(got), w = values_of(want);
  std::int64_t bad = 0, first = -1;
  double worst = 0.0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    bool ok;
    if (std::isnan(w[i]) || std::isnan(g[i])) {
      ok = std::isnan(w[i]) && std::isnan(g[i]);
    } else if (std::isinf(w[i]) || std::isinf(g[i])) {
      ok = g[i] == w[i];
    } else {
      const double err = std::abs(g[i] - w[i]) / std::max(1.0, std::abs(w[i]));
      worst = std::max(worst, err);
      ok = err <= tol;
    }
    if (!ok) {
      if (first < 0) first = static_cast<std::int64_t>(i);
      ++bad;
    }
  }
  if (bad == 0) return "";
  os.precision(9);
  os << bad << " of " << g.size() << " elements differ (tolerance " << tol
     << ", worst relative error " << worst << "); first at row-major index " << first << ": got "
     << g[first] << ", want " << w[first] << " (" << got.describe() << ")";
  return os.str();
}

// The largest |got - want| / max(1, |want|) over finite elements (what a demo prints).
inline double max_relative_error(const Tensor& got, const Tensor& want) {
  const std::vector<double> g = values_of(got), w = values_of(want);
  double worst = 0.0;
  for (std::size_t i = 0; i < g.size() && i < w.size(); ++i) {
    if (std::isfinite(g[i]) && std::isfinite(w[i])) {
      worst = std::max(worst, std::abs(g[i] - w[i]) / std::max(1.0, std::abs(w[i])));
    }
  }
  return worst;
}

// A view to take of an input on both devices: applied to the CPU tensor and to its
// copy on the GPU, it yields the same elements with the same strides on each.
struct Layout {
  const char* name;
  std::function<Tensor(const Tensor&)> make;
};

}  // namespace ddp::test
