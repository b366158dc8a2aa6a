// The geometry of one 2-D convolution, shared by the two conv2d implementations of
// chapter 03: the im2col-with-views one (conv.cpp) and the fused CPU one (conv_cpu.cpp).
// Checks the arguments and derives the padded and output sizes; computes nothing else.
#pragma once

#include <cstdint>

#include "autograd/variable.hpp"
#include "base/error.hpp"
#include "tensor/tensor.hpp"

namespace ddp::detail {

// Sizes of one convolution. L = Ho * Wo output positions per image, K = C * kh * kw
// values per patch (the GEMM's inner dimension).
struct ConvShape {
  std::int64_t B = 0, C = 0, H = 0, W = 0;  // input
  std::int64_t O = 0, kh = 0, kw = 0;       // weight (O, C, kh, kw)
  std::int64_t stride = 1, padding = 0;
  std::int64_t Hp = 0, Wp = 0;  // padded input
  std::int64_t Ho = 0, Wo = 0;  // output
  std::int64_t L() const { return Ho * Wo; }
  std::int64_t K() const { return C * kh * kw; }
};

// Checks x (B, C, H, W), weight (O, C, kh, kw) and bias (O) or undefined, all on one
// device, and returns the geometry.
inline ConvShape conv_shape(const Variable& x, const Variable& weight, const Variable& bias,
                            std::int64_t stride, std::int64_t padding) {
  const Tensor& xd = x.data();
  const Tensor& w = weight.data();
  DDP_CHECK(xd.dim() == 4 && w.dim() == 4,
            "conv2d: expected x (B, C, H, W) and weight "
            "(O, C, kh, kw), got ",
            xd.describe(), " and ", w.describe());
  DDP_CHECK(xd.size(1) == w.size(1), "conv2d: x ", xd.describe(), " has ", xd.size(1),
            " channels but weight ", w.describe(), " expects ", w.size(1));
  DDP_CHECK(stride >= 1 && padding >= 0,
            "conv2d: stride must be >= 1 and padding >= 0, got "
            "stride ",
            stride, " and padding ", padding);
  ConvShape s;
  s.B = xd.size(0), s.C = xd.size(1), s.H = xd.size(2), s.W = xd.size(3);
  s.O = w.size(0), s.kh = w.size(2), s.kw = w.size(3);
  s.stride = stride, s.padding = padding;
  s.Hp = s.H + 2 * padding, s.Wp = s.W + 2 * padding;
  DDP_CHECK(s.kh >= 1 && s.kw >= 1 && s.kh <= s.Hp && s.kw <= s.Wp, "conv2d: kernel ", s.kh, "x",
            s.kw, " does not fit the padded input ", s.Hp, "x", s.Wp, " (x ", xd.describe(),
            ", padding ", padding, ")");
  s.Ho = (s.Hp - s.kh) / stride + 1;
  s.Wo = (s.Wp - s.kw) / stride + 1;
  DDP_CHECK(x.device() == weight.device(), "conv2d: x ", xd.describe(), " and weight ",
            w.describe(), " are on different devices");
  if (bias.defined()) {
    DDP_CHECK(bias.dim() == 1 && bias.size(0) == s.O && bias.device() == x.device(),
              "conv2d: bias ", bias.data().describe(), " does not match weight ", w.describe(),
              " (expected ", shape_str({s.O}), " on ", x.device().str(), ")");
  }
  return s;
}

}  // namespace ddp::detail
