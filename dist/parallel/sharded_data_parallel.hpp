// ShardedDataParallel: ZeRO stage 2, gradients and optimizer state sharded. Chapter 09.
//
// ZeRO-1 (zero_redundancy_optimizer.hpp) still all-reduces every gradient and keeps all of
// them, though each rank steps only its 1/W. Here each rank keeps only the averaged
// gradients of its shard: backward hands each bucket of gradients to a reduce-scatter
// as soon as the bucket is ready (while backward goes on, as chapter 07's Reducer does with
// its all-reduce), which leaves on rank r the average of slice r only, and the full
// gradients are freed. All-reduce = reduce-scatter + all-gather: the all-gather half now
// moves the updated parameters instead of the gradients, so the bytes on the wire are
// DDP's.
//
//   ShardedDataParallel model(net, group, [](std::vector<Variable> shards) {
//     return std::make_unique<nn::AdamW>(std::move(shards), nn::AdamWOptions{...});
//   });
//   cross_entropy(model(x), y).backward();  // each bucket reduce-scattered when ready
//   model.clip_grad_norm(1.0);              // optional: one all-reduce of a sum of squares
//   model.step();                           // the shards stepped, the parameters all-gathered
//   model.zero_grad();
//
// The buckets are chapter 07's (assign_buckets: reverse registration order, a small first
// bucket), each a FlatParameter padded to a multiple of W; the local optimizer steps one
// Variable per bucket, this rank's slice. Buffers are replicated and broadcast from rank 0
// before each training forward, as DDP does. Every rank runs the same steps (no Join), and
// every parameter gets a gradient in every step.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "autograd/variable.hpp"
#include "base/deadline.hpp"
#include "base/units.hpp"
#include "dist/parallel/broadcast_coalesced.hpp"
#include "dist/parallel/flat_parameter.hpp"
#include "dist/parallel/zero_redundancy_optimizer.hpp"
#include "dist/process_group.hpp"
#include "nn/module.hpp"

namespace ddp {

struct ShardedOptions {
  std::int64_t bucket_cap_bytes = 25 * kMiB;  // as ReducerOptions
  std::int64_t first_bucket_bytes = 1 * kMiB;
  bool broadcast_buffers = true;  // as DDPOptions
  // Each collective waits the group's deadline (ProcessGroup::timeout()).
};

class ShardedDataParallel {
 public:
  // Checks that every rank has the same model (ddp::Error on every rank otherwise), moves
  // its parameters into the buckets' flat buffers, and makes every rank's values rank 0's.
  ShardedDataParallel(std::shared_ptr<nn::Module> module, ProcessGroup& group,
                      const ZeroRedundancyOptimizer::MakeOptimizer& make,
                      ShardedOptions options = {});
  ~ShardedDataParallel();  // removes its hooks
  ShardedDataParallel(const ShardedDataParallel&) = delete;
  ShardedDataParallel& operator=(const ShardedDataParallel&) = delete;

  Variable forward(const Variable& x);
  Variable operator()(const Variable& x) { return forward(x); }

  // Gradient accumulation: backwards under the guard add to the full local gradients and
  // communicate nothing; the next backward outside it reduce-scatters their sum.
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(require_sync_); }

  // The global L2 norm of the averaged gradients, clipped to max_norm as
  // nn::clip_grad_norm does: each rank's sum of squares over its shards, one all-reduce.
  double clip_grad_norm(double max_norm);
  void step();       // the local optimizer on the shards, then all-gather every bucket
  void zero_grad();  // the shards' gradients to zero, and any full gradient freed

  nn::Optimizer& local_optimizer() { return *local_; }
  nn::Module& module() const { return *module_; }
  const std::vector<FlatParameter>& buckets() const { return buckets_; }
  // This rank's averaged gradient of bucket b: (S_b), valid after a synchronising backward.
  const Tensor& shard_gradient(std::size_t b) const { return shards_[b].grad(); }

 private:
  std::string who() const;
  void on_gradient_ready(std::size_t bucket);  // a parameter's hook
  void launch(std::size_t bucket);             // copy into the padded buffer, reduce-scatter
  void complete(std::size_t bucket);           // wait, free its buffer, divide by W
  void finish_backward();                      // complete what is still in flight

  std::shared_ptr<nn::Module> module_;
  ProcessGroup& group_;
  ShardedOptions options_;
  std::vector<FlatParameter> buckets_;
  std::vector<Variable> shards_;  // per bucket: this rank's slice, and its averaged gradient
  std::unique_ptr<nn::Optimizer> local_;
  std::vector<std::pair<Variable, GradReadyHookId>> hooks_;

  // One backward's state.
  bool require_sync_ = true;
  bool expecting_backward_ = false;
  bool callback_queued_ = false;
  std::vector<std::size_t> pending_;  // per bucket: parameters not ready yet
  std::size_t next_launch_ = 0;       // buckets launch in order: Note [Launch order]
  std::vector<Tensor> in_flight_;     // per bucket: the padded gradients being reduced
  std::vector<Tensor> summed_;        // per bucket: the reduce-scatter's output (S_b)
  std::vector<std::shared_ptr<Work>> works_;
};

}  // namespace ddp
