// ZeroRedundancyOptimizer (see zero_redundancy_optimizer.hpp): the three parts of a step.
#include "dist/parallel/zero_redundancy_optimizer.hpp"

#include <utility>

#include "autograd/grad_mode.hpp"
#include "base/error.hpp"
#include "dist/parallel/shard_trace.hpp"
#include "tensor/memory.hpp"

namespace ddp {

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(std::vector<Variable> parameters,
                                                 ProcessGroup& group, const MakeOptimizer& make)
    : parameters_(std::move(parameters)),
      group_(group),
      flat_(parameters_, group.rank(), group.size()) {
  const Tensor slice = flat_.shard();
  shard_ = Variable(slice, /*requires_grad=*/true);
  shard_.set_grad(zeros_like(slice));  // tagged as gradients; the padding stays zero
  send_ = empty_like(slice);
  memory::tag(send_, memory::Category::Communication);
  local_ = make({shard_});
  DDP_CHECK(local_ != nullptr, who(), ": the MakeOptimizer function returned no optimizer");
}

std::string ZeroRedundancyOptimizer::who() const {
  return group_.who("ZeroRedundancyOptimizer");
}

void ZeroRedundancyOptimizer::step() {
  NoGradGuard no_grad;
  Tensor shard_grad = shard_.grad();  // a handle: written in place
  flat_.copy_shard_gradients(shard_grad, who());  // 1. this rank's slice of the gradients
  local_->step();                                 // 2. updates the slice of the flat buffer
  send_.copy_(shard_.data());
  trace_shard_event("gather", 0);
  auto gather = group_.all_gather(flat_.flat(), send_);  // 3. every slice, everywhere
  const TracedWait traced("gather", 0);
  gather->wait();
}

void ZeroRedundancyOptimizer::zero_grad() {
  for (const Variable& p : parameters_) p.zero_grad();
}

}  // namespace ddp
