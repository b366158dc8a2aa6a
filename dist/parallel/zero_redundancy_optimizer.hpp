// ZeroRedundancyOptimizer: ZeRO stage 1, optimizer state sharded over the ranks. Chapter 09.
//
// Under DDP every rank holds the whole optimizer state (AdamW: 8 bytes per parameter, twice
// the parameters themselves) and applies the same update to the same values W times over.
// Here each rank keeps the state of its 1/W shard only, steps that shard, and the updated
// shards are all-gathered, so that every rank ends the step with every parameter:
//
//   DistributedDataParallel ddp(model, group);        // gradients averaged, as before
//   ZeroRedundancyOptimizer zero(model->parameters(), group, [](std::vector<Variable> shard) {
//     return std::make_unique<nn::AdamW>(std::move(shard), nn::AdamWOptions{...});
//   });
//   loss.backward();                                  // every rank: all averaged gradients
//   zero.step();                                      // 1. 2. 3. below
//
// The constructor moves the parameters into one flat buffer, padded to a multiple of the
// world size (ShardLayout), and makes each parameter a view into it, as FSDP's
// FlatParameter does. step() then
//   1. copies this rank's shard of the averaged gradients into a flat shard gradient;
//   2. lets the local optimizer, built by `make` over one Variable that views this rank's
//      slice of the flat buffer, update that slice in place: its state is shard-sized;
//   3. all-gathers the flat buffer from every rank's slice: the parameters are views into
//      it, so every rank's model is up to date when the all-gather is.
// SGD and AdamW are element-wise, so stepping a slice of the flat buffer computes exactly
// what stepping the whole parameters would. PyTorch's ZeroRedundancyOptimizer shards
// whole parameters instead (a greedy partition by size); DeepSpeed's ZeRO shards flat
// buffers, as here, so the state per rank is its shard to within the padding.
// Every parameter must have a gradient at every step: a flat shard cannot skip part of
// itself (a parameter without one is an error naming it). Not inside chapter 08's Join:
// a rank that has joined would not shadow the step's all-gather.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/deadline.hpp"
#include "dist/parallel/flat_parameter.hpp"
#include "dist/process_group.hpp"
#include "nn/optimizer.hpp"

namespace ddp {

class ZeroRedundancyOptimizer final : public nn::Optimizer {
 public:
  // Builds the local optimizer over this rank's shard (one Variable of S elements).
  using MakeOptimizer =
      std::function<std::unique_ptr<nn::Optimizer>(std::vector<Variable> shard)>;

  // `parameters`: float32, all on one device, the same list in the same order on every
  // rank (a model's parameters(), after DDP has made them equal). The all-gather of a
  // step waits the group's deadline (ProcessGroup::timeout()).
  ZeroRedundancyOptimizer(std::vector<Variable> parameters, ProcessGroup& group,
                          const MakeOptimizer& make);

  std::string name() const override { return local_->name(); }
  void step() override;
  void zero_grad() override;  // every parameter's gradient, not only this rank's shard
  double lr() const override { return local_->lr(); }
  void set_lr(double lr) override { local_->set_lr(lr); }
  const std::vector<Variable>& parameters() const override { return parameters_; }
  // This rank's shard of the state (the local optimizer's, "exp_avg.0" of S elements):
  // a checkpoint of a sharded optimizer is one such file per rank.
  nn::StateDict state_dict() const override { return local_->state_dict(); }
  void load_state_dict(const nn::StateDict& state, std::string_view source) override {
    local_->load_state_dict(state, source);
  }

  const ShardLayout& layout() const { return flat_.layout(); }
  const FlatParameter& flat_parameter() const { return flat_; }
  const Tensor& flat_parameters() const { return flat_.flat(); }  // (padded_numel)
  nn::Optimizer& local_optimizer() { return *local_; }

 private:
  std::string who() const;

  std::vector<Variable> parameters_;
  ProcessGroup& group_;
  FlatParameter flat_;   // every parameter, one after another, then the padding
  Variable shard_;       // this rank's slice of the flat buffer, with its gradient
  Tensor send_;          // the all-gather's input: a copy of the updated slice
  std::unique_ptr<nn::Optimizer> local_;
};

}  // namespace ddp
