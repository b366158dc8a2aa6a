// sum and mean on Variables. Chapter 03. The backward of a reduction spreads the
// gradient back over the reduced elements: expand (a view with stride 0), then copy.
#include "autograd/function.hpp"
#include "autograd/functions.hpp"
#include "tensor/ops.hpp"

namespace ddp {

namespace {

struct SumBackward final : Node {
  Shape input_shape;
  std::int64_t dim = 0;
  bool all = true;        // reduced over every element
  bool keepdim = false;
  double scale = 1.0;     // 1/n for mean
  std::vector<Tensor> backward(const Tensor& g) override {
    Tensor grad = g;
    if (!all && !keepdim && !input_shape.empty()) grad = grad.unsqueeze(dim);  // (.., 1, ..)
    if (all) grad = grad.reshape(Shape(input_shape.size(), 1));
    grad = grad.expand(input_shape).contiguous();
    return {scale == 1.0 ? grad : ddp::mul(grad, scale)};
  }
  const char* name() const override { return scale == 1.0 ? "SumBackward" : "MeanBackward"; }
};

Variable reduce(const Variable& x, Tensor out, bool all, std::int64_t dim, bool keepdim,
                double scale) {
  return make_result(std::move(out), {x}, [&] {
    auto node = std::make_shared<SumBackward>();
    node->input_shape = x.shape();
    node->all = all;
    node->dim = all ? 0 : normalize_dim(dim, x.dim());
    node->keepdim = keepdim;
    node->scale = scale;
    return node;
  });
}

}  // namespace

Variable sum(const Variable& x) { return reduce(x, ddp::sum(x.data()), true, 0, false, 1.0); }

Variable sum(const Variable& x, std::int64_t dim, bool keepdim) {
  return reduce(x, ddp::sum(x.data(), dim, keepdim), false, dim, keepdim, 1.0);
}

Variable mean(const Variable& x) {
  return reduce(x, ddp::mean(x.data()), true, 0, false, 1.0 / static_cast<double>(x.numel()));
}

Variable mean(const Variable& x, std::int64_t dim, bool keepdim) {
  const double n = static_cast<double>(x.dim() == 0 ? 1 : x.size(dim));
  return reduce(x, ddp::mean(x.data(), dim, keepdim), false, dim, keepdim, 1.0 / n);
}

}  // namespace ddp
