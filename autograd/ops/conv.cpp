// conv2d on Variables: im2col + one GEMM, forward and backward side by side. Chapter 03.
//
// Nothing here is a new kernel: the patches are a strided VIEW of the (padded) input that
// one copy makes contiguous, the convolution is one matmul, and the backward scatters the
// patch gradients back with strided in-place adds. So the same code runs on the CPU and
// on a GPU, at the speed of the GEMM. Not here: groups, dilation, asymmetric padding.
// On the CPU, conv2d() runs the fused twin instead (Note [Fused CPU paths], at the end).
#include "autograd/function.hpp"
#include "autograd/functions.hpp"
#include "autograd/fused_cpu.hpp"
#include "autograd/ops/conv_shape.hpp"
#include "tensor/ops.hpp"

namespace ddp {

namespace {

using detail::ConvShape;

// ==== im2col and col2im, from views ====================================================

// Note [im2col with views]
// Output pixel (b, o, ho, wo) of a convolution is a dot product of the weight row
// W[o, :, :, :] with the patch xp[b, :, ho*s .. ho*s+kh, wo*s .. wo*s+kw] of the padded
// input xp. Put every patch in a column of a matrix `cols` of shape (C*kh*kw, B*Ho*Wo)
// and all outputs come from ONE matmul: (O, C*kh*kw) @ cols -> (O, B*Ho*Wo).
//
// No gather kernel is needed to build cols: with xp's strides (sB, sC, sH, sW), element
// (c, i, j, b, ho, wo) of cols is xp[b, c, ho*s + i, wo*s + j], which sits at
//     offset + c*sC + i*sH + j*sW + b*sB + ho*(s*sH) + wo*(s*sW)
// -- a plain strided view: as_strided({C, kh, kw, B, Ho, Wo},
// {sC, sH, sW, sB, s*sH, s*sW}). Overlapping windows simply read the same element
// twice. contiguous() copies that view into a fresh (C, kh, kw, B, Ho, Wo) buffer,
// which IS the (C*kh*kw, B*Ho*Wo) matrix. The dimension order is chosen for the GEMM:
// the patch index (c, i, j) must match weight.reshape(O, C*kh*kw), and (b, ho, wo) are
// the columns. The price: the GEMM's result is (O, B, Ho, Wo), so one permute+copy
// brings it to (B, O, Ho, Wo).
//
// The backward runs the same view the other way (col2im). dcols = W^T @ dy has the
// layout of cols; its slice dcols[:, i, j] (shape (C, B, Ho, Wo)) is the gradient of
// the input pixels that kernel tap (i, j) read, and those pixels form the view
//     dxp.as_strided({C, B, Ho, Wo}, {sC, sB, s*sH, s*sW}, offset + i*sH + j*sW).
// Within one tap no pixel repeats, so `view += dcols[:, i, j]` is an ordinary in-place
// add. Different taps may hit the same pixel (when s < k): that is why the taps go one
// after the other, kh*kw adds in all, each a full-speed strided elementwise kernel.
//
//     tap (i, j)   cols rows read              dxp pixels written
//     (0, 0)       cols[c, 0, 0, b, ho, wo]    dxp[b, c, ho*s,     wo*s    ]
//     (0, 1)       cols[c, 0, 1, b, ho, wo]    dxp[b, c, ho*s,     wo*s + 1]
//     (i, j)       cols[c, i, j, b, ho, wo]    dxp[b, c, ho*s + i, wo*s + j]
//
// Padding is a zero border copied around x (forward) and cut off the gradient
// (backward): simple, at the cost of one padded-size buffer each way.

// x: (B, C, H, W) -> (B, C, Hp, Wp) with `padding` zeros around each image. Without
// padding, x itself (any strides: the im2col view below uses them as they are).
Tensor pad_input(const Tensor& x, const ConvShape& s) {
  if (s.padding == 0) return x;
  Tensor xp = zeros({s.B, s.C, s.Hp, s.Wp}, {x.dtype(), x.device()});
  xp.narrow(2, s.padding, s.H).narrow(3, s.padding, s.W).copy_(x);
  return xp;
}

// xp: (B, C, Hp, Wp), any strides -> cols: (C*kh*kw, B*Ho*Wo), contiguous.
Tensor im2col(const Tensor& xp, const ConvShape& s) {
  const std::int64_t sB = xp.stride(0), sC = xp.stride(1), sH = xp.stride(2), sW = xp.stride(3);
  const Tensor patches = xp.as_strided({s.C, s.kh, s.kw, s.B, s.Ho, s.Wo},
                                       {sC, sH, sW, sB, s.stride * sH, s.stride * sW},
                                       xp.offset());
  return patches.contiguous().view({s.K(), s.B * s.L()});
}

// dcols: (C*kh*kw, B*Ho*Wo) -> dx: (B, C, H, W), summing what overlapping taps read.
Tensor col2im(const Tensor& dcols, const ConvShape& s) {
  Tensor dxp = zeros({s.B, s.C, s.Hp, s.Wp}, {dcols.dtype(), dcols.device()});
  const std::int64_t sB = dxp.stride(0), sC = dxp.stride(1), sH = dxp.stride(2), sW = dxp.stride(3);
  const Tensor taps = dcols.view({s.C, s.kh, s.kw, s.B, s.Ho, s.Wo});
  for (std::int64_t i = 0; i < s.kh; ++i) {
    for (std::int64_t j = 0; j < s.kw; ++j) {
      Tensor pixels = dxp.as_strided({s.C, s.B, s.Ho, s.Wo},
                                     {sC, sB, s.stride * sH, s.stride * sW},
                                     dxp.offset() + i * sH + j * sW);
      pixels.add_(taps.select(1, i).select(1, j));  // (C, B, Ho, Wo)
    }
  }
  if (s.padding == 0) return dxp;
  return dxp.narrow(2, s.padding, s.H).narrow(3, s.padding, s.W).contiguous();
}

// ==== Backward =========================================================================

// y[b, o] = W2 @ cols[:, b] + bias[o], with W2 = weight as (O, K) and g2 = dy as (O, B*L):
//   dW = g2 @ cols^T        (O, K)       -- needs the cols saved by the forward
//   dcols = W2^T @ g2       (K, B*L)     -- then col2im gives dx
//   db = g2 summed over its columns (O)
struct Conv2dBackward final : Node {
  ConvShape s;
  Tensor cols;    // (K, B*L), saved only when the weight needs a gradient
  Tensor weight;  // (O, C, kh, kw), saved only when x needs a gradient
  std::vector<Tensor> backward(const Tensor& g) override {  // g: (B, O, Ho, Wo)
    const bool want_x = needs_input_grad(0), want_w = needs_input_grad(1);
    const bool want_b = needs_input_grad(2);
    Tensor gx, gw, gb;
    Tensor g2;  // (O, B*L): the one copy of the backward, shared by dW, dx and db
    if (want_x || want_w) g2 = g.permute({1, 0, 2, 3}).reshape({s.O, s.B * s.L()});
    if (want_w) gw = ddp::matmul(g2, cols.t()).view({s.O, s.C, s.kh, s.kw});
    if (want_x) gx = col2im(ddp::matmul(weight.reshape({s.O, s.K()}).t(), g2), s);
    if (want_b) {
      gb = g2.defined() ? ddp::sum(g2, 1)
                        : ddp::sum(ddp::sum(g.reshape({s.B, s.O, s.L()}), 2), 0);
    }
    return {gx, gw, gb};
  }
  const char* name() const override { return "Conv2dBackward"; }
  void release_saved() override { cols = weight = Tensor(); }
};

}  // namespace

// ==== Forward ==========================================================================

// x: (B, C, H, W), weight: (O, C, kh, kw), bias: (O) or undefined -> (B, O, Ho, Wo).
Variable conv2d_views(const Variable& x, const Variable& weight, const Variable& bias,
                      std::int64_t stride, std::int64_t padding) {
  const ConvShape s = detail::conv_shape(x, weight, bias, stride, padding);
  const Tensor cols = im2col(pad_input(x.data(), s), s);                   // (K, B*L)
  const Tensor y2 = ddp::matmul(weight.data().reshape({s.O, s.K()}), cols);  // (O, B*L)
  // (O, B, Ho, Wo) -> (B, O, Ho, Wo). With a bias, the add writes the permuted result
  // in the same pass that would otherwise only copy it.
  const Tensor y_view = y2.view({s.O, s.B, s.Ho, s.Wo}).permute({1, 0, 2, 3});
  Tensor y = bias.defined() ? ddp::add(y_view, bias.data().view({1, s.O, 1, 1}))
                            : y_view.contiguous();
  return make_result(std::move(y), {x, weight, bias}, [&] {
    auto node = std::make_shared<Conv2dBackward>();
    node->s = s;
    // Save only what the backward will read: the first conv of a network has an input
    // that needs no gradient, so its weight is not kept alive for a dx never computed.
    if (weight.requires_grad()) node->cols = cols;
    if (x.requires_grad()) node->weight = weight.data();
    return node;
  });
}

// ==== Choosing the version =============================================================

// Note [Fused CPU paths]
// The code above, batch_norm_composed and relu_composed are the versions the chapter
// teaches: every step is a tensor op, so they run on any device and each line can be
// checked by itself. On the CPU they pay for that with memory traffic: conv2d's patch
// matrix for the whole batch (57 MB in block1 at batch 128) lives outside the caches;
// batch_norm makes about ten passes over (B, C, H, W) tensors, each with a fresh
// temporary; relu's backward makes a 0/1 mask, then multiplies. A ResNet-MNIST training
// step (1 thread, batch 128, bench_train_step) took 2.5x as long as PyTorch's, conv 3x3
// being 69 % of it and batch norm 23 %.
// For float32 tensors in host memory, conv2d(), batch_norm() and relu() therefore call
// fused versions (autograd/fused_cpu.hpp): the same mathematics, arranged to touch each
// value as few times as possible (Note [Convolution one image at a time], conv_cpu.cpp;
// batch_norm_cpu.cpp; relu_cpu.cpp). They have the same checks and the same gradchecks
// (tests/ch03, which call conv2d() & co.), and tests/ch03/test_fused_cpu.cpp compares
// each one, forward and backward, with its textbook twin called by name. The results
// agree up to float rounding: the order of the additions differs. A training step took
// about a third of the time afterwards (bench/README.md, "Chapter 03: the fused CPU paths").
bool fused_cpu_applies(const Tensor& x) {
  return x.defined() && !x.is_cuda() && x.dtype() == DType::Float32;
}

Variable conv2d(const Variable& x, const Variable& weight, const Variable& bias,
                std::int64_t stride, std::int64_t padding) {
  if (fused_cpu_applies(x.data())) return conv2d_cpu(x, weight, bias, stride, padding);
  return conv2d_views(x, weight, bias, stride, padding);
}

}  // namespace ddp
