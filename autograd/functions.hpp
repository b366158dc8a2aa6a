// Differentiable operations on Variables. Chapter 03 (and the layers of chapter 04).
//
// Each op lives in autograd/ops/<family>.cpp with its forward and its backward Node side
// by side. The forward math is the tensor library's (tensor/ops.hpp), so every op runs
// on the CPU and on a GPU alike. Shapes are given as `x: (B, C, H, W) -> (B, K)`.
#pragma once

#include <cstdint>

#include "autograd/variable.hpp"
#include "tensor/shape.hpp"

namespace ddp {

// ---- ops/elementwise.cpp: broadcasting arithmetic; gradients are summed back to each
// input's shape (sum_to) ---------------------------------------------------------------
Variable add(const Variable& a, const Variable& b);
Variable sub(const Variable& a, const Variable& b);
Variable mul(const Variable& a, const Variable& b);
Variable div(const Variable& a, const Variable& b);
Variable add(const Variable& a, double scalar);
Variable mul(const Variable& a, double scalar);
Variable neg(const Variable& x);
Variable relu(const Variable& x);
Variable exp(const Variable& x);
Variable log(const Variable& x);
Variable operator+(const Variable& a, const Variable& b);
Variable operator-(const Variable& a, const Variable& b);
Variable operator*(const Variable& a, const Variable& b);
Variable operator*(const Variable& a, double scalar);

// ---- ops/reduce.cpp --------------------------------------------------------------------
Variable sum(const Variable& x);                                   // -> ()
Variable sum(const Variable& x, std::int64_t dim, bool keepdim = false);
Variable mean(const Variable& x);                                  // -> ()
Variable mean(const Variable& x, std::int64_t dim, bool keepdim = false);

// ---- ops/shape.cpp ---------------------------------------------------------------------
Variable reshape(const Variable& x, const Shape& shape);
Variable flatten(const Variable& x, std::int64_t start_dim = 1);   // (B, ...) -> (B, prod)
Variable transpose(const Variable& x, std::int64_t dim0, std::int64_t dim1);

// ---- ops/linear.cpp --------------------------------------------------------------------
// (M, K) @ (K, N) -> (M, N), and batched (B, M, K) @ (B, K, N) -> (B, M, N).
Variable matmul(const Variable& a, const Variable& b);
// x: (B, in), weight: (out, in), bias: (out) or undefined -> (B, out). y = x W^T + b.
Variable linear(const Variable& x, const Variable& weight, const Variable& bias);

// ---- ops/conv.cpp ----------------------------------------------------------------------
// x: (B, C, H, W), weight: (O, C, kh, kw), bias: (O) or undefined
//   -> (B, O, (H + 2p - kh) / s + 1, (W + 2p - kw) / s + 1). im2col + GEMM.
Variable conv2d(const Variable& x, const Variable& weight, const Variable& bias,
                std::int64_t stride = 1, std::int64_t padding = 0);

// ---- ops/batch_norm.cpp ----------------------------------------------------------------
// x: (B, C, H, W), weight/bias: (C). Training: normalise with the batch's mean and
// biased variance over (B, H, W), and update running_mean/running_var in place with
// momentum and the UNBIASED variance (PyTorch's rule). Evaluation: use the running ones.
Variable batch_norm(const Variable& x, const Variable& weight, const Variable& bias,
                    Tensor& running_mean, Tensor& running_var, bool training,
                    double momentum = 0.1, double eps = 1e-5);

// ---- ops/pool.cpp ----------------------------------------------------------------------
// x: (B, C, H, W) -> (B, C, (H - k) / s + 1, (W - k) / s + 1). The gradient goes to the
// first maximum of each window.
Variable max_pool2d(const Variable& x, std::int64_t kernel, std::int64_t stride);
// x: (B, C, H, W) -> (B, C): the mean over each channel's H x W values.
Variable global_avg_pool2d(const Variable& x);

// ---- ops/loss.cpp ----------------------------------------------------------------------
// logits: (B, K) -> (B, K), log(softmax) computed stably (max subtracted first).
Variable log_softmax(const Variable& logits);
// log_probs: (B, K), labels: int64 (B) with values in [0, K) -> (): mean of -log_probs[b, y_b].
Variable nll_loss(const Variable& log_probs, const Tensor& labels);
// nll_loss(log_softmax(logits), labels), with one fused backward: (softmax - onehot) / B.
Variable cross_entropy(const Variable& logits, const Tensor& labels);

}  // namespace ddp
