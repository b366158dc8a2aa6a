// The fused CPU kernels behind conv2d, batch_norm and relu, next to the textbook
// versions they stand in for. Chapter 03; Note [Fused CPU paths] (ops/conv.cpp) says
// why they exist and when conv2d() & co. pick them. Same arguments, same results (up to
// float rounding), same checks as the functions of functions.hpp. Tests and benchmarks
// call both versions by name to compare them; a model just calls conv2d().
#pragma once

#include <cstdint>

#include "autograd/variable.hpp"

namespace ddp {

// True when conv2d(), batch_norm() and relu() take their fused CPU path for input x.
bool fused_cpu_applies(const Tensor& x);

// ---- The textbook versions: tensor ops only, any device --------------------------------
// conv2d as one im2col view + one GEMM (Note [im2col with views], ops/conv.cpp).
Variable conv2d_views(const Variable& x, const Variable& weight, const Variable& bias,
                      std::int64_t stride, std::int64_t padding);
// batch_norm as broadcasting tensor ops (ops/batch_norm.cpp).
Variable batch_norm_composed(const Variable& x, const Variable& weight, const Variable& bias,
                             Tensor& running_mean, Tensor& running_var, bool training,
                             double momentum, double eps);
// relu forward, and its backward as mul(g, out > 0) (ops/elementwise.cpp).
Variable relu_composed(const Variable& x);

// ---- The fused CPU versions: float32 tensors in host memory -----------------------------
// conv2d one image at a time, images shared out among the threads (ops/conv_cpu.cpp).
Variable conv2d_cpu(const Variable& x, const Variable& weight, const Variable& bias,
                    std::int64_t stride, std::int64_t padding);
// batch_norm in two passes over x forward and two over (g, x) backward, one channel per
// thread at a time (ops/batch_norm_cpu.cpp).
Variable batch_norm_cpu(const Variable& x, const Variable& weight, const Variable& bias,
                        Tensor& running_mean, Tensor& running_var, bool training, double momentum,
                        double eps);
// relu whose backward is one pass: g where out > 0, else 0 (ops/relu_cpu.cpp).
Variable relu_cpu(const Variable& x);

}  // namespace ddp
