// The CPU backend's kernels, one function per Backend entry (see tensor/backend.hpp for
// the contract each one relies on). Chapter 01. Internal to tensor/: the library's
// users call the ops in tensor/ops.hpp; backend.cpp forwards here.
#pragma once

#include <cstdint>

#include "tensor/backend.hpp"
#include "tensor/tensor.hpp"

namespace ddp::cpu {

// elementwise.cpp
void fill(const Tensor& out, double value);
void arange(const Tensor& out, double start, double step);
void copy(const Tensor& src, const Tensor& out);
void unary(UnaryOp op, const Tensor& x, const Tensor& out);
void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);
void binary_scalar(BinaryOp op, const Tensor& a, double scalar, const Tensor& out);
// reduce.cpp
void reduce(Reduction op, const Tensor& x, std::int64_t outer, std::int64_t n,
            std::int64_t inner, const Tensor& out);
// matmul.cpp
void matmul(const Tensor& a, const Tensor& b, const Tensor& out);
// random.cpp
void random(const RandomSpec& spec, const Tensor& out);

}  // namespace ddp::cpu
