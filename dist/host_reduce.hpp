// A ReduceOp applied on host memory, element by element: what ProcessGroupTcp does with the
// numbers it receives, in its ring (pipelined_ring.cpp) and in its small all-reduce
// (process_group_tcp.cpp). Chapter 05. Plain loops: the mpi and nccl groups leave this to
// their libraries.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "dist/process_group.hpp"  // ReduceOp

namespace ddp::detail {

// dst[i] = dst[i] (op) src[i]. Avg sums here and divides once at the end.
template <typename T>
void combine(T* dst, const T* src, std::size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      for (std::size_t i = 0; i < n; ++i) dst[i] += src[i];
      break;
    case ReduceOp::Max:
      for (std::size_t i = 0; i < n; ++i) dst[i] = std::max(dst[i], src[i]);
      break;
    case ReduceOp::Min:
      for (std::size_t i = 0; i < n; ++i) dst[i] = std::min(dst[i], src[i]);
      break;
  }
}

// Integer division truncates toward zero, as the interface promises for int64.
template <typename T>
void divide(T* data, std::int64_t n, int size) {
  for (std::int64_t i = 0; i < n; ++i) data[i] /= static_cast<T>(size);
}

}  // namespace ddp::detail
