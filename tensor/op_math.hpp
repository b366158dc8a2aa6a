// The arithmetic of every elementwise and reduction op, written once and compiled
// twice: by the host compiler for the CPU backend (tensor/cpu/) and by nvcc for the
// CUDA kernels (tensor/cuda/). Chapter 01 reads it; chapter 02 reuses it on the GPU.
//
// An op is a small struct with a call operator. The backends loop over elements; this
// file decides what happens to each one. Ops are picked at run time by an enum and
// turned into a compile-time functor ONCE per call by `visit_unary` / `visit_binary`,
// so the inner loops never switch per element.
#pragma once

#include <cmath>
#include <cstdint>

#include "base/error.hpp"

#if defined(__CUDACC__)
#define DDP_HOST_DEVICE __host__ __device__
#else
#define DDP_HOST_DEVICE
#endif

namespace ddp {

enum class UnaryOp : std::uint8_t { Neg, Exp, Log, Sqrt, Rsqrt, Abs, Relu, Tanh, Sigmoid, Square };

enum class BinaryOp : std::uint8_t {
  Add,
  Sub,
  Mul,
  Div,
  Maximum,
  Minimum,
  Pow,  // arithmetic: result has the inputs' dtype
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,  // comparisons: result is float32 1 or 0
};

enum class Reduction : std::uint8_t { Sum, Max, Min, ArgMax };

constexpr bool is_comparison(BinaryOp op) { return op >= BinaryOp::Eq; }
// Ops that make sense on int64 tensors (labels, indices, counters).
constexpr bool supports_int64(BinaryOp op) { return op != BinaryOp::Div && op != BinaryOp::Pow; }

const char* op_name(UnaryOp op);
const char* op_name(BinaryOp op);
const char* op_name(Reduction op);

namespace math {

// ---- Unary (float32 only) ----------------------------------------------------------
struct Neg {
  DDP_HOST_DEVICE float operator()(float x) const { return -x; }
};
struct Exp {
  DDP_HOST_DEVICE float operator()(float x) const { return expf(x); }
};
struct Log {
  DDP_HOST_DEVICE float operator()(float x) const { return logf(x); }
};
struct Sqrt {
  DDP_HOST_DEVICE float operator()(float x) const { return sqrtf(x); }
};
struct Rsqrt {
  DDP_HOST_DEVICE float operator()(float x) const { return 1.0f / sqrtf(x); }
};
struct Abs {
  DDP_HOST_DEVICE float operator()(float x) const { return fabsf(x); }
};
// NaN in, NaN out, as in PyTorch (x > 0 ? x : 0 would turn a NaN into a quiet 0).
struct Relu {
  DDP_HOST_DEVICE float operator()(float x) const { return x <= 0.0f ? 0.0f : x; }
};
struct Tanh {
  DDP_HOST_DEVICE float operator()(float x) const { return tanhf(x); }
};
struct Sigmoid {
  DDP_HOST_DEVICE float operator()(float x) const { return 1.0f / (1.0f + expf(-x)); }
};
struct Square {
  DDP_HOST_DEVICE float operator()(float x) const { return x * x; }
};

// ---- Binary (templated: float32, and int64 where supports_int64) --------------------
struct Add {
  template <typename T>
  DDP_HOST_DEVICE T operator()(T a, T b) const {
    return a + b;
  }
};
struct Sub {
  template <typename T>
  DDP_HOST_DEVICE T operator()(T a, T b) const {
    return a - b;
  }
};
struct Mul {
  template <typename T>
  DDP_HOST_DEVICE T operator()(T a, T b) const {
    return a * b;
  }
};
struct Div {
  template <typename T>
  DDP_HOST_DEVICE T operator()(T a, T b) const {
    return a / b;
  }
};
// A NaN on either side wins, as in PyTorch: a > b alone gives maximum(NaN, 1) = 1 but
// maximum(1, NaN) = NaN. (a != a is NaN's test; for int64 the compiler drops it.)
struct Maximum {
  template <typename T>
  DDP_HOST_DEVICE T operator()(T a, T b) const {
    return (a > b || a != a) ? a : b;
  }
};
struct Minimum {
  template <typename T>
  DDP_HOST_DEVICE T operator()(T a, T b) const {
    return (a < b || a != a) ? a : b;
  }
};
struct Pow {
  template <typename T>
  DDP_HOST_DEVICE T operator()(T a, T b) const {
    return powf(a, b);
  }
};
struct Eq {
  template <typename T>
  DDP_HOST_DEVICE float operator()(T a, T b) const {
    return a == b ? 1.0f : 0.0f;
  }
};
struct Ne {
  template <typename T>
  DDP_HOST_DEVICE float operator()(T a, T b) const {
    return a != b ? 1.0f : 0.0f;
  }
};
struct Lt {
  template <typename T>
  DDP_HOST_DEVICE float operator()(T a, T b) const {
    return a < b ? 1.0f : 0.0f;
  }
};
struct Le {
  template <typename T>
  DDP_HOST_DEVICE float operator()(T a, T b) const {
    return a <= b ? 1.0f : 0.0f;
  }
};
struct Gt {
  template <typename T>
  DDP_HOST_DEVICE float operator()(T a, T b) const {
    return a > b ? 1.0f : 0.0f;
  }
};
struct Ge {
  template <typename T>
  DDP_HOST_DEVICE float operator()(T a, T b) const {
    return a >= b ? 1.0f : 0.0f;
  }
};

}  // namespace math

// visit_unary(op, f) calls f(math::Exp{}) for op == UnaryOp::Exp, and so on: the one
// place where the run-time enum becomes a compile-time type.
template <typename F>
decltype(auto) visit_unary(UnaryOp op, F&& f) {
  switch (op) {
    case UnaryOp::Neg:
      return f(math::Neg{});
    case UnaryOp::Exp:
      return f(math::Exp{});
    case UnaryOp::Log:
      return f(math::Log{});
    case UnaryOp::Sqrt:
      return f(math::Sqrt{});
    case UnaryOp::Rsqrt:
      return f(math::Rsqrt{});
    case UnaryOp::Abs:
      return f(math::Abs{});
    case UnaryOp::Relu:
      return f(math::Relu{});
    case UnaryOp::Tanh:
      return f(math::Tanh{});
    case UnaryOp::Sigmoid:
      return f(math::Sigmoid{});
    case UnaryOp::Square:
      return f(math::Square{});
  }
  DDP_FAIL("unknown unary op ", static_cast<int>(op));
}

template <typename F>
decltype(auto) visit_binary(BinaryOp op, F&& f) {
  switch (op) {
    case BinaryOp::Add:
      return f(math::Add{});
    case BinaryOp::Sub:
      return f(math::Sub{});
    case BinaryOp::Mul:
      return f(math::Mul{});
    case BinaryOp::Div:
      return f(math::Div{});
    case BinaryOp::Maximum:
      return f(math::Maximum{});
    case BinaryOp::Minimum:
      return f(math::Minimum{});
    case BinaryOp::Pow:
      return f(math::Pow{});
    case BinaryOp::Eq:
      return f(math::Eq{});
    case BinaryOp::Ne:
      return f(math::Ne{});
    case BinaryOp::Lt:
      return f(math::Lt{});
    case BinaryOp::Le:
      return f(math::Le{});
    case BinaryOp::Gt:
      return f(math::Gt{});
    case BinaryOp::Ge:
      return f(math::Ge{});
  }
  DDP_FAIL("unknown binary op ", static_cast<int>(op));
}

}  // namespace ddp
