// matmul on Variables, forward and backward (see functions.hpp). This file holds exactly
// the function of exercise 03.1: the exercise build links the participant's copy in its
// place (tutorial/EXERCISES.md, Note [How an exercise replaces the reference]).
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

}  // namespace

Variable matmul(const Variable& a, const Variable& b) {
  return make_result(ddp::matmul(a.data(), b.data()), {a, b}, [&] {
    auto node = std::make_shared<MatmulBackward>();
    node->a = a.data();
    node->b = b.data();
    return node;
  });
}

}  // namespace ddp
