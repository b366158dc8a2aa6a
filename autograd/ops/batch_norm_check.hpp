// What the batch_norm versions share: chapter 03's two (ops/batch_norm.cpp and the fused
// ops/batch_norm_cpu.cpp) and chapter 06's SyncBatchNorm2d (dist/parallel/): the argument
// checks, the per-channel sums, and the update of the running statistics. The math of
// the normalisation is in each version.
#pragma once

#include <cstdint>

#include "autograd/variable.hpp"

namespace ddp::detail {

// Checks x (B, C, H, W), weight/bias (C) or undefined, and the running statistics (both
// or neither in training; both in evaluation). Returns N = B*H*W, the values per channel.
std::int64_t check_batch_norm(const Variable& x, const Variable& weight, const Variable& bias,
                              const Tensor& running_mean, const Tensor& running_var, bool training);

// t: (B, C, H, W) -> (C), the sum over batch and space of each channel.
Tensor channel_sum(const Tensor& t);
// (C) -> (1, C, 1, 1): a view that broadcasts against (B, C, H, W).
Tensor per_channel(const Tensor& v);

// running = (1 - momentum) * running + momentum * batch statistic (unbiased variance).
// mean, var: (C), the batch's mean and biased variance over its N values per channel.
void update_running_stats(Tensor& running_mean, Tensor& running_var, const Tensor& mean,
                          const Tensor& var, std::int64_t n, double momentum);

}  // namespace ddp::detail
