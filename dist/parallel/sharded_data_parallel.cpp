// ShardedDataParallel (see sharded_data_parallel.hpp): the buckets, the reduce-scatter in
// backward, and the step.
#include "dist/parallel/sharded_data_parallel.hpp"

#include <numeric>
#include <utility>

#include "autograd/engine.hpp"
#include "autograd/grad_mode.hpp"
#include "base/error.hpp"
#include "dist/parallel/reducer.hpp"
#include "dist/parallel/replica_check.hpp"
#include "dist/parallel/shard_trace.hpp"
#include "tensor/memory.hpp"

namespace ddp {

// ---- Construction ---------------------------------------------------------------------

ShardedDataParallel::ShardedDataParallel(std::shared_ptr<nn::Module> module,
                                         ProcessGroup& group,
                                         const ZeroRedundancyOptimizer::MakeOptimizer& make,
                                         ShardedOptions options)
    : module_(std::move(module)), group_(group), options_(options) {
  DDP_CHECK(module_ != nullptr, "ShardedDataParallel: null module");
  check_same_model(*module_, group_, "ShardedDataParallel");  // or an error on every rank
  const std::vector<Variable> parameters = module_->parameters();
  DDP_CHECK(!parameters.empty(), who(), ": the model has no parameters");

  // Chapter 07's buckets: gradients come last layer first.
  std::vector<std::int64_t> bytes;
  for (const Variable& p : parameters) bytes.push_back(4 * p.numel());
  std::vector<std::size_t> order(parameters.size());
  std::iota(order.rbegin(), order.rend(), std::size_t{0});
  const auto assignment =
      assign_buckets(bytes, order, options_.first_bucket_bytes, options_.bucket_cap_bytes);

  NoGradGuard no_grad;
  buckets_.reserve(assignment.size());
  for (const std::vector<std::size_t>& members : assignment) {
    std::vector<Variable> bucket;
    for (std::size_t i : members) bucket.push_back(parameters[i]);
    buckets_.emplace_back(std::move(bucket), group_.rank(), group_.size());
    // rank 0's values everywhere: one broadcast of the whole flat buffer
    group_.broadcast(buckets_.back().flat(), /*root=*/0)->wait();
  }
  broadcast_buffers(*module_, group_, /*root=*/0);

  // Per bucket: this rank's slice, with a gradient of its own (the averaged shard).
  for (const FlatParameter& bucket : buckets_) {
    Variable shard(bucket.shard(), /*requires_grad=*/true);
    shard.set_grad(zeros_like(shard.data()));
    shards_.push_back(shard);
  }
  local_ = make(shards_);
  DDP_CHECK(local_ != nullptr, who(), ": the MakeOptimizer function returned no optimizer");

  pending_.assign(buckets_.size(), 0);
  in_flight_.resize(buckets_.size());
  summed_.resize(buckets_.size());
  works_.resize(buckets_.size());
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    for (const Variable& p : buckets_[b].parameters()) {
      const GradReadyHookId id =
          p.register_grad_ready_hook([this, b](const Variable&) { on_gradient_ready(b); });
      hooks_.emplace_back(p, id);
    }
  }
}

ShardedDataParallel::~ShardedDataParallel() {
  for (const auto& [p, id] : hooks_) p.remove_grad_ready_hook(id);
}

std::string ShardedDataParallel::who() const {
  return group_.who("ShardedDataParallel");
}

// ---- Forward, and the reduce-scatter in backward -----------------------------------------

Variable ShardedDataParallel::forward(const Variable& x) {
  const bool trains = grad_enabled() && module_->is_training();
  if (options_.broadcast_buffers && trains) {
    broadcast_buffers(*module_, group_, /*root=*/0);
  }
  Variable output = (*module_)(x);
  if (grad_enabled()) {
    DDP_CHECK(!(expecting_backward_ && callback_queued_), who(),
              ": a forward while the last backward has not finished");
    expecting_backward_ = require_sync_;
    callback_queued_ = false;
    next_launch_ = 0;
    for (std::size_t b = 0; b < buckets_.size(); ++b) {
      pending_[b] = buckets_[b].parameters().size();
    }
  }
  return output;
}

void ShardedDataParallel::on_gradient_ready(std::size_t bucket) {
  if (!expecting_backward_) return;  // under no_sync: the gradients just accumulate
  if (!callback_queued_) {
    callback_queued_ = true;
    queue_backward_callback([this] { finish_backward(); });
  }
  DDP_CHECK(pending_[bucket] > 0, who(), ": bucket ", bucket,
            " got more gradients than it has parameters in one backward");
  --pending_[bucket];
  // Note [Launch order] (reducer.cpp): strictly in bucket order, on every rank.
  while (next_launch_ < buckets_.size() && pending_[next_launch_] == 0) launch(next_launch_++);
}

void ShardedDataParallel::launch(std::size_t b) {
  FlatParameter& bucket = buckets_[b];
  const memory::Scope communication(memory::Category::Communication);
  Tensor padded = empty({bucket.layout().padded_numel()}, {.device = bucket.flat().device()});
  bucket.copy_gradients(padded, who());
  for (const Variable& p : bucket.parameters()) p.zero_grad();  // the full gradients go
  // Into a buffer of its own, added to the shard's gradient when done: a second backward
  // without zero_grad adds to the first, as DDP's gradients do.
  Tensor summed = empty({bucket.layout().shard_numel}, {.device = bucket.flat().device()});
  works_[b] = group_.reduce_scatter(summed, padded, ReduceOp::Sum);
  trace_shard_event("reduce-scatter", b);
  in_flight_[b] = std::move(padded);  // kept until the reduce-scatter is done
  summed_[b] = std::move(summed);
  // Wait for the bucket before this one here, inside backward: its padded buffer can go
  // then, so that the buffers in flight never add up to all the gradients. The ring runs
  // the collectives in order, so it is done or nearly; the wait costs a little overlap.
  if (b > 0 && works_[b - 1]) complete(b - 1);
}

void ShardedDataParallel::complete(std::size_t b) {
  {
    const TracedWait traced("reduce-scatter", b);
    works_[b]->wait();
  }
  works_[b].reset();
  in_flight_[b] = Tensor();
  // The sum over ranks -> the average, added to what the shard's gradient held.
  Tensor(shards_[b].grad()).add_(summed_[b], 1.0f / static_cast<float>(group_.size()));
  summed_[b] = Tensor();
}

void ShardedDataParallel::finish_backward() {
  expecting_backward_ = false;
  DDP_CHECK(next_launch_ == buckets_.size(), who(), ": backward ended with bucket ",
            next_launch_, " of ", buckets_.size(),
            " not ready: a parameter got no gradient (sharded training needs every one)");
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    if (works_[b]) complete(b);
  }
}

// ---- The step -----------------------------------------------------------------------------

double ShardedDataParallel::clip_grad_norm(double max_norm) {
  return clip_shard_gradients(shards_, max_norm, group_);
}

void ShardedDataParallel::step() {
  NoGradGuard no_grad;
  local_->step();
  std::vector<Tensor> sends;
  std::vector<std::shared_ptr<Work>> gathers;
  const memory::Scope communication(memory::Category::Communication);
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    Tensor send = shards_[b].data().clone();  // the input must not alias the output
    gathers.push_back(group_.all_gather(buckets_[b].flat(), send));
    trace_shard_event("gather", b);
    sends.push_back(std::move(send));
  }
  for (std::size_t b = 0; b < gathers.size(); ++b) {
    const TracedWait traced("gather", b);
    gathers[b]->wait();
  }
}

void ShardedDataParallel::zero_grad() {
  for (const Variable& shard : shards_) Tensor(shard.grad()).zero_();
  for (const FlatParameter& bucket : buckets_) {
    for (const Variable& p : bucket.parameters()) p.zero_grad();
  }
}

}  // namespace ddp
