// Tensor math: elementwise ops with broadcasting, reductions, matmul. Chapter 01.
//
// Every function here checks its inputs (dtype, device, shapes), allocates the result,
// and hands the work to the backend of the inputs' device (backend.hpp): the CPU
// backend in tensor/cpu/, the CUDA backend in tensor/cuda/. Results are contiguous.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/op_math.hpp"
#include "tensor/tensor.hpp"

namespace ddp {

// ---- Elementwise, unary (float32) ----------------------------------------------------
Tensor unary(UnaryOp op, const Tensor& x);
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor square(const Tensor& x);

// ---- Elementwise, binary, with NumPy broadcasting ------------------------------------
// Both inputs on one device, of one dtype. Comparisons return float32 1/0.
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);

// Scalar forms: the scalar is the right-hand operand (`a op scalar`).
Tensor binary(BinaryOp op, const Tensor& a, double scalar);
Tensor add(const Tensor& a, double scalar);
Tensor sub(const Tensor& a, double scalar);
Tensor mul(const Tensor& a, double scalar);
Tensor div(const Tensor& a, double scalar);
Tensor pow(const Tensor& a, double scalar);
Tensor maximum(const Tensor& a, double scalar);
Tensor minimum(const Tensor& a, double scalar);

// In place: `out` op= `b` (b broadcast to out's shape). What Tensor::add_ etc. call.
void binary_(BinaryOp op, const Tensor& out, const Tensor& b);
void binary_(BinaryOp op, const Tensor& out, double scalar);

Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double s);
Tensor operator-(const Tensor& a, double s);
Tensor operator*(const Tensor& a, double s);
Tensor operator/(const Tensor& a, double s);
Tensor operator+(double s, const Tensor& a);
Tensor operator-(double s, const Tensor& a);
Tensor operator*(double s, const Tensor& a);

// ---- Reductions ----------------------------------------------------------------------
// Over one dimension (dropped from the result unless keepdim) or over everything (0-d).
// sum keeps the dtype; mean is float32; argmax returns int64 indices (first maximum).
Tensor sum(const Tensor& x);
Tensor sum(const Tensor& x, std::int64_t dim, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, std::int64_t dim, bool keepdim = false);
Tensor max(const Tensor& x);
Tensor max(const Tensor& x, std::int64_t dim, bool keepdim = false);
Tensor min(const Tensor& x);
Tensor min(const Tensor& x, std::int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, std::int64_t dim, bool keepdim = false);
// Sums `x` down to `shape`, the inverse of broadcasting `shape` up to x's shape:
// what the gradient of a broadcast input needs (chapter 03).
Tensor sum_to(const Tensor& x, const Shape& shape);

// ---- Linear algebra ------------------------------------------------------------------
// (M, K) @ (K, N) -> (M, N); (B, M, K) @ (B, K, N) -> (B, M, N), float32. Transposed
// views (a.t()) are used as they are, without a copy: the backends read either layout.
Tensor matmul(const Tensor& a, const Tensor& b);

}  // namespace ddp
