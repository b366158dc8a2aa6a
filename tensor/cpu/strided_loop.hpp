// for_each_row(): the loop that walks N tensors of one shape, each with its own
// strides, on the CPU. Chapter 01. Every non-contiguous elementwise kernel uses it.
//
// The shape is cut into rows along the last dimension. For each row the start offset
// of every operand is computed once (dividing the row number into the other
// dimensions' indices); the row itself is a tight loop with a fixed stride per operand,
// which the compiler vectorises when the strides are 1. Rows are shared out among the
// OpenMP threads when there is enough work.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "tensor/shape.hpp"

namespace ddp::cpu {

// Below this many elements a loop runs on one thread: starting threads costs more.
inline constexpr std::int64_t kParallelGrain = 1 << 15;

template <std::size_t N>
using Offsets = std::array<std::int64_t, N>;

// Calls row_fn(start, count, step) for every row, where start[k] is the offset of the
// row's first element in operand k, step[k] that operand's stride along the row, and
// count the row's length. `strides[k]` are operand k's strides (same length as shape).
template <std::size_t N, typename RowFn>
void for_each_row(const Shape& shape, const std::array<const Shape*, N>& strides, RowFn&& row_fn) {
  const std::int64_t ndim = static_cast<std::int64_t>(shape.size());
  if (ndim == 0) {  // a 0-d tensor: one row of one element
    row_fn(Offsets<N>{}, std::int64_t{1}, Offsets<N>{});
    return;
  }
  const std::int64_t count = shape[ndim - 1];
  const std::int64_t total = numel(shape);
  if (total == 0) return;
  const std::int64_t rows = total / count;
  Offsets<N> step;
  for (std::size_t k = 0; k < N; ++k) step[k] = (*strides[k])[ndim - 1];

#pragma omp parallel for schedule(static) if (total >= kParallelGrain && rows > 1)
  for (std::int64_t row = 0; row < rows; ++row) {
    Offsets<N> start{};
    std::int64_t rest = row;
    for (std::int64_t d = ndim - 2; d >= 0; --d) {  // row number -> index per dimension
      const std::int64_t index = rest % shape[d];
      rest /= shape[d];
      for (std::size_t k = 0; k < N; ++k) start[k] += index * (*strides[k])[d];
    }
    row_fn(start, count, step);
  }
}

}  // namespace ddp::cpu
