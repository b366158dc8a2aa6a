// Node and AccumulateGrad (see node.hpp).
#include "autograd/node.hpp"

#include <atomic>

#include "autograd/grad_mode.hpp"
#include "autograd/variable.hpp"
#include "tensor/memory.hpp"

namespace ddp {

namespace {
std::atomic<std::uint64_t> g_next_sequence_nr{0};
}  // namespace

Node::Node() : sequence_nr_(g_next_sequence_nr.fetch_add(1, std::memory_order_relaxed)) {}

AccumulateGrad::AccumulateGrad(std::shared_ptr<detail::VariableImpl> leaf)
    : leaf_(std::move(leaf)) {}

std::vector<Tensor> AccumulateGrad::backward(const Tensor& grad_output) {
  detail::VariableImpl& leaf = *leaf_;
  DDP_CHECK(grad_output.shape() == leaf.data.shape(), "gradient of shape ",
            shape_str(grad_output.shape()), " for a parameter of shape ",
            shape_str(leaf.data.shape()));
  if (!leaf.grad.defined()) {
    // First gradient since zero_grad(): keep a copy, never an alias of a tensor the
    // graph may still use.
    const memory::Scope gradients(memory::Category::Gradients);  // counted as one from the start
    leaf.grad = grad_output.clone();
  } else {
    leaf.grad.add_(grad_output);
  }
  if (!leaf.grad_ready_hooks.empty()) {
    // Hooks may call ops (the Reducer copies into buckets); none of that is recorded.
    NoGradGuard no_grad;
    const Variable self = Variable::from_impl(leaf_);
    // A copy: a hook may remove itself (or another) while the list is walked.
    const auto hooks = leaf.grad_ready_hooks;
    for (const auto& [id, hook] : hooks) hook(self);
  }
  return {};
}

}  // namespace ddp
