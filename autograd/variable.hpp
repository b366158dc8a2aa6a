// Variable: a tensor that remembers how it was made, so that gradients can flow back
// through it. Chapter 03.
//
// Like Tensor, a Variable is a handle: copies share the same values, gradient and
// history. A leaf (made by the user, e.g. a parameter) has no grad_fn; a result of an
// op on Variables that require grad has the Node of that op as grad_fn. The ops are in
// autograd/functions.hpp, the engine that runs backward in autograd/engine.hpp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/node.hpp"
#include "tensor/tensor.hpp"

namespace ddp {

class Variable;
using GradReadyHook = std::function<void(const Variable&)>;
// What register_grad_ready_hook returns: pass it to remove_grad_ready_hook.
using GradReadyHookId = std::uint64_t;

namespace detail {

struct VariableImpl {
  Tensor data;
  Tensor grad;  // undefined until a backward pass reaches this leaf
  bool requires_grad = false;
  std::shared_ptr<Node> grad_fn;    // null for leaves
  std::weak_ptr<Node> accumulator;  // a leaf's AccumulateGrad, shared by all its uses
  std::vector<std::pair<GradReadyHookId, GradReadyHook>> grad_ready_hooks;  // in registration order
};

}  // namespace detail

class Variable {
 public:
  Variable() = default;
  // A leaf holding `data`.
  explicit Variable(Tensor data, bool requires_grad = false);
  // A non-leaf: the result of an op, made by `grad_fn` (see functions.hpp).
  Variable(Tensor data, std::shared_ptr<Node> grad_fn);

  bool defined() const { return impl_ != nullptr; }
  // The values. Changing them in place (t.data().add_(...)) is not recorded: that is
  // how an optimizer updates parameters.
  Tensor& data() const;
  const Shape& shape() const { return data().shape(); }
  std::int64_t dim() const { return data().dim(); }
  std::int64_t size(std::int64_t d) const { return data().size(d); }
  std::int64_t numel() const { return data().numel(); }
  Device device() const { return data().device(); }

  bool requires_grad() const;
  Variable& set_requires_grad(bool requires_grad);  // leaves only
  bool is_leaf() const;
  const std::shared_ptr<Node>& grad_fn() const;

  // d(loss)/d(this), summed over backward passes until zero_grad(); undefined before.
  const Tensor& grad() const;
  void set_grad(Tensor grad) const;
  void zero_grad() const;  // sets the gradient back to undefined (PyTorch set_to_none)

  // Runs backward from this Variable. `grad_output` defaults to 1 for a one-element
  // Variable (a loss). Frees the graph afterwards unless retain_graph.
  void backward(const Tensor& grad_output = Tensor(), bool retain_graph = false) const;

  // The same values, cut from the graph: a leaf that does not require grad.
  Variable detach() const;

  // Chapter 07: `hook` runs once in every backward pass that reaches this leaf, right
  // after the leaf's gradient for that pass is final (accumulated into grad()). Hooks run
  // in the order they were registered; each can be removed on its own through its id
  // (a Reducer removes exactly its own hooks and leaves a user's in place).
  GradReadyHookId register_grad_ready_hook(GradReadyHook hook) const;
  void remove_grad_ready_hook(GradReadyHookId id) const;  // unknown ids are ignored
  void clear_grad_ready_hooks() const;

  // The edge an op records for this input: the leaf's AccumulateGrad, the grad_fn of a
  // non-leaf, or null when no gradient is needed.
  std::shared_ptr<Node> gradient_edge() const;

  bool same(const Variable& other) const { return impl_ == other.impl_; }
  // Wraps an existing implementation (AccumulateGrad hands its leaf to the hooks).
  static Variable from_impl(std::shared_ptr<detail::VariableImpl> impl);

 private:
  std::shared_ptr<detail::VariableImpl> impl_;
};

}  // namespace ddp
