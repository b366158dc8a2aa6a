// Winograd's F(2x2, 3x3): a 3x3 convolution with stride 1 and padding 1 ("same") in
// 16 multiplications per 2x2 block of outputs instead of 36. Chapter 03; conv_cpu.cpp
// calls it for such layers with enough channels and pixels: the forward, the input
// gradient (the same kind of convolution) and the weight gradient. Note [Winograd
// F(2x2, 3x3)] in the .cpp says how and why. Float32 host memory, one image per call.
// Not here: other kernels or strides (conv_cpu.cpp's patch matrix does those), GPU tensors.
#pragma once

#include <cstdint>

#include "autograd/ops/conv_shape.hpp"

namespace ddp::detail {

// True when conv_cpu.cpp computes this convolution with winograd_conv_image: 3x3 kernel,
// stride 1, padding 1 (then Ho == H and Wo == W), and enough channels and pixels to gain.
bool winograd_applies(const ConvShape& s);

// One image's sizes: C channels in, O out, H x W pixels (the same in and out). The image
// is cut into 2x2 output tiles, th x tw of them (the last row and column may hang over
// the edge).
struct WinogradShape {
  std::int64_t C = 0, O = 0, H = 0, W = 0;
  std::int64_t th() const { return (H + 1) / 2; }
  std::int64_t tw() const { return (W + 1) / 2; }
  // Floats of scratch one call needs.
  std::int64_t scratch_floats() const;
};

// w: (O, C, 3, 3) -> u: (16, O, C), each 3x3 filter turned into its 4x4 transform.
// flipped: the weight of the input gradient instead, u: (16, C, O), from the filters
// w[o][c] rotated by 180 degrees, read as C outputs of O inputs.
void winograd_weight(const float* w, std::int64_t O, std::int64_t C, bool flipped, float* u);

// x: one image (s.C, H, W), u: (16, s.O, s.C) from winograd_weight (flipped when s is
// the input gradient's shape), bias: (s.O) or nullptr -> y: (s.O, H, W), overwritten.
// scratch: s.scratch_floats() floats.
void winograd_conv_image(const float* x, const float* u, const float* bias, const WinogradShape& s,
                         float* scratch, float* y);

// The weight gradient in the transformed space, one image at a time: x (C, H, W) and
// its output's gradient dy (O, H, W) -> dw_hat (16, O, C), added to it when `accumulate`,
// else overwritten. scratch: s.scratch_floats() floats.
void winograd_weight_grad_image(const float* x, const float* dy, const WinogradShape& s,
                                bool accumulate, float* scratch, float* dw_hat);

// dw_hat (16, O, C), summed over the images -> dw (O, C, 3, 3), overwritten.
void winograd_weight_grad_finish(const float* dw_hat, std::int64_t O, std::int64_t C, float* dw);

}  // namespace ddp::detail
