// batch_norm on Variables, forward and backward side by side. Chapter 03.
//
// For each channel c, over its N = B*H*W values:
//     y = (x - mean) * rstd * w[c] + b[c],     rstd = 1 / sqrt(var + eps)
// where (mean, var) are the batch's statistics in training and the running ones in
// evaluation. Everything is tensor ops over (B, C, H, W) with (C)-shaped statistics
// broadcast as (1, C, 1, 1). Not here: (B, C) inputs (BatchNorm1d), and statistics
// synchronised across ranks (SyncBatchNorm): under DDP each rank normalises its own batch.
// On the CPU, batch_norm() runs the fused twin, batch_norm_cpu.cpp (Note [Fused CPU paths]).
#include <algorithm>

#include "autograd/function.hpp"
#include "autograd/functions.hpp"
#include "autograd/fused_cpu.hpp"
#include "autograd/ops/batch_norm_check.hpp"
#include "tensor/ops.hpp"

namespace ddp {

namespace detail {

// t: (B, C, H, W) -> (C), the sum over batch and space. Seen as (B, C, H*W), that is two
// plain reductions: over the pixels (dim 2), then over the batch (dim 0).
Tensor channel_sum(const Tensor& t) {
  return ddp::sum(ddp::sum(t.reshape({t.size(0), t.size(1), -1}), 2), 0);
}

Tensor per_channel(const Tensor& v) { return v.view({1, v.size(0), 1, 1}); }

}  // namespace detail

namespace {

using detail::channel_sum;
using detail::per_channel;

// Note [The batch-norm backward]
// With xhat = (x - mean) * rstd and y = xhat * w + b, per channel over its N values:
//     db = sum(g)            dw = sum(g * xhat)
// In evaluation mean and rstd are constants, so dx = g * w * rstd. In training they are
// functions of x, and every x of the channel moves every y of the channel. The chain
// rule through mean and var collapses to the well-known closed form
//     dx = rstd / N * (N * dxhat - sum(dxhat) - xhat * sum(dxhat * xhat)),  dxhat = g * w.
// Since w is constant per channel, sum(dxhat) = w * db and sum(dxhat * xhat) = w * dw,
// so with k = w * rstd:
//     dx = k * (g - db / N - xhat * dw / N)
// The two subtracted terms are what the normalisation takes away: the gradient's mean
// (shifting x shifts the mean; y does not move) and its projection on xhat (scaling x
// scales the std; y does not move). Drop either and gradcheck fails (tests/ch03).
// We save xc = x - mean rather than xhat: xhat = xc * rstd is folded into the (C)-sized
// factors, which saves one full pass in the forward.
struct BatchNormBackward final : Node {
  Tensor xc;      // x - mean: (B, C, H, W)
  Tensor rstd;    // (C)
  Tensor weight;  // (C), or undefined (no affine weight: w = 1)
  bool training = true;
  std::vector<Tensor> backward(const Tensor& g) override {  // g: (B, C, H, W)
    const bool want_x = needs_input_grad(0), want_w = needs_input_grad(1);
    const bool want_b = needs_input_grad(2);
    const double n = static_cast<double>(g.numel() / g.size(1));
    Tensor gx, gw, gb;
    if (want_b || (want_x && training)) gb = channel_sum(g);
    if (want_w || (want_x && training)) gw = ddp::mul(channel_sum(ddp::mul(g, xc)), rstd);
    if (want_x) {
      const Tensor k = weight.defined() ? ddp::mul(weight, rstd) : rstd;  // (C)
      if (training) {
        // xhat * dw / N = xc * (rstd * dw / N): the slope is per channel.
        const Tensor slope = ddp::mul(ddp::mul(rstd, gw), 1.0 / n);
        gx = ddp::sub(g, per_channel(ddp::mul(gb, 1.0 / n)));
        gx.sub_(ddp::mul(xc, per_channel(slope)));
        gx.mul_(per_channel(k));
      } else {
        gx = ddp::mul(g, per_channel(k));
      }
    }
    return {gx, want_w ? gw : Tensor(), want_b ? gb : Tensor()};
  }
  const char* name() const override { return "BatchNormBackward"; }
  void release_saved() override { xc = rstd = weight = Tensor(); }
};

}  // namespace

namespace detail {

namespace {

void check_stat(const Tensor& stat, const char* what, const Tensor& x) {
  DDP_CHECK(stat.dtype() == DType::Float32 && stat.dim() == 1 && stat.size(0) == x.size(1) &&
                stat.device() == x.device(),
            "batch_norm: ", what, " is ", stat.describe(), ", expected float32 ",
            shape_str({x.size(1)}), " on ", x.device().str(), " for x ", x.describe());
}

}  // namespace

// The checks of batch_norm() (both versions); returns N, the values per channel.
std::int64_t check_batch_norm(const Variable& x, const Variable& weight, const Variable& bias,
                              const Tensor& running_mean, const Tensor& running_var,
                              bool training) {
  DDP_CHECK(x.dim() == 4, "batch_norm: expected x (B, C, H, W), got ", x.data().describe());
  if (weight.defined()) check_stat(weight.data(), "weight", x.data());
  if (bias.defined()) check_stat(bias.data(), "bias", x.data());
  const bool has_running = running_mean.defined() || running_var.defined();
  if (has_running || !training) {
    DDP_CHECK(running_mean.defined() && running_var.defined(),
              "batch_norm: ", training ? "running_mean and running_var must both be given"
                                       : "evaluation mode needs running_mean and running_var");
    check_stat(running_mean, "running_mean", x.data());
    check_stat(running_var, "running_var", x.data());
  }
  const Tensor& xd = x.data();
  const std::int64_t n = xd.numel() / std::max<std::int64_t>(xd.size(1), 1);
  if (training) {
    DDP_CHECK(n > 1, "batch_norm: training needs more than one value per channel, got x ",
              xd.describe(), "\nhint: use a batch larger than 1, or evaluation mode");
  }
  return n;
}

void update_running_stats(Tensor& running_mean, Tensor& running_var, const Tensor& mean,
                          const Tensor& var, std::int64_t n, double momentum) {
  // PyTorch's rule: running = (1 - momentum) * running + momentum * batch, with the
  // UNBIASED variance (N / (N - 1)) although the batch is normalised with the biased
  // one. Plain tensor ops on plain tensors: nothing here joins the graph.
  const auto m = static_cast<float>(momentum);
  running_mean.mul_(1.0f - m).add_(mean, m);
  running_var.mul_(1.0f - m).add_(var, m * static_cast<float>(n) / static_cast<float>(n - 1));
}

}  // namespace detail

// x: (B, C, H, W), weight/bias: (C) or undefined -> (B, C, H, W).
Variable batch_norm_composed(const Variable& x, const Variable& weight, const Variable& bias,
                             Tensor& running_mean, Tensor& running_var, bool training,
                             double momentum, double eps) {
  const std::int64_t n = detail::check_batch_norm(x, weight, bias, running_mean, running_var,
                                                  training);
  const Tensor& xd = x.data();
  const bool has_running = running_mean.defined() || running_var.defined();
  Tensor mean, var;
  if (training) {
    mean = ddp::mul(channel_sum(xd), 1.0 / static_cast<double>(n));
  } else {
    mean = running_mean;
  }
  // Two passes (mean first, then the squares of x - mean): E[x^2] - E[x]^2 would lose
  // every digit in float32 when the mean is large next to the spread.
  Tensor xc = ddp::sub(xd, per_channel(mean));
  if (training) {
    var = ddp::mul(channel_sum(ddp::square(xc)), 1.0 / static_cast<double>(n));  // biased
    if (has_running) {
      detail::update_running_stats(running_mean, running_var, mean, var, n, momentum);
    }
  } else {
    var = running_var;
  }
  Tensor rstd = ddp::rsqrt(ddp::add(var, eps));                               // (C)
  const Tensor scale = weight.defined() ? ddp::mul(weight.data(), rstd) : rstd;  // (C)
  Tensor y = ddp::mul(xc, per_channel(scale));
  if (bias.defined()) y.add_(per_channel(bias.data()));

  return make_result(std::move(y), {x, weight, bias}, [&] {
    auto node = std::make_shared<BatchNormBackward>();
    node->xc = std::move(xc);
    node->rstd = std::move(rstd);
    if (weight.defined()) node->weight = weight.data();
    node->training = training;
    return node;
  });
}

// Note [Fused CPU paths] (conv.cpp) explains the choice.
Variable batch_norm(const Variable& x, const Variable& weight, const Variable& bias,
                    Tensor& running_mean, Tensor& running_var, bool training,
                    double momentum, double eps) {
  if (fused_cpu_applies(x.data())) {
    return batch_norm_cpu(x, weight, bias, running_mean, running_var, training, momentum, eps);
  }
  return batch_norm_composed(x, weight, bias, running_mean, running_var, training, momentum,
                             eps);
}

}  // namespace ddp
