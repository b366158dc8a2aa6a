// SyncBatchNorm2d (see sync_batch_norm.hpp). Chapter 06.
#include "dist/parallel/sync_batch_norm.hpp"

#include "autograd/function.hpp"
#include "autograd/functions.hpp"
#include "autograd/ops/batch_norm_check.hpp"
#include "tensor/ops.hpp"

namespace ddp {

namespace {

using detail::channel_sum;
using detail::per_channel;

// Sums (C) of every rank, all-reduced in place; waits for the result.
void all_reduce_sum(ProcessGroup& group, Tensor& t) { group.all_reduce(t, ReduceOp::Sum)->wait(); }

// Note [Synchronised batch statistics]
// One process with the whole batch computes, per channel over its N values,
//     mean = sum(x) / N,   var = sum((x - mean)^2) / N.
// Split over ranks, both sums are sums of per-rank sums, so two all-reduces give the
// very same statistics: first (sum(x), n) of every rank, which gives N and mean; then
// sum((x - mean)^2) about that global mean. The textbook single round, sum(x) and
// sum(x^2) together with var = E[x^2] - mean^2, saves one round trip but loses every
// digit when the mean is large next to the spread (the reason chapter 03 takes two
// passes as well); PyTorch instead gathers each rank's (count, mean, var) and merges them
// with Chan's formula. Two small all-reduces (C + 1 and C floats) keep the math the same
// as chapter 03's. The count travels as a float32: exact up to 2^24 values per channel.
//
// Backward (Note [The batch-norm backward]): dx = k * (g - db / N - xhat * dw / N) needs
// db = sum(g) and dw = sum(g * xhat) over the WHOLE batch, since every x moved the global
// mean and variance; one all-reduce of both. Each rank's loss only sees its own y, so g is
// d(loss_r)/dy and the all-reduced sums give d(sum_r loss_r)/dx: DDP's average over ranks
// then turns every upstream gradient into that of the global mean loss. The parameter
// gradients (dw, db) stay local: DDP averages them like every other parameter's.
struct SyncBatchNormBackward final : Node {
  Tensor xc;      // x - global mean: (B_r, C, H, W)
  Tensor rstd;    // (C)
  Tensor weight;  // (C), or undefined (w = 1)
  double n = 0;   // values per channel over all ranks
  ProcessGroup* group = nullptr;
  std::vector<Tensor> backward(const Tensor& g) override {  // g: (B_r, C, H, W)
    const std::int64_t c = g.size(1);
    // Local sums, side by side in one (2C) tensor: one all-reduce for both.
    Tensor sums = empty({2 * c}, TensorOptions{.dtype = DType::Float32, .device = g.device()});
    Tensor local_gb = sums.narrow(0, 0, c);
    Tensor local_gxc = sums.narrow(0, c, c);
    local_gb.copy_(channel_sum(g));
    local_gxc.copy_(channel_sum(ddp::mul(g, xc)));
    const Tensor gb = local_gb.clone();           // bias gradient: local
    const Tensor gw = ddp::mul(local_gxc, rstd);  // weight gradient: local
    all_reduce_sum(*group, sums);
    // dx = k * (g - sum(g) / N - xc * rstd^2 * sum(g * xc) / N), k = w * rstd
    const Tensor k = weight.defined() ? ddp::mul(weight, rstd) : rstd;
    const Tensor slope = ddp::mul(ddp::mul(ddp::square(rstd), sums.narrow(0, c, c)), 1.0 / n);
    Tensor gx = ddp::sub(g, per_channel(ddp::mul(sums.narrow(0, 0, c), 1.0 / n)));
    gx.sub_(ddp::mul(xc, per_channel(slope)));
    gx.mul_(per_channel(k));
    return {gx, needs_input_grad(1) ? gw : Tensor(), needs_input_grad(2) ? gb : Tensor()};
  }
  const char* name() const override { return "SyncBatchNormBackward"; }
  void release_saved() override { xc = rstd = weight = Tensor(); }
};

}  // namespace

Variable sync_batch_norm(const Variable& x, const Variable& weight, const Variable& bias,
                         Tensor& running_mean, Tensor& running_var, double momentum, double eps,
                         ProcessGroup& group) {
  detail::check_batch_norm(x, weight, bias, running_mean, running_var, /*training=*/true);
  const Tensor& xd = x.data();
  const std::int64_t c = xd.size(1);
  const TensorOptions floats{.dtype = DType::Float32, .device = xd.device()};
  // Round 1: (sum(x) per channel, this rank's count) -> global mean. Note above.
  Tensor sum_and_count = empty({c + 1}, floats);
  sum_and_count.narrow(0, 0, c).copy_(channel_sum(xd));
  sum_and_count.narrow(0, c, 1).fill_(static_cast<double>(xd.numel() / c));
  all_reduce_sum(group, sum_and_count);
  const double n = static_cast<double>(sum_and_count.narrow(0, c, 1).item<float>());
  DDP_CHECK(n > 1, group.who("sync_batch_norm"),
            ": training needs more than one value per channel over all ", group.size(),
            " ranks, got ", n, "\nhint: use a larger batch");
  const Tensor mean = ddp::mul(sum_and_count.narrow(0, 0, c), 1.0 / n);
  // Round 2: sum((x - mean)^2) about the global mean -> the global (biased) variance.
  Tensor xc = ddp::sub(xd, per_channel(mean));
  Tensor square_sum = channel_sum(ddp::square(xc));
  all_reduce_sum(group, square_sum);
  const Tensor var = ddp::mul(square_sum, 1.0 / n);
  if (running_mean.defined()) {
    detail::update_running_stats(running_mean, running_var, mean, var, static_cast<std::int64_t>(n),
                                 momentum);
  }
  Tensor rstd = ddp::rsqrt(ddp::add(var, eps));  // (C)
  const Tensor scale = weight.defined() ? ddp::mul(weight.data(), rstd) : rstd;
  Tensor y = ddp::mul(xc, per_channel(scale));
  if (bias.defined()) y.add_(per_channel(bias.data()));
  return make_result(std::move(y), {x, weight, bias}, [&] {
    auto node = std::make_shared<SyncBatchNormBackward>();
    node->xc = std::move(xc);
    node->rstd = std::move(rstd);
    if (weight.defined()) node->weight = weight.data();
    node->n = n;
    node->group = &group;
    return node;
  });
}

// ---- The module ----------------------------------------------------------------------

SyncBatchNorm2d::SyncBatchNorm2d(std::int64_t num_features, ProcessGroup& group, double eps,
                                 double momentum)
    : BatchNorm2d(num_features, eps, momentum), group_(group) {}

Variable SyncBatchNorm2d::forward(const Variable& x) {
  if (!is_training()) return BatchNorm2d::forward(x);  // running statistics: nothing to sync
  DDP_CHECK(x.dim() == 4 && x.size(1) == num_features_, describe(), ": expected input (B, ",
            num_features_, ", H, W), got ", x.data().describe());
  return sync_batch_norm(x, weight_, bias_, running_mean_.data(), running_var_.data(), momentum_,
                         eps_, group_);
}

std::string SyncBatchNorm2d::describe() const {
  return detail::concat("SyncBatchNorm2d(", num_features_, ", ", group_.size(), " ranks)");
}

// ---- Converting a model --------------------------------------------------------------

int convert_sync_batchnorm(nn::Module& module, ProcessGroup& group) {
  int replaced = 0;
  for (const auto& [name, child] : module.children()) {
    if (dynamic_cast<SyncBatchNorm2d*>(child.get()) != nullptr) continue;  // done already
    auto* bn = dynamic_cast<nn::BatchNorm2d*>(child.get());
    if (bn == nullptr) {
      replaced += convert_sync_batchnorm(*child, group);  // look further down
      continue;
    }
    auto sync =
        std::make_shared<SyncBatchNorm2d>(bn->num_features(), group, bn->eps(), bn->momentum());
    sync->load_state_dict(bn->state_dict(), "the BatchNorm2d it replaces");
    sync->train(bn->is_training());
    sync->to(bn->weight().device());
    const std::string child_name = name;  // replace_child reassigns the entry we read
    module.replace_child(child_name, std::move(sync));
    ++replaced;
  }
  return replaced;
}

}  // namespace ddp
