// What the two batch_norm versions of chapter 03 share (ops/batch_norm.cpp and the fused
// ops/batch_norm_cpu.cpp): the argument checks and the update of the running statistics.
// Internal to autograd/ops; the math of the normalisation is in each version.
#pragma once

#include <cstdint>

#include "autograd/variable.hpp"

namespace ddp::detail {

// Checks x (B, C, H, W), weight/bias (C) or undefined, and the running statistics (both
// or neither in training; both in evaluation). Returns N = B*H*W, the values per channel.
std::int64_t check_batch_norm(const Variable& x, const Variable& weight, const Variable& bias,
                              const Tensor& running_mean, const Tensor& running_var, bool training);

// running = (1 - momentum) * running + momentum * batch statistic (unbiased variance).
// mean, var: (C), the batch's mean and biased variance over its N values per channel.
void update_running_stats(Tensor& running_mean, Tensor& running_var, const Tensor& mean,
                          const Tensor& var, std::int64_t n, double momentum);

}  // namespace ddp::detail
