// before_backward: an identity op whose backward first calls a function. Chapter 09.
//
//   forward:   x ─ [ before_backward(hook) ] ─ y = x
//   backward:  gy ─ hook() ─ gx = gy
//
// The hook runs when the gradient reaches y, before any op that made x sees it: FSDP puts
// one on each unit's output, so that the unit's parameters are gathered again just before
// its backward needs them (PyTorch registers a hook on the output tensor the same way).
// Without a gradient to carry (grad mode off, or x needs none), y is x and the hook never
// runs.
#pragma once

#include <functional>

#include "autograd/variable.hpp"

namespace ddp {

Variable before_backward(const Variable& x, std::function<void()> hook);

}  // namespace ddp
