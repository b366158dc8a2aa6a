// The backward engine's walk over the graph: Kahn's topological sort, latest-created node
// first (exercise 03.2). run_backward (engine.cpp) checks its arguments and calls it.
// Chapter 03.
#pragma once

#include <unordered_map>

#include "autograd/node.hpp"

namespace ddp::detail {

// For every node reachable from `root` through next_functions(), how many edges lead
// into it from reachable nodes (a node reached by two paths counts 2). `root` itself is
// absent (nothing leads into it); so is a null edge.
std::unordered_map<Node*, int> count_dependencies(Node* root);

// Runs backward() of every node reachable from `root`, `grad` being d(loss)/d(root). A
// node runs once every edge into it has delivered (the gradients that arrive are summed);
// among the nodes that are ready, the one with the largest sequence_nr() runs first.
// Without retain_graph each node is released right after its backward; a node that was
// released already is an error that says retain_graph.
void walk_graph(Node* root, const Tensor& grad, bool retain_graph);

}  // namespace ddp::detail
