// Trace points (see trace_point.hpp): identity forward, identity backward plus a time.
#include "autograd/ops/trace_point.hpp"

#include <utility>

#include "autograd/function.hpp"
#include "base/trace.hpp"

namespace ddp {

namespace {

struct TraceEnterBackward final : Node {
  std::shared_ptr<BackwardSpan> span;
  std::vector<Tensor> backward(const Tensor& g) override {
    span->begin_ns = trace::now_ns();
    if (!span->leaves) trace::instant("backward", span->name + ": gradient in");
    return {g};
  }
  const char* name() const override { return "TraceEnterBackward"; }
  bool saves_tensors() const override { return false; }
};

struct TraceLeaveBackward final : Node {
  std::shared_ptr<BackwardSpan> span;
  std::vector<Tensor> backward(const Tensor& g) override {
    if (span->begin_ns >= 0) {
      trace::complete("backward", span->name, span->begin_ns, trace::now_ns());
    }
    return {g};
  }
  const char* name() const override { return "TraceLeaveBackward"; }
  bool saves_tensors() const override { return false; }
};

template <typename Point>
Variable trace_point(const Variable& x, std::shared_ptr<BackwardSpan> span) {
  return make_result(x.data(), {x}, [&] {
    auto node = std::make_shared<Point>();
    node->span = std::move(span);
    return node;
  });
}

}  // namespace

Variable trace_backward_enter(const Variable& x, std::shared_ptr<BackwardSpan> span) {
  return trace_point<TraceEnterBackward>(x, std::move(span));
}

Variable trace_backward_leave(const Variable& x, std::shared_ptr<BackwardSpan> span) {
  return trace_point<TraceLeaveBackward>(x, std::move(span));
}

}  // namespace ddp
