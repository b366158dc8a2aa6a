// ZeroRedundancyOptimizer (see zero_redundancy_optimizer.hpp): the flat buffer, and the
// three parts of a step.
#include "dist/parallel/zero_redundancy_optimizer.hpp"

#include <algorithm>
#include <utility>

#include "autograd/grad_mode.hpp"
#include "base/error.hpp"
#include "tensor/memory.hpp"

namespace ddp {

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(std::vector<Variable> parameters,
                                                 ProcessGroup& group, const MakeOptimizer& make,
                                                 std::chrono::milliseconds timeout)
    : parameters_(std::move(parameters)), group_(group), timeout_(timeout) {
  DDP_CHECK(!parameters_.empty(), who(), ": no parameters to optimize");
  const Device device = parameters_.front().device();
  std::int64_t numel = 0;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    const Tensor& p = parameters_[i].data();
    DDP_CHECK(p.dtype() == DType::Float32 && p.device() == device, who(), ": parameter ", i,
              " is ", p.describe(), "; every parameter must be float32 on ", device.str());
    offsets_.push_back(numel);
    numel += p.numel();
  }
  layout_ = make_shard_layout(numel, group_.size());

  // The flat buffer (the padding stays zero), and every parameter a view into it.
  NoGradGuard no_grad;
  flat_ = zeros({layout_.padded_numel()}, {.device = device});
  memory::tag(flat_, memory::Category::Parameters);
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    Tensor& p = parameters_[i].data();
    Tensor view = flat_.narrow(0, offsets_[i], p.numel());
    view.copy_(p.reshape({p.numel()}));
    p = view.view(p.shape());
  }

  const int rank = group_.rank();
  shard_ = Variable(flat_.narrow(0, layout_.begin(rank), layout_.shard_numel), true);
  Tensor shard_grad = zeros({layout_.shard_numel}, {.device = device});
  shard_.set_grad(shard_grad);  // tagged as gradients
  send_ = empty({layout_.shard_numel}, {.device = device});
  memory::tag(send_, memory::Category::Communication);
  local_ = make({shard_});
  DDP_CHECK(local_ != nullptr, who(), ": the MakeOptimizer function returned no optimizer");
}

std::string ZeroRedundancyOptimizer::who() const {
  return detail::concat("ZeroRedundancyOptimizer on rank ", group_.rank(), "/", group_.size());
}

void ZeroRedundancyOptimizer::gather_shard_gradient() {
  const int rank = group_.rank();
  const std::int64_t begin = layout_.begin(rank), end = layout_.real_end(rank);
  Tensor shard_grad = shard_.grad();  // a handle: written in place
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    const std::int64_t first = std::max(begin, offsets_[i]);
    const std::int64_t last = std::min(end, offsets_[i] + parameters_[i].numel());
    if (first >= last) continue;  // parameter i lies outside this rank's shard
    const Tensor& grad = parameters_[i].grad();
    DDP_CHECK(grad.defined(), who(), ": parameter ", i,
              " has no gradient in this step; a sharded optimizer steps every parameter "
              "(hint: every parameter must take part in the loss)");
    shard_grad.narrow(0, first - begin, last - first)
        .copy_(grad.reshape({grad.numel()}).narrow(0, first - offsets_[i], last - first));
  }
}

void ZeroRedundancyOptimizer::step() {
  NoGradGuard no_grad;
  gather_shard_gradient();  // 1.
  local_->step();           // 2. this rank's slice of flat_, in place
  send_.copy_(shard_.data());
  group_.all_gather(flat_, send_)->wait(timeout_);  // 3. every slice, into every flat_
}

void ZeroRedundancyOptimizer::zero_grad() {
  for (const Variable& p : parameters_) p.zero_grad();
}

}  // namespace ddp
