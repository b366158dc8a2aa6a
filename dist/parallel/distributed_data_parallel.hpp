// DistributedDataParallel: N processes train one model as if they were one process with
// N times the batch. Chapter 06 builds it, chapter 07 makes it PyTorch's.
//
//   auto model = std::make_shared<nn::ResNetMnist>(gen);        // same seed on every rank
//   DistributedDataParallel ddp(model, *group);                 // check + broadcast rank 0's
//   nn::SGD sgd(model->parameters(), {...});
//   for each batch of this rank's shard (DistributedSampler):
//     Variable loss = cross_entropy(ddp(batch.images), batch.labels);
//     loss.backward();             // Bucketed (the default): averaged in here
//     ddp.average_gradients();     // Flat, PerParameter: all-reduce, / world; Bucketed: a check
//     sgd.step();
//
// Three things make the replicas one model: they start equal (the constructor checks the
// layout on every rank and broadcasts rank 0's values), they see the same gradient (the
// average over ranks, which is the gradient of the mean loss over the global batch), and
// they apply the same update (same optimizer, same learning rate). Chapter 06's
// average_gradients() comes in two versions a reader can compare (GradientSync): one
// all-reduce per parameter, and one of all gradients flattened into a buffer, both after
// backward. Chapter 07's Reducer (reducer.hpp), the default, averages inside backward,
// bucket by bucket, while backward still computes. Chapter 08's Join (join.hpp) lets ranks
// with fewer batches than others finish early; DDP is its Joinable (joinable.hpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "dist/parallel/joinable.hpp"
#include "dist/parallel/broadcast_coalesced.hpp"  // NoSyncGuard
#include "dist/parallel/reducer.hpp"
#include "dist/process_group.hpp"
#include "nn/module.hpp"

namespace ddp {

enum class GradientSync {
  PerParameter,  // one all_reduce per parameter: 29 collectives for the ResNet
  Flat,          // copy every gradient into one buffer, one all_reduce, copy back
  Bucketed,      // chapter 07: the Reducer, bucket by bucket, inside backward
};
const char* to_string(GradientSync sync);  // "per-parameter", "flat", "bucketed"

struct DDPOptions {
  // Before each training forward (grad on, module training), rank 0's buffers (BatchNorm's
  // running statistics) are broadcast to every rank, so that they do not drift apart
  // (PyTorch's default). That forward then updates each rank's copy from its own shard:
  // call sync_buffers() before evaluating, for every rank to evaluate with rank 0's.
  bool broadcast_buffers = true;
  GradientSync gradient_sync = GradientSync::Bucketed;
  // For GradientSync::Bucketed: bucket caps, find_unused_parameters, rebuild.
  ReducerOptions reducer = {};
  // No timeout here: every collective waits the group's deadline (ProcessGroup::timeout(),
  // InitOptions::timeout), as every other wait on that group does.
};

class DistributedDataParallel : public Joinable {
 public:
  // Every rank of `group` constructs it with its own replica of the model. Checks that
  // all replicas have the same parameters and buffers (check_same_model: every rank
  // throws ddp::Error naming the first difference), then broadcasts rank 0's values.
  // `group` must outlive this object.
  DistributedDataParallel(std::shared_ptr<nn::Module> module, ProcessGroup& group,
                          DDPOptions options = {});

  // x -> module(x). With broadcast_buffers, grad mode on and the module training, rank 0's
  // buffers are broadcast first. Bucketed: the Reducer is prepared for the backward of
  // this output (it must come before the next forward). Inside a Join (chapter 08), a
  // forward with grad on first takes part in the join count (Join::notify_join_context);
  // the buffers then come from the lowest rank still training, and the gradients are
  // divided by the Join's divisor.
  Variable forward(const Variable& x);
  Variable operator()(const Variable& x) { return forward(x); }

  // After backward, before the optimizer step: every parameter's gradient becomes the
  // average over the ranks. Every rank must call it after every backward. A parameter
  // without a gradient is an error naming it. Bucketed: backward has done it already;
  // this only checks that it did.
  void average_gradients();

  // Gradient accumulation (PyTorch's no_sync): while the guard lives, forwards prepare
  // backwards that add to the local gradients without communicating. The first forward
  // after it communicates the sum of all of them. Bucketed only. Inside a Join, every
  // rank must use it on the same iterations (the count checks); a rank that has joined
  // contributes zeros to the sum (what it accumulated before it ran out is not sent), and
  // the divisor is the one counted at the synchronising forward (join.hpp).
  //   { auto guard = ddp.no_sync(); for k < K-1: backward(loss_k / K); }
  //   backward(loss_{K-1} / K);  // averages the K micro-batches' gradients over the ranks
  [[nodiscard]] NoSyncGuard no_sync();

  // The Reducer (Bucketed only; ddp::Error otherwise).
  Reducer& reducer() const;

  // Broadcasts rank 0's buffers to every rank (one coalesced broadcast). forward() does it
  // before each training forward; call it before an evaluation too, since that training
  // forward then updated each rank's running statistics from its own shard.
  void sync_buffers();

  // check_parameters_in_sync(): every rank compares a hash of its parameters; throws on
  // every rank, naming the ranks that drifted. `step` is for the message.
  void check_in_sync(std::int64_t step) const;

  nn::Module& module() const { return *module_; }
  const std::shared_ptr<nn::Module>& module_ptr() const { return module_; }
  ProcessGroup& process_group() const { return group_; }
  const DDPOptions& options() const { return options_; }

  // ---- Chapter 08: the Joinable (joinable.hpp), in distributed_data_parallel_join.cpp ----
  // join_hook refuses a model with SyncBatchNorm2d; the device of the parameters, this
  // group.
  std::unique_ptr<JoinHook> join_hook() override;
  Device join_device() const override;
  ProcessGroup& join_process_group() const override;

 private:
  class DDPJoinHook;  // chapter 08: what a joined rank does (PyTorch's _DDPJoinHook)

  // Broadcasts `root`'s buffers (sync_buffers() is root 0).
  void sync_buffers_from(int root);

  // The two versions of average_gradients().
  void average_each_parameter(const std::vector<Tensor>& grads);
  void average_flattened(const std::vector<Tensor>& grads);

  std::shared_ptr<nn::Module> module_;
  ProcessGroup& group_;
  DDPOptions options_;
  std::vector<std::pair<std::string, Variable>> parameters_;  // in registration order
  std::unique_ptr<Reducer> reducer_;                          // Bucketed only
  bool require_sync_ = true;                                  // false under no_sync()
  // What the gradients' sum is divided by (Flat, PerParameter; the Reducer gets it in
  // prepare_for_backward): the world size, or under a Join what the last forward's count
  // said (Note [Which divisor] in join.cpp).
  int divisor_;
};

}  // namespace ddp
