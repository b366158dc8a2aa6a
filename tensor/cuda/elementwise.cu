// Elementwise kernels on a GPU: fill, arange, copy (with float32 <-> int64 conversion),
// unary, binary, binary with a scalar. Chapter 02. The CPU twins are in
// tensor/cpu/elementwise.cpp; the math of every op is op_math.hpp, shared by both.
//
// Every kernel is one of three shapes: out[i] = f() (map0), out[i] = f(x[i]) (map1),
// out[i] = f(a[i], b[i]) (map2), each with a contiguous fast path (a flat grid-stride
// loop) and a general strided one (an index is turned into one offset per operand).
// Not here: vectorised loads, 32-bit index math, fusing ops. They would be faster;
// this is the version to read first.
#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <type_traits>

#include "tensor/cuda/kernels.hpp"
#include "tensor/cuda/runtime.hpp"
#include "base/error.hpp"
#include "tensor/tensor.hpp"

namespace ddp::cuda {
namespace {

// ---- Types: strided indexing -----------------------------------------------------------

constexpr int kMaxDims = 8;

// Note [Strided offsets on the GPU]
// A kernel receives its arguments by value, so the shape and the strides travel in a
// plain struct (no std::vector on the device). Thread i turns its row-major index into
// one index per dimension (divide by the sizes from the last dimension backwards), and
// each operand's offset is the dot product of that index with the operand's strides
// (in elements). For (2, 3) with strides a = (3, 1), b = (1, 2) (a transposed view),
// i = 4 is index (1, 1): a offset 3 + 1 = 4, b offset 1 + 2 = 3.
//
// Dimensions are merged first where every operand allows it (dimension d and d+1 are
// laid out back to back: stride[d] == stride[d+1] * size[d+1] for all operands), and
// size-1 dimensions dropped: fewer divisions per element, and most tensors of any rank
// then fit in kMaxDims. The CPU's for_each_row (tensor/cpu/strided_loop.hpp) is the twin.
template <int N>
struct StridedOffsets {
  int ndim;
  std::int64_t sizes[kMaxDims];
  std::int64_t strides[N][kMaxDims];

  // offsets[k] = the offset of element `linear` (row-major) in operand k.
  __device__ void get(std::int64_t linear, std::int64_t (&offsets)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) offsets[k] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const std::int64_t index = linear % sizes[d];
      linear /= sizes[d];
#pragma unroll
      for (int k = 0; k < N; ++k) offsets[k] += index * strides[k][d];
    }
  }
};

// Builds the struct above for operands of one `shape`, merging what can be merged.
template <int N>
StridedOffsets<N> make_offsets(const Shape& shape, const std::array<const Shape*, N>& strides) {
  // Keep the dimensions of size != 1, outermost first.
  Shape sizes;
  std::array<Shape, N> kept;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    sizes.push_back(shape[d]);
    for (int k = 0; k < N; ++k) kept[k].push_back((*strides[k])[d]);
  }
  // Merge dimension d into the one before it (its outer neighbour) when every operand
  // allows it; the merged dimension keeps the inner stride.
  Shape merged_sizes;
  std::array<Shape, N> merged;
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    bool can_merge = !merged_sizes.empty();
    for (int k = 0; k < N && can_merge; ++k) {
      can_merge = merged[k].back() == kept[k][d] * sizes[d];
    }
    if (can_merge) {
      merged_sizes.back() *= sizes[d];
      for (int k = 0; k < N; ++k) merged[k].back() = kept[k][d];
    } else {
      merged_sizes.push_back(sizes[d]);
      for (int k = 0; k < N; ++k) merged[k].push_back(kept[k][d]);
    }
  }
  DDP_CHECK(merged_sizes.size() <= static_cast<std::size_t>(kMaxDims),
            "the CUDA backend handles strided tensors of up to ", kMaxDims,
            " dimensions (after merging), got shape ", shape_str(shape),
            "\nhint: call .contiguous() on the inputs first");
  StridedOffsets<N> offsets{};
  offsets.ndim = static_cast<int>(merged_sizes.size());
  for (int d = 0; d < offsets.ndim; ++d) {
    offsets.sizes[d] = merged_sizes[d];
    for (int k = 0; k < N; ++k) offsets.strides[k][d] = merged[k][d];
  }
  return offsets;
}

// ---- Kernels ---------------------------------------------------------------------------
// The grid-stride loop of Note [Grid-stride loops] (kernels.hpp), three times.

template <typename Out, typename F>
__global__ void map0_contiguous(Out* out, std::int64_t n, F f) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    out[i] = f(i);
  }
}

template <typename Out, typename F>
__global__ void map0_strided(Out* out, std::int64_t n, StridedOffsets<1> index, F f) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    std::int64_t offsets[1];
    index.get(i, offsets);
    out[offsets[0]] = f(i);
  }
}

template <typename In, typename Out, typename F>
__global__ void map1_contiguous(const In* x, Out* out, std::int64_t n, F f) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    out[i] = static_cast<Out>(f(x[i]));
  }
}

template <typename In, typename Out, typename F>
__global__ void map1_strided(const In* x, Out* out, std::int64_t n, StridedOffsets<2> index, F f) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    std::int64_t offsets[2];  // x, out
    index.get(i, offsets);
    out[offsets[1]] = static_cast<Out>(f(x[offsets[0]]));
  }
}

template <typename In, typename Out, typename F>
__global__ void map2_contiguous(const In* a, const In* b, Out* out, std::int64_t n, F f) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    out[i] = static_cast<Out>(f(a[i], b[i]));
  }
}

template <typename In, typename Out, typename F>
__global__ void map2_strided(const In* a, const In* b, Out* out, std::int64_t n,
                             StridedOffsets<3> index, F f) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    std::int64_t offsets[3];  // a, b, out
    index.get(i, offsets);
    out[offsets[2]] = static_cast<Out>(f(a[offsets[0]], b[offsets[1]]));
  }
}

// ---- Launchers: pick the path, launch, check the launch --------------------------------
// A launch is asynchronous: cudaGetLastError right after it reports a bad launch
// configuration; errors while the kernel runs show up at the next synchronising call.

template <typename Out, typename F>
void launch_map0(cudaStream_t stream, const Tensor& out, F f) {
  const std::int64_t n = out.numel();
  if (n == 0) return;  // a grid of zero blocks is an invalid launch
  Out* po = static_cast<Out*>(out.raw_data());
  if (out.is_contiguous()) {
    map0_contiguous<<<blocks_for(n), kThreadsPerBlock, 0, stream>>>(po, n, f);
  } else {
    const auto index = make_offsets<1>(out.shape(), {&out.strides()});
    map0_strided<<<blocks_for(n), kThreadsPerBlock, 0, stream>>>(po, n, index, f);
  }
  DDP_CHECK_CUDA(cudaGetLastError());
}

template <typename In, typename Out, typename F>
void launch_map1(cudaStream_t stream, const Tensor& x, const Tensor& out, F f) {
  const std::int64_t n = out.numel();
  if (n == 0) return;
  const In* px = static_cast<const In*>(x.raw_data());
  Out* po = static_cast<Out*>(out.raw_data());
  if (x.is_contiguous() && out.is_contiguous()) {
    map1_contiguous<<<blocks_for(n), kThreadsPerBlock, 0, stream>>>(px, po, n, f);
  } else {
    const auto index = make_offsets<2>(out.shape(), {&x.strides(), &out.strides()});
    map1_strided<<<blocks_for(n), kThreadsPerBlock, 0, stream>>>(px, po, n, index, f);
  }
  DDP_CHECK_CUDA(cudaGetLastError());
}

template <typename In, typename Out, typename F>
void launch_map2(cudaStream_t stream, const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  const std::int64_t n = out.numel();
  if (n == 0) return;
  const In* pa = static_cast<const In*>(a.raw_data());
  const In* pb = static_cast<const In*>(b.raw_data());
  Out* po = static_cast<Out*>(out.raw_data());
  if (a.is_contiguous() && b.is_contiguous() && out.is_contiguous()) {
    map2_contiguous<<<blocks_for(n), kThreadsPerBlock, 0, stream>>>(pa, pb, po, n, f);
  } else {
    const auto index = make_offsets<3>(out.shape(), {&a.strides(), &b.strides(), &out.strides()});
    map2_strided<<<blocks_for(n), kThreadsPerBlock, 0, stream>>>(pa, pb, po, n, index, f);
  }
  DDP_CHECK_CUDA(cudaGetLastError());
}

// ---- Small functors (no device lambdas: they would need nvcc's --extended-lambda) -----

template <typename T>
struct Constant {
  T value;
  __device__ T operator()(std::int64_t) const { return value; }
};

template <typename T>
struct ArangeValue {
  double start, step;
  // The same expression as the CPU's, in double, then rounded once to T.
  __device__ T operator()(std::int64_t i) const {
    return static_cast<T>(start + static_cast<double>(i) * step);
  }
};

template <typename Out>
struct Convert {
  template <typename In>
  __device__ Out operator()(In v) const {
    return static_cast<Out>(v);
  }
};

// Note [Kernel template arguments are plain types]
// A kernel template is compiled twice: nvcc's front end lists the instantiations it sees
// for the device code, g++ compiles the host side that launches them, and the runtime
// pairs the two by the kernel's mangled name. They must agree on every template
// argument. `decltype(f)` for an `f` captured by reference in a nested generic lambda is
// `Op` to nvcc but `Op&` to g++ 12/13, so `WithScalar<decltype(f), T>` named two different
// kernels: the host launched `map1_contiguous<..., WithScalar<Eq&, float>>`, the GPU only
// had `WithScalar<Eq, float>`, and every launch failed with cudaErrorInvalidDeviceFunction
// (found on the first H100 run). So functor types are spelled FunctorOf<decltype(f)>, and
// WithScalar refuses a reference at compile time, in every CUDA build, GPU or not.
template <typename F>
using FunctorOf = std::remove_cvref_t<F>;

// `a op scalar`: the scalar is always the right-hand operand.
template <typename F, typename T>
struct WithScalar {
  static_assert(std::is_same_v<F, FunctorOf<F>>,
                "a kernel's functor must be a plain type: Note [Kernel template arguments "
                "are plain types]");
  F f;
  T scalar;
  __device__ auto operator()(T v) const { return f(v, scalar); }
};

// Calls f(T{}) with T = float or std::int64_t, matching `dtype` (as the CPU twin does).
template <typename F>
void visit_dtype(DType dtype, F&& f) {
  if (dtype == DType::Float32) {
    f(float{});
  } else {
    f(std::int64_t{});
  }
}

// Div and Pow are float-only (op_math.hpp: supports_int64); ops.cpp rejects them for
// int64 before they get here, so their int64 kernels are never compiled.
template <typename F, typename T>
constexpr bool kDefinedFor =
    std::is_same_v<T, float> || !(std::is_same_v<F, math::Div> || std::is_same_v<F, math::Pow>);

}  // namespace

// ---- Entry points (kernels.hpp) --------------------------------------------------------

void fill(cudaStream_t stream, const Tensor& out, double value) {
  visit_dtype(out.dtype(), [&](auto zero) {
    using T = decltype(zero);
    launch_map0<T>(stream, out, Constant<T>{static_cast<T>(value)});
  });
}

void arange(cudaStream_t stream, const Tensor& out, double start, double step) {
  visit_dtype(out.dtype(), [&](auto zero) {
    using T = decltype(zero);
    launch_map0<T>(stream, out, ArangeValue<T>{start, step});
  });
}

void copy(cudaStream_t stream, const Tensor& src, const Tensor& out) {
  visit_dtype(src.dtype(), [&](auto src_zero) {
    visit_dtype(out.dtype(), [&](auto out_zero) {
      using In = decltype(src_zero);
      using Out = decltype(out_zero);
      launch_map1<In, Out>(stream, src, out, Convert<Out>{});
    });
  });
}

void unary(cudaStream_t stream, UnaryOp op, const Tensor& x, const Tensor& out) {
  DDP_CHECK(x.dtype() == DType::Float32, op_name(op), " on the GPU expects float32, got ",
            x.describe());
  visit_unary(op, [&](auto f) { launch_map1<float, float>(stream, x, out, f); });
}

void binary(cudaStream_t stream, BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  visit_binary(op, [&](auto f) {
    visit_dtype(a.dtype(), [&](auto zero) {
      using F = FunctorOf<decltype(f)>;
      using T = decltype(zero);
      if constexpr (kDefinedFor<F, T>) {
        using R = decltype(f(T{}, T{}));  // float for comparisons, T otherwise
        launch_map2<T, R>(stream, a, b, out, f);
      } else {
        DDP_FAIL(op_name(op), " is not defined for int64 tensors (got ", a.describe(), ")");
      }
    });
  });
}

void binary_scalar(cudaStream_t stream, BinaryOp op, const Tensor& a, double scalar,
                   const Tensor& out) {
  visit_binary(op, [&](auto f) {
    visit_dtype(a.dtype(), [&](auto zero) {
      using F = FunctorOf<decltype(f)>;
      using T = decltype(zero);
      if constexpr (kDefinedFor<F, T>) {
        using R = decltype(f(T{}, T{}));
        launch_map1<T, R>(stream, a, out, WithScalar<F, T>{f, static_cast<T>(scalar)});
      } else {
        DDP_FAIL(op_name(op), " is not defined for int64 tensors (got ", a.describe(), ")");
      }
    });
  });
}

}  // namespace ddp::cuda
