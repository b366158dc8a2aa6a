// The Reducer's part in chapter 08's Join (see joinable.hpp): on a rank that has joined, the
// shadow of one backward of the ranks still training. Chapter 08; chapter 07 can skip it.
// DDP's JoinHook (distributed_data_parallel_join.cpp) calls it after the buffer broadcast.
// The final sync is DDP's: this hook's post_hook does nothing.
#include "dist/parallel/reducer.hpp"

#include <memory>
#include <vector>

#include "autograd/grad_mode.hpp"
#include "dist/parallel/join.hpp"
#include "dist/parallel/ledger.hpp"
#include "base/error.hpp"

namespace ddp {

class Reducer::ReducerJoinHook final : public JoinHook {
 public:
  explicit ReducerJoinHook(Reducer& reducer) : reducer_(reducer) {}
  void main_hook(const JoinRound& round) override;
  void post_hook(int /*final_root*/) override {}

 private:
  Reducer& reducer_;
};

std::unique_ptr<JoinHook> Reducer::join_hook() { return std::make_unique<ReducerJoinHook>(*this); }

// The collectives a training rank makes from prepare_for_backward to the end of
// finish_backward, in its order (Note [Launch order] in reducer.cpp): the rebuild's
// broadcast (and check) if one is due (it comes with their forward), then, if they sync,
// each bucket's hook launch (zeros of the bucket's size, in bucket order) and
// find_unused_parameters' all-reduce. Then the hook's finish for each bucket, which a hook
// that keeps state per bucket needs as much as here. This rank's gradients stay as they are.
void Reducer::ReducerJoinHook::main_hook(const JoinRound& round) {
  Reducer& r = reducer_;
  DDP_CHECK(!r.broken_ && !(r.expecting_backward_ && r.callback_queued_), r.who(),
            ": shadowing an iteration, but this rank's last backward did not finish its "
            "reduction (it threw): the ranks are out of step\nhint: end the job");
  r.check_divisor(round.divisor);
  if (r.rebuild_due_) r.rebuild_from_arrival_order();
  r.expecting_backward_ = false;  // a forward of this rank whose backward never came: dropped
  r.arrival_order_.clear();       // a later rebuild must not take this rank's old order
  if (!round.syncs_gradients) return;
  NoGradGuard no_grad;
  try {
    const Device device = r.buckets_[0].flat.device();
    std::vector<Tensor> zero_buckets;  // alive until their collectives are waited for
    std::vector<std::shared_ptr<Work>> works;
    for (std::size_t b = 0; b < r.buckets_.size(); ++b) {
      zero_buckets.push_back(zeros({r.buckets_[b].flat.numel()},
                                   TensorOptions{.dtype = DType::Float32, .device = device}));
      const ledger::Label label(detail::concat("shadow of bucket ", b));
      works.push_back(r.hook_.launch(r.group_, zero_buckets.back()));
    }
    Tensor used;  // nobody here used anything: zeros
    if (r.options_.find_unused_parameters) {
      used = zeros({static_cast<std::int64_t>(r.parameters_.size())},
                   TensorOptions{.dtype = DType::Int64, .device = device});
      works.push_back(r.group_.all_reduce(used, ReduceOp::Sum));
    }
    for (std::size_t k = 0; k < works.size(); ++k) {
      works[k]->wait();
      if (k < zero_buckets.size()) r.hook_.finish(r.group_, zero_buckets[k]);  // result unused
    }
  } catch (...) {
    r.broken_ = true;  // a collective failed: the ranks are out of step for good
    throw;
  }
  if (r.rebuilds_ == 0 && r.options_.rebuild_buckets) r.rebuild_due_ = true;  // as reduce_buckets
}

}  // namespace ddp
