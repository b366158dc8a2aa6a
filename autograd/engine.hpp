// The backward engine: runs the recorded graph from a root to the leaves. Chapter 03.
#pragma once

#include <functional>

#include "autograd/variable.hpp"

namespace ddp {

// Computes d(root)/d(leaf) for every leaf that requires grad and adds it into leaf.grad.
// `grad_root` is d(loss)/d(root): ones for a one-element root when left undefined.
void run_backward(const Variable& root, const Tensor& grad_root, bool retain_graph);

// Chapter 07: from inside a backward pass (a grad-ready hook), asks for `callback` to run
// once that pass has run its last node, on the same thread, before backward() returns
// (PyTorch's Engine::queue_callback). Callbacks run in the order they were queued; one
// that throws ends the backward with its error, and the rest do not run. The Reducer
// needs it twice: to finish a step in which some parameter got no gradient, and to wait
// for the last bucket before the optimizer can see the averaged gradients.
// Outside a backward pass it is an error.
void queue_backward_callback(std::function<void()> callback);

}  // namespace ddp
