// clip_grad_norm and its halves (see clip_grad.hpp).
#include "nn/clip_grad.hpp"

#include <algorithm>
#include <cmath>

#include "autograd/grad_mode.hpp"
#include "tensor/ops.hpp"

namespace ddp::nn {

double grad_norm_squared(const std::vector<Variable>& parameters) {
  double total = 0.0;
  for (const Variable& p : parameters) {
    const Tensor& g = p.grad();
    if (!g.defined()) continue;
    total += static_cast<double>(sum(mul(g, g)).cpu().item<float>());
  }
  return total;
}

double clip_coefficient(double total_norm, double max_norm) {
  DDP_CHECK(max_norm > 0.0, "clip_grad_norm: max_norm must be > 0, got ", max_norm);
  return std::min(1.0, max_norm / (total_norm + 1e-6));
}

void scale_grads(const std::vector<Variable>& parameters, double coefficient) {
  NoGradGuard no_grad;
  for (const Variable& p : parameters) {
    Tensor g = p.grad();  // a handle: scaling it scales the gradient itself
    if (g.defined()) g.mul_(static_cast<float>(coefficient));
  }
}

double clip_grad_norm(const std::vector<Variable>& parameters, double max_norm) {
  const double total_norm = std::sqrt(grad_norm_squared(parameters));
  scale_grads(parameters, clip_coefficient(total_norm, max_norm));
  return total_norm;
}

}  // namespace ddp::nn
