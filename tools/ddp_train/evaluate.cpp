// Evaluation: the test loss and accuracy after every epoch, in eval mode and without
// gradients. Chapter 04; chapter 06 gives each rank a shard of the test set and sums the
// results over the ranks (sum_over_ranks), so that every rank reports the whole test set;
// under FSDP (chapter 09) the model evaluates unit by unit, as it trains.
#include "tools/ddp_train/trainer.hpp"

#include <cstdint>
#include <vector>

#include "autograd/functions.hpp"
#include "autograd/grad_mode.hpp"
#include "dist/parallel/ledger.hpp"
#include "tensor/ops.hpp"

namespace ddp::train {

Evaluation Trainer::evaluate() {
  trace::Span span("evaluation", "evaluation");  // not compute: outside the summary
  const ledger::Label label(detail::concat("evaluation after epoch ", epoch_ + 1));
  // The last training forward updated every rank's running statistics from its own
  // shard: rank 0's go to all first, so that the ranks evaluate one model, the one rank 0
  // saves (with --no-broadcast-buffers each rank keeps its own, as asked).
  if (ddp_ && options_.broadcast_buffers) ddp_->sync_buffers();
  if ((zero2_ || fsdp_) && options_.broadcast_buffers) {
    broadcast_buffers(*model_, *group_, /*root=*/0);
  }
  model_->eval();
  NoGradGuard no_grad;
  Evaluation e;
  // Each rank evaluates every world_size-th image, no padding (ShardSampler): sums over the
  // ranks are sums over the test set, each image counted once.
  ShardSampler order(test_set_.size(), world_size(), rank());
  DataLoader loader(test_set_, order, options_.eval_batch_size, /*drop_last=*/false, device_);
  double loss_sum = 0.0;
  std::int64_t correct = 0, total = 0;
  // Through FSDP, which gathers each unit for its forward; the other wrappers' parameters
  // are all here, and their forward does nothing more without gradients.
  auto evaluate_forward = [this](const Tensor& images) {
    return fsdp_ ? (*fsdp_)(Variable(images)) : (*model_)(Variable(images));
  };
  std::int64_t forwards = 0;
  for (Batch& batch : loader) {
    ++forwards;
    Variable logits = evaluate_forward(batch.images);
    const std::int64_t b = batch.labels.numel();
    loss_sum += static_cast<double>(cross_entropy(logits, batch.labels).data().item<float>()) *
                static_cast<double>(b);
    correct +=
        static_cast<std::int64_t>(sum(eq(argmax(logits.data(), 1), batch.labels)).item<float>());
    total += b;
  }
  // FSDP gathers unit by unit in every forward, collectives every rank must call: a rank
  // whose shard has a batch fewer (the shards differ by one image at most) runs one forward
  // more, on one image, and ignores it.
  if (fsdp_) {
    const std::int64_t largest_shard = (test_set_.size() + world_size() - 1) / world_size();
    const std::vector<std::int64_t> first{0};
    const std::int64_t batch = options_.eval_batch_size;
    for (; forwards < (largest_shard + batch - 1) / batch; ++forwards) {
      evaluate_forward(test_set_.get_batch(first, device_).images);
    }
  }
  std::vector<double> losses{loss_sum};
  std::vector<std::int64_t> counts{correct, total};
  sum_over_ranks(losses, counts);
  e.correct = counts[0];
  e.total = counts[1];
  e.loss = losses[0] / static_cast<double>(e.total);
  model_->train();
  return e;
}

void Trainer::evaluate_into(EpochResult& result) {
  const Evaluation e = evaluate();
  result.test_loss = e.loss;
  result.test_correct = e.correct;
  result.test_total = e.total;
  result.test_accuracy = 100.0 * static_cast<double>(e.correct) / static_cast<double>(e.total);
}

}  // namespace ddp::train
