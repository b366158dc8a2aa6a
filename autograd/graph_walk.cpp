// The graph walk of the backward engine (see graph_walk.hpp). This file holds exactly the
// two functions of exercise 03.2: the exercise build links the participant's copy in its
// place (tutorial/EXERCISES.md, Note [How an exercise replaces the reference]).
#include "autograd/graph_walk.hpp"

#include <queue>
#include <vector>

#include "tensor/ops.hpp"

namespace ddp::detail {

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

void walk_graph(Node* root, const Tensor& grad, bool retain_graph) {
  std::unordered_map<Node*, int> dependencies = count_dependencies(root);
  std::unordered_map<Node*, Tensor> buffers{{root, grad}};
  // The latest-created ready node first: the forward pass in reverse (engine.cpp).
  auto later_first = [](const Node* a, const Node* b) {
    return a->sequence_nr() < b->sequence_nr();
  };
  std::priority_queue<Node*, std::vector<Node*>, decltype(later_first)> ready(later_first);
  ready.push(root);

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
}

}  // namespace ddp::detail
