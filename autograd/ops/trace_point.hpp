// Trace points: identity ops whose backward notes the time, so that the timeline shows
// when the gradient passed a point of the graph. Chapter 07 (nn::Module's traced call).
//
// A module's backward runs from the moment the gradient reaches its output to the moment
// it leaves through its input. Module::operator() marks both ends with an identity op:
//
//   forward:   x ─ leave ─ [ the module's ops ] ─ enter ─ y      (leave made first)
//   backward:  gy ─ enter: note t0 ─ [ the ops' backward ] ─ leave: span (t0, now) ─ gx
//
// The ops pass the tensor through unchanged (the output shares x's storage) and the
// gradient too, so values and gradients are what they are without them; they exist only
// while tracing (Module::operator() adds them then) and only where a gradient flows.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "autograd/variable.hpp"

namespace ddp {

// Shared by the two trace points of one call.
struct BackwardSpan {
  explicit BackwardSpan(std::string module) : name(std::move(module)) {}
  std::string name;            // the module's dotted path
  std::int64_t begin_ns = -1;  // trace::now_ns() when the gradient reached the output
  // False when the module's input carries no gradient (the images into the first layer):
  // there is no point where the gradient leaves, so the enter point records an instant.
  bool leaves = true;
};

// y = x; backward notes in `span` when the gradient reached this point (the output).
// x itself (nothing recorded) when x carries no gradient.
Variable trace_backward_enter(const Variable& x, std::shared_ptr<BackwardSpan> span);
// y = x; backward records the "backward" span from span->begin_ns to now. `x` is the
// module's input: the gradient leaves the module here.
Variable trace_backward_leave(const Variable& x, std::shared_ptr<BackwardSpan> span);

}  // namespace ddp
