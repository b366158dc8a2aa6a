// DistributedDataParallel as a Joinable (joinable.hpp): what chapter 08's Join asks of it.
// Chapter 08; chapters 06 and 07 can skip this file. The count is in forward
// (Join::notify_join_context); here: the refusal of SyncBatchNorm2d, the shadow of one
// iteration (DDPJoinHook::main_hook) and the final sync (DDPJoinHook::post_hook), after
// PyTorch's _DDPJoinHook.
#include "dist/parallel/distributed_data_parallel.hpp"

#include <memory>
#include <vector>

#include "autograd/grad_mode.hpp"
#include "dist/parallel/join.hpp"
#include "dist/parallel/sync_batch_norm.hpp"
#include "base/error.hpp"

namespace ddp {

class DistributedDataParallel::DDPJoinHook final : public JoinHook {
 public:
  // Bucketed: the Reducer shadows its own backward (reducer_join.cpp).
  explicit DDPJoinHook(DistributedDataParallel& ddp)
      : ddp_(ddp), reducer_hook_(ddp.reducer_ ? ddp.reducer_->join_hook() : nullptr) {}
  void main_hook(const JoinRound& round) override;
  void post_hook(int final_root) override;

 private:
  // Flat and PerParameter: the all-reduces average_gradients() makes, of the same sizes.
  void all_reduce_zero_gradients();

  DistributedDataParallel& ddp_;
  std::unique_ptr<JoinHook> reducer_hook_;  // null unless Bucketed
};

// ---- The Joinable ---------------------------------------------------------------------

std::unique_ptr<JoinHook> DistributedDataParallel::join_hook() {
  // A collective inside the model's forward has no shadow: the joined ranks do not run the
  // model. SyncBatchNorm2d all-reduces batch statistics there.
  for (const auto& [name, module] : module_->named_modules()) {
    DDP_CHECK(dynamic_cast<const SyncBatchNorm2d*>(module) == nullptr, group_.who("Join"),
              ": module '", name,
              "' is a SyncBatchNorm2d, whose forward all-reduces batch statistics that a rank "
              "which has joined cannot shadow\nhint: use BatchNorm2d inside a Join, or give "
              "every rank the same number of batches (DistributedSampler, drop_last)");
  }
  return std::make_unique<DDPJoinHook>(*this);
}

// The count lives with the parameters: NCCL moves GPU memory only.
Device DistributedDataParallel::join_device() const { return parameters_.front().second.device(); }

ProcessGroup& DistributedDataParallel::join_process_group() const { return group_; }


// ---- The hook: a joined rank's part ---------------------------------------------------

// What a joined rank does in place of one iteration of the ranks still training: the
// buffer broadcast of their forward, then their gradient collectives, with zeros from
// here (Note [Counting who still trains] in join.cpp). Its own parameters, gradients and
// buffers stay as they are, but for the buffers received (the final sync overwrites them).
void DistributedDataParallel::DDPJoinHook::main_hook(const JoinRound& round) {
  NoGradGuard no_grad;
  if (round.broadcasts_buffers) ddp_.sync_buffers_from(round.lowest);
  if (reducer_hook_) {
    reducer_hook_->main_hook(round);
    return;
  }
  if (round.syncs_gradients) all_reduce_zero_gradients();  // (no_sync is Bucketed only)
}

void DistributedDataParallel::DDPJoinHook::all_reduce_zero_gradients() {
  const auto& parameters = ddp_.parameters_;
  const TensorOptions like{.dtype = DType::Float32, .device = parameters[0].second.device()};
  std::vector<Tensor> zero_grads;
  if (ddp_.options_.gradient_sync == GradientSync::PerParameter) {
    for (const auto& [name, p] : parameters) zero_grads.push_back(zeros(p.shape(), like));
  } else {
    std::int64_t total = 0;
    for (const auto& [name, p] : parameters) total += p.numel();
    zero_grads.push_back(zeros({total}, like));
  }
  std::vector<std::shared_ptr<Work>> pending;
  for (Tensor& z : zero_grads) pending.push_back(ddp_.group_.all_reduce(z, ReduceOp::Sum));
  for (const auto& work : pending) work->wait();
}

// The joined ranks skipped the optimizer steps of the iterations they shadowed: every rank
// takes the parameters and the buffers of `final_root`, one of those that trained to the end.
void DistributedDataParallel::DDPJoinHook::post_hook(int final_root) {
  if (final_root < 0) return;  // nobody trained inside the Join: nothing to sync
  NoGradGuard no_grad;
  std::vector<Tensor> values;
  for (const auto& [name, p] : ddp_.parameters_) values.push_back(p.data());
  broadcast_coalesced(ddp_.group_, values, final_root);
  ddp_.sync_buffers_from(final_root);
  if (reducer_hook_) reducer_hook_->post_hook(final_root);
}

}  // namespace ddp
