// make_result(): how every differentiable op records itself. Chapter 03.
//
// An op computes its output on plain tensors, then calls make_result with the inputs
// and a factory for its backward Node. When grad mode is on and some input requires
// grad, the Node is created, given one edge per input (Variable::gradient_edge) and set
// as the output's grad_fn; otherwise the output is a plain Variable with no history and
// the factory never runs (so nothing is saved for a backward that will not happen).
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "autograd/grad_mode.hpp"
#include "autograd/variable.hpp"

namespace ddp {

template <typename MakeNode>
Variable make_result(Tensor output, const std::vector<Variable>& inputs, MakeNode&& make_node) {
  bool needs_grad = false;
  if (grad_enabled()) {
    for (const Variable& input : inputs) needs_grad = needs_grad || input.requires_grad();
  }
  if (!needs_grad) return Variable(std::move(output), false);
  std::shared_ptr<Node> node = make_node();
  std::vector<std::shared_ptr<Node>> edges;
  edges.reserve(inputs.size());
  for (const Variable& input : inputs) edges.push_back(input.gradient_edge());
  node->set_next_functions(std::move(edges));
  return Variable(std::move(output), std::move(node));
}

}  // namespace ddp
