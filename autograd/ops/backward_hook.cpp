// before_backward (see backward_hook.hpp).
#include "autograd/ops/backward_hook.hpp"

#include <utility>

#include "autograd/function.hpp"

namespace ddp {

namespace {

struct BeforeBackward final : Node {
  std::function<void()> hook;
  std::vector<Tensor> backward(const Tensor& g) override {
    hook();
    return {g};
  }
  const char* name() const override { return "BeforeBackward"; }
  bool saves_tensors() const override { return false; }
};

}  // namespace

Variable before_backward(const Variable& x, std::function<void()> hook) {
  return make_result(x.data(), {x}, [&] {
    auto node = std::make_shared<BeforeBackward>();
    node->hook = std::move(hook);
    return node;
  });
}

}  // namespace ddp
