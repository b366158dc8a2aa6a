// Conv2d: a 2-D convolution layer over (B, C, H, W) images. Chapter 04.
// Square kernels, one stride and one padding for both directions, no groups or
// dilation: what the ResNet of this chapter needs. The op itself (im2col + GEMM) is
// autograd/ops/conv.cpp. Parameter names as in PyTorch: "weight" (O, C, k, k), "bias" (O).
#pragma once

#include <cstdint>
#include <string>

#include "nn/module.hpp"
#include "tensor/random.hpp"

namespace ddp::nn {

class Conv2d final : public Module {
 public:
  // Initialised as PyTorch does (nn/init.hpp), drawing from `gen`: weight, then bias.
  Conv2d(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel,
         std::int64_t stride, std::int64_t padding, bool bias, Generator& gen);

  // x: (B, C, H, W) -> (B, O, (H + 2p - k) / s + 1, (W + 2p - k) / s + 1)
  Variable forward(const Variable& x) override;
  std::string describe() const override;

  const Variable& weight() const { return weight_; }
  const Variable& bias() const { return bias_; }  // undefined when built without one
  std::int64_t stride() const { return stride_; }
  std::int64_t padding() const { return padding_; }

 private:
  std::int64_t in_channels_;
  std::int64_t out_channels_;
  std::int64_t kernel_;
  std::int64_t stride_;
  std::int64_t padding_;
  Variable weight_;
  Variable bias_;
};

}  // namespace ddp::nn
