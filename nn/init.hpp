// PyTorch's default initialisation of Linear, Conv2d and BatchNorm2d. Chapter 04.
//
// Conv2d and Linear weights: kaiming_uniform_(a = sqrt(5)), i.e. U(-bound, bound) with
//     gain  = sqrt(2 / (1 + a^2))          (= sqrt(1/3) for a = sqrt(5))
//     bound = gain * sqrt(3 / fan_in)      (= 1 / sqrt(fan_in))
// and biases U(-1/sqrt(fan_in), 1/sqrt(fan_in)); fan_in = in_features, or
// in_channels * kh * kw. BatchNorm2d: weight 1, bias 0, running mean 0, running var 1.
// The random numbers come from the ddp::Generator the caller passes in, so the values
// are not PyTorch's (its generator differs); parity tests load PyTorch's instead.
#pragma once

#include <cstdint>

#include "tensor/random.hpp"
#include "tensor/tensor.hpp"

namespace ddp::nn {

// weight: (out, in) or (out, in, kh, kw) -> in * kh * kw (the inputs one output sees).
std::int64_t fan_in(const Tensor& weight);

// gain * sqrt(3 / fan_in) with gain = sqrt(2 / (1 + a^2)): the half-width of the uniform
// distribution whose standard deviation is gain / sqrt(fan_in).
double kaiming_uniform_bound(std::int64_t fan_in, double a);

// In place, `weight` contiguous float32 (a freshly made parameter is).
void kaiming_uniform_(Tensor& weight, double a, Generator& gen);
// bias: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
void bias_uniform_(Tensor& bias, std::int64_t fan_in, Generator& gen);

}  // namespace ddp::nn
