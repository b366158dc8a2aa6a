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
#include "autograd/engine.hpp"

#include <queue>
#include <unordered_map>
#include <vector>

#include "autograd/grad_mode.hpp"
#include "tensor/ops.hpp"

namespace ddp {

namespace {

struct LaterFirst {
  bool operator()(const Node* a, const Node* b) const {
    return a->sequence_nr() < b->sequence_nr();
  }
};

std::unordered_map<Node*, int> count_dependencies(Node* root) {
  std::unordered_map<Node*, int> dependencies;
  std::vector<Node*> stack{root};
  std::unordered_map<Node*, bool> seen{{root, true}};
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const std::shared_ptr<Node>& next : node->next_functions()) {
      if (!next) continue;
      ++dependencies[next.get()];
      if (!seen[next.get()]) {
        seen[next.get()] = true;
        stack.push_back(next.get());
      }
    }
  }
  return dependencies;
}

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
  std::unordered_map<Node*, int> dependencies = count_dependencies(root_node.get());
  std::unordered_map<Node*, Tensor> buffers{{root_node.get(), grad}};
  std::priority_queue<Node*, std::vector<Node*>, LaterFirst> ready;
  ready.push(root_node.get());
  std::vector<std::function<void()>> callbacks;
  struct Restore {  // the enclosing pass's list, even when a node throws
    std::vector<std::function<void()>>* saved;
    ~Restore() { t_callbacks = saved; }
  } restore{t_callbacks};
  t_callbacks = &callbacks;

  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    DDP_CHECK(!node->released(), "backward through ", node->name(),
              " a second time: its saved tensors were already freed",
              "\nhint: pass retain_graph=true to the first backward()");
    Tensor grad_output = std::move(buffers[node]);
    buffers.erase(node);
    std::vector<Tensor> grad_inputs;
    if (grad_output.defined()) grad_inputs = node->backward(grad_output);
    if (!retain_graph) node->release();

    const auto& next = node->next_functions();
    for (std::size_t i = 0; i < next.size(); ++i) {
      Node* child = next[i].get();
      if (child == nullptr) continue;
      if (i < grad_inputs.size() && grad_inputs[i].defined()) {
        Tensor& buffer = buffers[child];
        buffer = buffer.defined() ? add(buffer, grad_inputs[i]) : grad_inputs[i];
      }
      if (--dependencies[child] == 0) ready.push(child);
    }
  }

  // The graph is done. A callback may queue another (it is still "inside" this pass).
  for (std::size_t i = 0; i < callbacks.size(); ++i) {
    std::function<void()> callback = std::move(callbacks[i]);
    callback();
  }
}

}  // namespace ddp
