// linear on Variables (matmul is in matmul.cpp). Chapter 03.
//
// The transposes are views (no copies): the backends read transposed matrices directly
// (tensor/cpu/matmul.cpp).
#include "autograd/function.hpp"
#include "autograd/functions.hpp"
#include "tensor/ops.hpp"

namespace ddp {

namespace {

// y = x W^T + b, x: (B, in), W: (out, in), b: (out).
// dx = dy W,  dW = dy^T x,  db = sum of dy over the batch.
struct LinearBackward final : Node {
  Tensor x, weight;
  std::vector<Tensor> backward(const Tensor& g) override {
    Tensor gx, gw, gb;
    if (needs_input_grad(0)) gx = ddp::matmul(g, weight);
    if (needs_input_grad(1)) gw = ddp::matmul(g.t(), x);
    if (needs_input_grad(2)) gb = ddp::sum(g, 0);
    return {gx, gw, gb};
  }
  const char* name() const override { return "LinearBackward"; }
  void release_saved() override { x = weight = Tensor(); }
};

}  // namespace

Variable linear(const Variable& x, const Variable& weight, const Variable& bias) {
  DDP_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1),
            "linear: input ", x.data().describe(), " does not fit weight ",
            weight.data().describe(), " (expected input (B, ", weight.size(1), "))");
  Tensor out = ddp::matmul(x.data(), weight.data().t());
  if (bias.defined()) {
    DDP_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), "linear: bias ",
              bias.data().describe(), " does not match weight ", weight.data().describe());
    out.add_(bias.data());
  }
  std::vector<Variable> inputs{x, weight};
  if (bias.defined()) inputs.push_back(bias);
  return make_result(std::move(out), inputs, [&] {
    auto node = std::make_shared<LinearBackward>();
    node->x = x.data();
    node->weight = weight.data();
    return node;
  });
}

}  // namespace ddp
