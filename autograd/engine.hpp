// The backward engine: runs the recorded graph from a root to the leaves. Chapter 03.
#pragma once

#include "autograd/variable.hpp"

namespace ddp {

// Computes d(root)/d(leaf) for every leaf that requires grad and adds it into leaf.grad.
// `grad_root` is d(loss)/d(root): ones for a one-element root when left undefined.
void run_backward(const Variable& root, const Tensor& grad_root, bool retain_graph);

}  // namespace ddp
