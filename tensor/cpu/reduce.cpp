// Reductions on the CPU: sum, max, min, argmax along one dimension. Chapter 01.
// The CUDA twin is tensor/cuda/reduce.cu.
//
// The input arrives contiguous and is read as (outer, n, inner): for every (o, i) the n
// values x[o, 0..n-1, i] are reduced into out[o, i]. Sums of float32 accumulate in
// double so that the result does not depend on how long the reduced dimension is (a
// float accumulator loses digits once the running sum dwarfs each new value).
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "tensor/cpu/kernels.hpp"
#include "tensor/cpu/strided_loop.hpp"

namespace ddp::cpu {

namespace {

template <typename T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(v);
  } else {
    return false;
  }
}

template <typename T>
void reduce_loop(Reduction op, const T* x, std::int64_t outer, std::int64_t n, std::int64_t inner,
                 const Tensor& out) {
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, std::int64_t>;
  const std::int64_t outputs = outer * inner;
  T* values = op == Reduction::ArgMax ? nullptr : out.data<T>();
  std::int64_t* indices = op == Reduction::ArgMax ? out.data<std::int64_t>() : nullptr;
#pragma omp parallel for schedule(static) if (outputs * n >= kParallelGrain && outputs > 1)
  for (std::int64_t k = 0; k < outputs; ++k) {
    const std::int64_t o = k / inner, i = k % inner;
    const T* column = x + o * n * inner + i;  // x[o, j, i] = column[j * inner]
    switch (op) {
      case Reduction::Sum: {
        Acc acc = 0;
        for (std::int64_t j = 0; j < n; ++j) acc += column[j * inner];
        values[k] = static_cast<T>(acc);
        break;
      }
      case Reduction::Max:
      case Reduction::Min:
      case Reduction::ArgMax: {
        // NaN wins, as in PyTorch: a NaN anywhere makes the max NaN (and its index).
        const bool want_max = op != Reduction::Min;
        T best = column[0];
        std::int64_t best_j = 0;
        for (std::int64_t j = 1; j < n && !is_nan(best); ++j) {
          const T v = column[j * inner];
          if (is_nan(v) || (want_max ? v > best : v < best)) {
            best = v;
            best_j = j;
          }
        }
        if (op == Reduction::ArgMax) {
          indices[k] = best_j;
        } else {
          values[k] = best;
        }
        break;
      }
    }
  }
}

}  // namespace

void reduce(Reduction op, const Tensor& x, std::int64_t outer, std::int64_t n, std::int64_t inner,
            const Tensor& out) {
  if (x.dtype() == DType::Float32) {
    reduce_loop(op, x.data<float>(), outer, n, inner, out);
  } else {
    reduce_loop(op, x.data<std::int64_t>(), outer, n, inner, out);
  }
}

}  // namespace ddp::cpu
