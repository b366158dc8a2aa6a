// matmul and linear on Variables. Chapter 03.
//
// For C = A B:  dA = dC B^T  and  dB = A^T dC. The transposes are views (no copies):
// the backends read transposed matrices directly (tensor/cpu/matmul.cpp).
#include "autograd/function.hpp"
#include "autograd/functions.hpp"
#include "tensor/ops.hpp"

namespace ddp {

namespace {

struct MatmulBackward final : Node {
  Tensor a, b;  // (M, K), (K, N), or batched (B, M, K), (B, K, N)
  std::vector<Tensor> backward(const Tensor& g) override {
    // An operand that matmul shared across the batch (2-D, or 3-D with batch 1) gets the
    // sum over the batch: sum_to takes away the extra dimension or adds up the size-1 one.
    Tensor ga, gb;
    if (needs_input_grad(0)) ga = sum_to(ddp::matmul(g, b.transpose(-1, -2)), a.shape());
    if (needs_input_grad(1)) gb = sum_to(ddp::matmul(a.transpose(-1, -2), g), b.shape());
    return {ga, gb};
  }
  const char* name() const override { return "MatmulBackward"; }
  void release_saved() override { a = b = Tensor(); }
};

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

Variable matmul(const Variable& a, const Variable& b) {
  return make_result(ddp::matmul(a.data(), b.data()), {a, b}, [&] {
    auto node = std::make_shared<MatmulBackward>();
    node->a = a.data();
    node->b = b.data();
    return node;
  });
}

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
