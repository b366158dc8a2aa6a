// The backward engine (see engine.hpp). Chapter 03.
//
// Two passes over the graph:
//   1. Count, for every node, how many edges lead into it (its dependencies).
//   2. Run nodes whose dependencies are all satisfied. Gradients arriving at a node are
//      summed in a buffer; when its last one arrives, the node is ready. Among ready
//      nodes the latest-created runs first (AccumulateGrad before anything else), so the
//      graph is walked in reverse order of the forward pass and a parameter's gradient
//      is delivered as soon as it is final. This is Kahn's topological sort with a
//      priority queue.
// Both passes are in graph_walk.cpp; this file checks the arguments around them and runs
// the callbacks queued during the walk.
#include "autograd/engine.hpp"

#include <vector>

#include "autograd/grad_mode.hpp"
#include "autograd/graph_walk.hpp"
#include "tensor/ops.hpp"

namespace ddp {

namespace {

// The callbacks queued during the backward pass running on this thread; null outside one.
// (A hook could start a nested backward; each pass keeps its own list.)
thread_local std::vector<std::function<void()>>* t_callbacks = nullptr;

}  // namespace

void queue_backward_callback(std::function<void()> callback) {
  DDP_CHECK(t_callbacks != nullptr,
            "queue_backward_callback() outside a backward pass: call it from a grad-ready hook");
  t_callbacks->push_back(std::move(callback));
}

void run_backward(const Variable& root, const Tensor& grad_root, bool retain_graph) {
  DDP_CHECK(root.requires_grad(), "backward() on a Variable that does not require grad",
            "\nhint: no input of the computation had requires_grad set, or it ran under "
            "NoGradGuard");
  Tensor grad = grad_root;
  if (!grad.defined()) {
    DDP_CHECK(root.numel() == 1, "backward() without a gradient needs a one-element output, got ",
              root.data().describe(), "\nhint: pass grad_output, or reduce (sum/mean) first");
    grad = ones_like(root.data());
  }
  DDP_CHECK(grad.shape() == root.shape() && grad.device() == root.device(), "backward(): gradient ",
            grad.describe(), " does not match the output ", root.data().describe());

  // The graph's nodes compute gradients from plain tensors: nothing is recorded.
  NoGradGuard no_grad;
  const std::shared_ptr<Node> root_node = root.gradient_edge();
  std::vector<std::function<void()>> callbacks;
  struct Restore {  // the enclosing pass's list, even when a node throws
    std::vector<std::function<void()>>* saved;
    ~Restore() { t_callbacks = saved; }
  } restore{t_callbacks};
  t_callbacks = &callbacks;

  detail::walk_graph(root_node.get(), grad, retain_graph);

  // The graph is done. A callback may queue another (it is still "inside" this pass).
  for (std::size_t i = 0; i < callbacks.size(); ++i) {
    std::function<void()> callback = std::move(callbacks[i]);
    callback();
  }
}

}  // namespace ddp
