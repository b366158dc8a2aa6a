// Variable (see variable.hpp).
#include "autograd/variable.hpp"

#include "autograd/engine.hpp"
#include "tensor/memory.hpp"

#include <atomic>

namespace ddp {

Variable::Variable(Tensor data, bool requires_grad)
    : impl_(std::make_shared<detail::VariableImpl>()) {
  DDP_CHECK(data.defined(), "a Variable needs a defined tensor");
  impl_->data = std::move(data);
  set_requires_grad(requires_grad);
}

Variable::Variable(Tensor data, std::shared_ptr<Node> grad_fn)
    : impl_(std::make_shared<detail::VariableImpl>()) {
  impl_->data = std::move(data);
  impl_->requires_grad = grad_fn != nullptr;
  impl_->grad_fn = std::move(grad_fn);
}

Variable Variable::from_impl(std::shared_ptr<detail::VariableImpl> impl) {
  Variable v;
  v.impl_ = std::move(impl);
  return v;
}

Tensor& Variable::data() const {
  DDP_CHECK(defined(), "this Variable is undefined (default-constructed)");
  return impl_->data;
}

bool Variable::requires_grad() const { return defined() && impl_->requires_grad; }

Variable& Variable::set_requires_grad(bool requires_grad) {
  DDP_CHECK(is_leaf(), "set_requires_grad() on a non-leaf Variable (made by ",
            impl_->grad_fn->name(), ")\nhint: use detach() to make a new leaf");
  DDP_CHECK(!requires_grad || data().dtype() == DType::Float32,
            "only float32 Variables can require grad, got ", data().describe());
  impl_->requires_grad = requires_grad;
  return *this;
}

bool Variable::is_leaf() const { return defined() && impl_->grad_fn == nullptr; }

const std::shared_ptr<Node>& Variable::grad_fn() const {
  DDP_CHECK(defined(), "grad_fn() of an undefined Variable");
  return impl_->grad_fn;
}

const Tensor& Variable::grad() const {
  DDP_CHECK(defined(), "grad() of an undefined Variable");
  return impl_->grad;
}

void Variable::set_grad(Tensor grad) const {
  DDP_CHECK(!grad.defined() || grad.shape() == shape(), "set_grad: gradient ", grad.describe(),
            " does not match the Variable's ", data().describe());
  memory::tag(grad, memory::Category::Gradients);
  impl_->grad = std::move(grad);
}

void Variable::zero_grad() const { impl_->grad = Tensor(); }

void Variable::backward(const Tensor& grad_output, bool retain_graph) const {
  run_backward(*this, grad_output, retain_graph);
}

Variable Variable::detach() const { return Variable(data(), false); }

GradReadyHookId Variable::register_grad_ready_hook(GradReadyHook hook) const {
  DDP_CHECK(is_leaf() && requires_grad(),
            "grad-ready hooks are for leaves that require grad (parameters)");
  // Ids are unique in the process, so an id can never remove another Variable's hook.
  static std::atomic<GradReadyHookId> next_id{1};
  const GradReadyHookId id = next_id.fetch_add(1, std::memory_order_relaxed);
  impl_->grad_ready_hooks.emplace_back(id, std::move(hook));
  return id;
}

void Variable::remove_grad_ready_hook(GradReadyHookId id) const {
  std::erase_if(impl_->grad_ready_hooks, [id](const auto& entry) { return entry.first == id; });
}

void Variable::clear_grad_ready_hooks() const { impl_->grad_ready_hooks.clear(); }

std::shared_ptr<Node> Variable::gradient_edge() const {
  if (!requires_grad()) return nullptr;
  if (impl_->grad_fn) return impl_->grad_fn;
  // One AccumulateGrad per leaf, shared by every op that uses the leaf in this graph,
  // so that the engine sums all contributions before the hooks fire. The graph owns it
  // (weak_ptr here): when the graph is freed, so is the node.
  std::shared_ptr<Node> accumulator = impl_->accumulator.lock();
  if (!accumulator) {
    accumulator = std::make_shared<AccumulateGrad>(impl_);
    impl_->accumulator = accumulator;
  }
  return accumulator;
}

}  // namespace ddp
