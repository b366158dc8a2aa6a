// DistributedDataParallel (see distributed_data_parallel.hpp). Chapters 06 and 07; in
// forward, one call of chapter 08's Join (the count); the rest of DDP's part in the Join,
// the Joinable, is distributed_data_parallel_join.cpp's.
#include "dist/parallel/distributed_data_parallel.hpp"

#include <optional>

#include "autograd/grad_mode.hpp"
#include "dist/parallel/join.hpp"
#include "dist/parallel/replica_check.hpp"
#include "base/error.hpp"
#include "base/trace.hpp"

namespace ddp {

const char* to_string(GradientSync sync) {
  switch (sync) {
    case GradientSync::PerParameter:
      return "per-parameter";
    case GradientSync::Flat:
      return "flat";
    case GradientSync::Bucketed:
      return "bucketed";
  }
  return "?";
}

// ---- Construction: one model on every rank -------------------------------------------

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                                 ProcessGroup& group, DDPOptions options)
    : module_(std::move(module)), group_(group), options_(options), divisor_(group.size()) {
  DDP_CHECK(module_ != nullptr, "DistributedDataParallel: null module");
  parameters_ = module_->named_parameters();
  // Same layout everywhere, or a clear error on every rank before any gradient moves.
  check_same_model(*module_, group_);
  // Same values everywhere: rank 0's. (Every rank seeding its own initialisation with the
  // same seed would do too, until one rank's seed or library differs; PyTorch broadcasts.)
  NoGradGuard no_grad;
  std::vector<Tensor> values;
  for (const auto& [name, p] : parameters_) values.push_back(p.data());
  broadcast_coalesced(group_, values, /*root=*/0);
  sync_buffers();
  if (options_.gradient_sync == GradientSync::Bucketed) {
    ReducerOptions reducer = options_.reducer;
    reducer_ = std::make_unique<Reducer>(parameters_, group_, reducer);
  }
}

// ---- Forward -------------------------------------------------------------------------

Variable DistributedDataParallel::forward(const Variable& x) {
  // Only where the forward will train: an evaluation pass (no grad, or eval mode) reads
  // the running statistics but does not need them equal, and skips the collective.
  // Buffers: only where the forward trains. The Reducer: wherever a backward may follow
  // (an eval-mode forward with grad on, e.g. fine-tuning with frozen BatchNorm, too).
  const bool broadcasts = options_.broadcast_buffers && grad_enabled() && module_->is_training();
  int buffer_root = 0;
  divisor_ = group_.size();
  if (grad_enabled()) {
    // Chapter 08: inside a Join, a training iteration starts with the count that tells the
    // joined ranks what to shadow (Note [Counting who still trains] in join.cpp).
    if (const std::optional<JoinRound> round =
            Join::notify_join_context(*this, require_sync_, broadcasts)) {
      buffer_root = round->lowest;
      divisor_ = round->divisor;
    }
  }
  if (broadcasts) sync_buffers_from(buffer_root);
  Variable output = (*module_)(x);
  if (reducer_ && grad_enabled()) reducer_->prepare_for_backward(output, require_sync_, divisor_);
  return output;
}

NoSyncGuard DistributedDataParallel::no_sync() {
  DDP_CHECK(reducer_ != nullptr,
            "DistributedDataParallel::no_sync needs the bucketed "
            "gradient sync (the Reducer); this DDP averages with ",
            to_string(options_.gradient_sync));
  return NoSyncGuard(require_sync_);
}

Reducer& DistributedDataParallel::reducer() const {
  DDP_CHECK(reducer_ != nullptr, "DistributedDataParallel::reducer: this DDP averages with ",
            to_string(options_.gradient_sync), ", not with the Reducer");
  return *reducer_;
}

void DistributedDataParallel::sync_buffers() { sync_buffers_from(/*root=*/0); }

void DistributedDataParallel::sync_buffers_from(int root) {
  broadcast_buffers(*module_, group_, root);
}

// ---- Gradients: the average over ranks -----------------------------------------------

void DistributedDataParallel::average_gradients() {
  if (reducer_) {
    DDP_CHECK(reducer_->finished(), group_.who("DistributedDataParallel::average_gradients"),
              ": the backward of the last forward has not run (or has not "
              "finished): the Reducer averages inside backward");
    return;
  }
  std::vector<Tensor> grads;
  grads.reserve(parameters_.size());
  for (const auto& [name, p] : parameters_) {
    DDP_CHECK(p.grad().defined(), group_.who("DistributedDataParallel::average_gradients"),
              ": parameter '", name, "' has no gradient: the last backward did not reach it"
              "\nhint: every parameter must take part in the loss (unused parameters are "
              "chapter 07's find_unused_parameters)");
    grads.push_back(p.grad());
  }
  NoGradGuard no_grad;
  if (options_.gradient_sync == GradientSync::PerParameter) {
    average_each_parameter(grads);
  } else {
    average_flattened(grads);
  }
}

// Note [Averaging gradients]
// Rank r's loss is the mean over its b images, so its gradient g_r is that of its mean.
// The global batch's mean loss is the mean of the ranks' means (all shards have b images),
// so its gradient is (g_0 + ... + g_{W-1}) / W: an all-reduce (sum) and a division.
// (Inside a Join, chapter 08, the division is by divisor_: Note [Which divisor] in join.cpp.)
// Every rank receives the same sum (a ring reduces each chunk on one rank and passes on
// the result), so every rank applies the same update, bit for bit.

// The plain version: one collective per parameter, all started before the first wait,
// so the group can keep several in flight (Work is what makes that possible).
void DistributedDataParallel::average_each_parameter(const std::vector<Tensor>& grads) {
  std::vector<std::shared_ptr<Work>> pending;
  pending.reserve(grads.size());
  for (Tensor g : grads) pending.push_back(group_.all_reduce(g, ReduceOp::Sum));
  {
    std::optional<trace::Span> wait;  // chapter 07's timeline: all of it exposed
    if (trace::enabled()) wait.emplace("wait", "wait for the all-reduces");
    for (const auto& work : pending) work->wait();
  }
  const float inverse = 1.0f / static_cast<float>(divisor_);  // 1/W outside a Join
  for (Tensor g : grads) g.mul_(inverse);
}

// average_flattened, the flattened version: in average_flattened.cpp (exercise 06.2).

void DistributedDataParallel::check_in_sync(std::int64_t step) const {
  check_parameters_in_sync(*module_, group_, step);
}

}  // namespace ddp
