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
// queues one per backward, for two reasons: only once the graph is done does it know
// which parameters got no gradient, and the optimizer must not see the gradients before
// the last bucket's all-reduce has finished.
// Outside a backward pass it is an error.
void queue_backward_callback(std::function<void()> callback);

}  // namespace ddp
