// Shape ops on Variables: reshape, flatten, transpose. Chapter 03. They move no data
// (when the layout allows), and their backward is the inverse reshuffle of the gradient.
#include "autograd/function.hpp"
#include "autograd/functions.hpp"
#include "tensor/ops.hpp"

namespace ddp {

namespace {

struct ReshapeBackward final : Node {
  Shape input_shape;
  std::vector<Tensor> backward(const Tensor& g) override { return {g.reshape(input_shape)}; }
  const char* name() const override { return "ReshapeBackward"; }
};

struct TransposeBackward final : Node {
  std::int64_t dim0 = 0, dim1 = 1;
  std::vector<Tensor> backward(const Tensor& g) override { return {g.transpose(dim0, dim1)}; }
  const char* name() const override { return "TransposeBackward"; }
};

}  // namespace

Variable reshape(const Variable& x, const Shape& shape) {
  return make_result(x.data().reshape(shape), {x}, [&] {
    auto node = std::make_shared<ReshapeBackward>();
    node->input_shape = x.shape();
    return node;
  });
}

Variable flatten(const Variable& x, std::int64_t start_dim) {
  return make_result(x.data().flatten(start_dim), {x}, [&] {
    auto node = std::make_shared<ReshapeBackward>();
    node->input_shape = x.shape();
    return node;
  });
}

Variable transpose(const Variable& x, std::int64_t dim0, std::int64_t dim1) {
  return make_result(x.data().transpose(dim0, dim1), {x}, [&] {
    auto node = std::make_shared<TransposeBackward>();
    node->dim0 = dim0;
    node->dim1 = dim1;
    return node;
  });
}

}  // namespace ddp
