// Reductions on a GPU: sum, max, min, argmax along one dimension. Chapter 02. The CPU
// twin is tensor/cpu/reduce.cpp, and the results agree with it: float32 sums accumulate
// in double on both, and max/min/argmax follow the same rules (the first maximum wins a
// tie; a NaN wins over any number, as in PyTorch).
//
// x is contiguous and read as (outer, n, inner); out[o, i] reduces x[o, 0..n-1, i].
// One block computes one output (Note [Block reduction]). Not here: splitting a long
// reduction over several blocks, or warp shuffles; a full sum of 10^8 elements runs on
// one block and is slow, but it is correct and the structure is the one to learn.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "tensor/cuda/kernels.hpp"
#include "tensor/cuda/runtime.hpp"
#include "base/error.hpp"
#include "tensor/tensor.hpp"

namespace ddp::cuda {
namespace {

constexpr int kReduceThreads = 256;  // a power of two, for the halving below
constexpr std::int64_t kMaxReduceBlocks = 65535;

// ---- The combining rules ---------------------------------------------------------------

template <typename T>
__device__ bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return v != v;
  } else {
    return false;
  }
}

// Sum: float32 accumulates in double, int64 in int64 (exact), like the CPU.
template <typename T>
struct SumRule {
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, std::int64_t>;
  __device__ Acc identity() const { return Acc{0}; }
  __device__ Acc load(T v, std::int64_t) const { return static_cast<Acc>(v); }
  __device__ Acc combine(Acc a, Acc b) const { return a + b; }
  __device__ T finish(Acc acc) const { return static_cast<T>(acc); }
};

// Max, Min and ArgMax carry (value, index). `index < 0` marks "no element yet": a thread
// whose stripe of the reduced dimension is empty (n < kReduceThreads) holds that.
template <typename T>
struct Candidate {
  T value;
  std::int64_t index;
};

template <typename T>
struct ExtremumRule {
  bool want_max;
  using Acc = Candidate<T>;
  __device__ Acc identity() const { return Acc{T{}, -1}; }
  __device__ Acc load(T v, std::int64_t j) const { return Acc{v, j}; }
  // Which of two candidates the CPU's left-to-right loop would keep: a NaN beats any
  // number, a strictly better value beats a worse one, and otherwise (ties, two NaNs)
  // the smaller index wins. The order of combining then does not matter.
  __device__ Acc combine(Acc a, Acc b) const {
    if (a.index < 0) return b;
    if (b.index < 0) return a;
    const bool a_nan = is_nan(a.value), b_nan = is_nan(b.value);
    if (a_nan != b_nan) return a_nan ? a : b;
    if (!a_nan) {
      if (want_max ? b.value > a.value : b.value < a.value) return b;
      if (want_max ? a.value > b.value : a.value < b.value) return a;
    }
    return b.index < a.index ? b : a;
  }
  __device__ T finish(Acc acc) const { return acc.value; }  // max or min
};

// ArgMax: the same search as max, reporting where instead of what.
template <typename T>
struct ArgMaxRule : ExtremumRule<T> {
  __device__ std::int64_t finish(Candidate<T> acc) const { return acc.index; }
};

// ---- The kernel ------------------------------------------------------------------------

// Note [Block reduction]
// Block `o` (and o + gridDim.x, ... when there are more outputs than blocks) reduces
// the n values of output o in two steps:
//   1. each of the 256 threads walks its own stripe j = t, t+256, t+512, ... < n and
//      keeps a private partial result (a grid-stride loop inside one column);
//   2. the 256 partials go to shared memory and are combined in a tree: at every step
//      the lower half of the active threads adds in the upper half,
//
//        step  active threads   shared[t] = combine(shared[t], shared[t + s])
//        s=128  t < 128
//        s=64   t < 64
//        ...
//        s=1    t < 1           -> shared[0] is the result
//
//      with __syncthreads() between steps, so that no thread reads a partner's slot
//      before the partner has written it. log2(256) = 8 steps instead of 255 additions
//      in a row. The CPU twin is the same loop run by one thread, in order.
template <typename T, typename Out, typename Rule>
__global__ void reduce_kernel(const T* x, Out* out, std::int64_t outputs, std::int64_t n,
                              std::int64_t inner, Rule rule) {
  using Acc = typename Rule::Acc;
  __shared__ Acc partial[kReduceThreads];
  const int t = static_cast<int>(threadIdx.x);
  for (std::int64_t k = blockIdx.x; k < outputs; k += gridDim.x) {
    const std::int64_t o = k / inner, i = k % inner;
    const T* column = x + o * n * inner + i;  // x[o, j, i] = column[j * inner]

    Acc acc = rule.identity();
    for (std::int64_t j = t; j < n; j += kReduceThreads) {
      acc = rule.combine(acc, rule.load(column[j * inner], j));
    }
    partial[t] = acc;
    __syncthreads();
    for (int s = kReduceThreads / 2; s > 0; s /= 2) {
      if (t < s) partial[t] = rule.combine(partial[t], partial[t + s]);
      __syncthreads();
    }
    if (t == 0) out[k] = rule.finish(partial[0]);
    __syncthreads();  // partial[] is reused by this block's next output
  }
}

}  // namespace

// ---- Entry point (kernels.hpp) ---------------------------------------------------------

void reduce(cudaStream_t stream, Reduction op, const Tensor& x, std::int64_t outer, std::int64_t n,
            std::int64_t inner, const Tensor& out) {
  DDP_CHECK(x.is_contiguous() && out.is_contiguous(),
            "reduce on the GPU expects contiguous tensors, got ", x.describe(), " and ",
            out.describe());
  const std::int64_t outputs = outer * inner;
  if (outputs == 0) return;
  DDP_CHECK(n >= 1, op_name(op), " over an empty dimension reached the GPU backend");
  const auto blocks = static_cast<unsigned int>(std::min(outputs, kMaxReduceBlocks));
  auto launch = [&](auto zero) {
    using T = decltype(zero);
    const T* px = static_cast<const T*>(x.raw_data());
    switch (op) {
      case Reduction::Sum:
        reduce_kernel<<<blocks, kReduceThreads, 0, stream>>>(px, static_cast<T*>(out.raw_data()),
                                                             outputs, n, inner, SumRule<T>{});
        break;
      case Reduction::Max:
      case Reduction::Min:
        reduce_kernel<<<blocks, kReduceThreads, 0, stream>>>(px, static_cast<T*>(out.raw_data()),
                                                             outputs, n, inner,
                                                             ExtremumRule<T>{op == Reduction::Max});
        break;
      case Reduction::ArgMax:
        reduce_kernel<<<blocks, kReduceThreads, 0, stream>>>(
            px, static_cast<std::int64_t*>(out.raw_data()), outputs, n, inner,
            ArgMaxRule<T>{{true}});
        break;
    }
    DDP_CHECK_CUDA(cudaGetLastError());
  };
  if (x.dtype() == DType::Float32) {
    launch(float{});
  } else {
    launch(std::int64_t{});
  }
}

}  // namespace ddp::cuda
