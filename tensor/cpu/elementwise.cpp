// Elementwise kernels on the CPU: fill, arange, copy, unary, binary. Chapter 01.
// The CUDA twins are in tensor/cuda/elementwise.cu; the per-element math of both is in
// tensor/op_math.hpp.
//
// Each kernel has two paths: every operand contiguous (one flat loop over i, the common
// case in a network) and the general strided path through for_each_row().
#include <cstdint>
#include <type_traits>

#include "tensor/cpu/kernels.hpp"
#include "tensor/cpu/strided_loop.hpp"

namespace ddp::cpu {

namespace {

// Calls f(T{}) with T = float or std::int64_t, matching `dtype`.
template <typename F>
void visit_dtype(DType dtype, F&& f) {
  if (dtype == DType::Float32) {
    f(float{});
  } else {
    f(std::int64_t{});
  }
}

// out[i] = f(x[i]) for every element, any strides. Input and output element types may
// differ (copy converts float32 <-> int64 this way).
template <typename In, typename Out, typename F>
void map1(const Tensor& x, const Tensor& out, F f) {
  const In* px = x.data<In>();
  Out* po = out.data<Out>();
  const std::int64_t n = out.numel();
  if (x.is_contiguous() && out.is_contiguous()) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelGrain)
    for (std::int64_t i = 0; i < n; ++i) po[i] = static_cast<Out>(f(px[i]));
    return;
  }
  for_each_row<2>(out.shape(), {&x.strides(), &out.strides()},
                  [&](const Offsets<2>& start, std::int64_t count, const Offsets<2>& step) {
                    for (std::int64_t i = 0; i < count; ++i) {
                      po[start[1] + i * step[1]] = static_cast<Out>(f(px[start[0] + i * step[0]]));
                    }
                  });
}

// out[i] = f(a[i], b[i]), any strides (broadcast operands have stride 0).
template <typename In, typename Out, typename F>
void map2(const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  const In* pa = a.data<In>();
  const In* pb = b.data<In>();
  Out* po = out.data<Out>();
  const std::int64_t n = out.numel();
  if (a.is_contiguous() && b.is_contiguous() && out.is_contiguous()) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelGrain)
    for (std::int64_t i = 0; i < n; ++i) po[i] = static_cast<Out>(f(pa[i], pb[i]));
    return;
  }
  for_each_row<3>(out.shape(), {&a.strides(), &b.strides(), &out.strides()},
                  [&](const Offsets<3>& start, std::int64_t count, const Offsets<3>& step) {
                    for (std::int64_t i = 0; i < count; ++i) {
                      po[start[2] + i * step[2]] = static_cast<Out>(
                          f(pa[start[0] + i * step[0]], pb[start[1] + i * step[1]]));
                    }
                  });
}

}  // namespace

void fill(const Tensor& out, double value) {
  visit_dtype(out.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T v = static_cast<T>(value);
    map1<T, T>(out, out, [v](T) { return v; });
  });
}

void arange(const Tensor& out, double start, double step) {
  visit_dtype(out.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* p = out.data<T>();
    const std::int64_t n = out.numel();
    for (std::int64_t i = 0; i < n; ++i)
      p[i] = static_cast<T>(start + static_cast<double>(i) * step);
  });
}

void copy(const Tensor& src, const Tensor& out) {
  visit_dtype(src.dtype(), [&](auto src_zero) {
    visit_dtype(out.dtype(), [&](auto out_zero) {
      using In = decltype(src_zero);
      using Out = decltype(out_zero);
      map1<In, Out>(src, out, [](In v) { return static_cast<Out>(v); });
    });
  });
}

void unary(UnaryOp op, const Tensor& x, const Tensor& out) {
  visit_unary(op, [&](auto f) { map1<float, float>(x, out, f); });
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  visit_binary(op, [&](auto f) {
    visit_dtype(a.dtype(), [&](auto zero) {
      using T = decltype(zero);
      using R = decltype(f(T{}, T{}));  // float for comparisons, T otherwise
      map2<T, R>(a, b, out, f);
    });
  });
}

void binary_scalar(BinaryOp op, const Tensor& a, double scalar, const Tensor& out) {
  visit_binary(op, [&](auto f) {
    visit_dtype(a.dtype(), [&](auto zero) {
      using T = decltype(zero);
      using R = decltype(f(T{}, T{}));
      const T s = static_cast<T>(scalar);
      map1<T, R>(a, out, [f, s](T v) { return f(v, s); });
    });
  });
}

}  // namespace ddp::cpu
