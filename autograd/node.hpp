// Node: one recorded operation in the backward graph. Chapter 03.
//
// Every op on Variables that needs a gradient creates a Node holding what its backward
// needs (saved inputs, shapes) and the edges to the Nodes that made its inputs. A leaf
// that requires grad (a parameter) is reached through its AccumulateGrad node, which
// adds the incoming gradient into the leaf's .grad and then fires the leaf's
// "gradient ready" hooks: chapter 07's Reducer starts all-reducing from there.
//
//      x ──┐                        backward:   grad ──> MulBackward ──> AccumulateGrad(w)
//          ├─ mul ── y                                          └──────> (x needs none: null edge)
//      w ──┘
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include "tensor/tensor.hpp"

namespace ddp {

namespace detail {
struct VariableImpl;
}

class Node {
 public:
  Node();
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // grad_output: d(loss)/d(this node's output). Returns d(loss)/d(input i) for each
  // input, in the order of next_functions(); an entry may be left undefined when
  // needs_input_grad(i) is false.
  virtual std::vector<Tensor> backward(const Tensor& grad_output) = 0;
  virtual const char* name() const = 0;

  // The nodes that produced this node's inputs (null: that input needs no gradient).
  const std::vector<std::shared_ptr<Node>>& next_functions() const { return next_; }
  void set_next_functions(std::vector<std::shared_ptr<Node>> next) { next_ = std::move(next); }
  bool needs_input_grad(std::size_t i) const { return i < next_.size() && next_[i] != nullptr; }

  // Order of creation. The engine runs ready nodes latest-first, which walks the graph
  // in reverse order of the forward pass.
  virtual std::uint64_t sequence_nr() const { return sequence_nr_; }

  // Frees what backward() needed (called after it ran, unless the graph is retained).
  // A node that keeps nothing for backward (AccumulateGrad) stays runnable.
  void release() {
    release_saved();
    released_ = saves_tensors();
  }
  bool released() const { return released_; }

 protected:
  virtual void release_saved() {}
  // False for a node whose backward() can run again after release() (nothing freed).
  virtual bool saves_tensors() const { return true; }

 private:
  std::vector<std::shared_ptr<Node>> next_;
  std::uint64_t sequence_nr_;
  bool released_ = false;
};

// The sink of the graph for a leaf Variable: grad_output is added into leaf.grad, then
// the leaf's grad-ready hooks run. It runs once per backward pass, after ALL paths to the
// leaf have delivered their part (the engine counts them), so the hooks see the final
// gradient -- while the engine goes on with the rest of the graph.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<detail::VariableImpl> leaf);
  std::vector<Tensor> backward(const Tensor& grad_output) override;
  const char* name() const override { return "AccumulateGrad"; }
  // Run as soon as ready: a parameter's gradient should be handed on without delay.
  std::uint64_t sequence_nr() const override { return std::numeric_limits<std::uint64_t>::max(); }

 protected:
  // One AccumulateGrad serves every graph built while it is alive (a leaf finds it again
  // through Variable::gradient_edge): if an old graph -- say last step's loss, still held
  // by a variable -- keeps it alive, this step's graph reuses it. It saves nothing, so
  // releasing it after one backward must not block the next.
  bool saves_tensors() const override { return false; }

 private:
  std::shared_ptr<detail::VariableImpl> leaf_;
};

}  // namespace ddp
