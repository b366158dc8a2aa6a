// Pooling on Variables: max_pool2d and global_avg_pool2d, forward and backward side by
// side. Chapter 03.
//
// max_pool2d uses the trick of conv.cpp (Note [im2col with views]): the pooling windows
// are one strided view of the input, so the forward is a max/argmax over its last
// dimension and the backward one strided in-place add per window offset. No new
// kernels. Not here: padding, dilation, ceil_mode.
#include "autograd/function.hpp"
#include "autograd/functions.hpp"
#include "tensor/ops.hpp"

namespace ddp {

namespace {

// Sizes of one max pooling: input (B, C, H, W), square window k, stride s.
struct PoolShape {
  std::int64_t B = 0, C = 0, H = 0, W = 0, k = 1, stride = 1, Ho = 0, Wo = 0;
};

// The view of x whose element (b, c, ho, wo, i, j) is x[b, c, ho*s + i, wo*s + j]:
// window (ho, wo) of every image and channel, as two extra dimensions.
Tensor windows(const Tensor& x, const PoolShape& p) {
  const std::int64_t sB = x.stride(0), sC = x.stride(1), sH = x.stride(2), sW = x.stride(3);
  return x.as_strided({p.B, p.C, p.Ho, p.Wo, p.k, p.k},
                      {sB, sC, p.stride * sH, p.stride * sW, sH, sW}, x.offset());
}

// ---- max pooling -----------------------------------------------------------------------
// The gradient of a window's maximum goes to the element that was the maximum (the
// first one, on ties), as in PyTorch. The forward keeps argmax: (B, C, Ho, Wo) indices
// i*k + j into the window. The backward walks the k*k window offsets; for offset (i, j)
// the input pixels it covers form the view x[:, :, i::s, j::s] (Ho x Wo of them), and
// each receives g where argmax == i*k + j, else 0. Overlapping windows (s < k) meet the
// same pixel from several offsets: the adds accumulate, as they must.
struct MaxPool2dBackward final : Node {
  PoolShape p;
  Tensor argmax;  // int64 (B, C, Ho, Wo), values in [0, k*k)
  std::vector<Tensor> backward(const Tensor& g) override {  // g: (B, C, Ho, Wo)
    Tensor gx = zeros({p.B, p.C, p.H, p.W}, {g.dtype(), g.device()});
    const std::int64_t sB = gx.stride(0), sC = gx.stride(1), sH = gx.stride(2);
    const std::int64_t sW = gx.stride(3);
    for (std::int64_t i = 0; i < p.k; ++i) {
      for (std::int64_t j = 0; j < p.k; ++j) {
        Tensor routed = ddp::binary(BinaryOp::Eq, argmax, static_cast<double>(i * p.k + j));
        routed.mul_(g);  // g where this offset held the maximum, 0 elsewhere
        Tensor pixels = gx.as_strided({p.B, p.C, p.Ho, p.Wo},
                                      {sB, sC, p.stride * sH, p.stride * sW}, i * sH + j * sW);
        pixels.add_(routed);
      }
    }
    return {gx};
  }
  const char* name() const override { return "MaxPool2dBackward"; }
  void release_saved() override { argmax = Tensor(); }
};

// ---- global average pooling: each of the H*W inputs gets 1/(H*W) of the gradient -------
struct GlobalAvgPool2dBackward final : Node {
  Shape input_shape;  // (B, C, H, W)
  std::vector<Tensor> backward(const Tensor& g) override {  // g: (B, C)
    const Shape& s = input_shape;
    const double area = static_cast<double>(s[2] * s[3]);
    return {ddp::mul(g, 1.0 / area).view({s[0], s[1], 1, 1}).expand(s).contiguous()};
  }
  const char* name() const override { return "GlobalAvgPool2dBackward"; }
};

}  // namespace

// x: (B, C, H, W) -> (B, C, (H - k) / s + 1, (W - k) / s + 1).
Variable max_pool2d(const Variable& x, std::int64_t kernel, std::int64_t stride) {
  DDP_CHECK(x.dim() == 4, "max_pool2d: expected x (B, C, H, W), got ", x.data().describe());
  DDP_CHECK(kernel >= 1 && stride >= 1 && kernel <= x.size(2) && kernel <= x.size(3),
            "max_pool2d: kernel ", kernel, " and stride ", stride, " do not fit x ",
            x.data().describe(), " (need 1 <= kernel <= H, W and stride >= 1)");
  PoolShape p;
  p.B = x.size(0), p.C = x.size(1), p.H = x.size(2), p.W = x.size(3);
  p.k = kernel, p.stride = stride;
  p.Ho = (p.H - kernel) / stride + 1;
  p.Wo = (p.W - kernel) / stride + 1;
  // (B, C, Ho, Wo, k, k) -> (B, C, Ho, Wo, k*k): one copy, then two reductions over the
  // last, contiguous, dimension.
  const Tensor flat = windows(x.data(), p).reshape({p.B, p.C, p.Ho, p.Wo, p.k * p.k});
  Tensor y = ddp::max(flat, -1);
  return make_result(std::move(y), {x}, [&] {
    auto node = std::make_shared<MaxPool2dBackward>();
    node->p = p;
    node->argmax = ddp::argmax(flat, -1);  // only computed when a backward will need it
    return node;
  });
}

// x: (B, C, H, W) -> (B, C).
Variable global_avg_pool2d(const Variable& x) {
  DDP_CHECK(x.dim() == 4 && x.size(2) * x.size(3) > 0,
            "global_avg_pool2d: expected x (B, C, H, W) with H, W >= 1, got ",
            x.data().describe());
  Tensor y = ddp::mean(x.data().reshape({x.size(0), x.size(1), -1}), 2);
  return make_result(std::move(y), {x}, [&] {
    auto node = std::make_shared<GlobalAvgPool2dBackward>();
    node->input_shape = x.shape();
    return node;
  });
}

}  // namespace ddp
