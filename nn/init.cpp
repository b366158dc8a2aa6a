// PyTorch's default initialisation (see init.hpp).
#include "nn/init.hpp"

#include <cmath>

namespace ddp::nn {

std::int64_t fan_in(const Tensor& weight) {
  DDP_CHECK(weight.dim() >= 2, "fan_in: expected a weight of 2 or more dimensions, got ",
            weight.describe());
  return weight.numel() / weight.size(0);
}

double kaiming_uniform_bound(std::int64_t fan_in, double a) {
  DDP_CHECK(fan_in > 0, "kaiming_uniform_bound: fan_in must be positive, got ", fan_in);
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  return gain * std::sqrt(3.0 / static_cast<double>(fan_in));
}

void kaiming_uniform_(Tensor& weight, double a, Generator& gen) {
  const auto bound = static_cast<float>(kaiming_uniform_bound(fan_in(weight), a));
  uniform_(weight, -bound, bound, gen);
}

void bias_uniform_(Tensor& bias, std::int64_t fan_in, Generator& gen) {
  DDP_CHECK(fan_in > 0, "bias_uniform_: fan_in must be positive, got ", fan_in);
  const auto bound = static_cast<float>(1.0 / std::sqrt(static_cast<double>(fan_in)));
  uniform_(bias, -bound, bound, gen);
}

}  // namespace ddp::nn
