// clip_grad_norm: scale every gradient by one factor so that their global L2 norm is at
// most max_norm, as torch.nn.utils.clip_grad_norm_ (norm_type 2). Chapter 09.
//
//   total = sqrt(sum over parameters of sum(g * g))
//   coef  = min(1, max_norm / (total + 1e-6));   every g = g * coef
//
// The norm is over all gradients at once, not per parameter: clipping keeps the update's
// direction. The two halves are separate functions because sharded training computes the
// sum of squares over each rank's shard and all-reduces it (one number) before scaling:
// grad_norm_squared + clip_coefficient + scale_grads is what clip_grad_norm does on one
// rank. Parameters without a gradient (undefined) are skipped.
#pragma once

#include <vector>

#include "autograd/variable.hpp"

namespace ddp::nn {

// sum over the defined gradients of sum(g * g), accumulated in double.
double grad_norm_squared(const std::vector<Variable>& parameters);
// min(1, max_norm / (total_norm + 1e-6)); max_norm must be > 0.
double clip_coefficient(double total_norm, double max_norm);
// g = g * coefficient for every defined gradient, in place.
void scale_grads(const std::vector<Variable>& parameters, double coefficient);

// Clips in place; returns the total norm before clipping (what PyTorch returns, and what
// a training log prints).
double clip_grad_norm(const std::vector<Variable>& parameters, double max_norm);

}  // namespace ddp::nn
