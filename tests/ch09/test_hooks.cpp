// Chapter 09, what FSDP builds on, each against what it must do: a storage whose memory is
// released and restored (counted, refused while released, refilled in place for the views
// that outlived it), a module's forward hooks, and before_backward's place in backward.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "autograd/functions.hpp"
#include "autograd/ops/backward_hook.hpp"
#include "nn/linear.hpp"
#include "tensor/memory.hpp"
#include "tensor/ops.hpp"
#include "tensor/random.hpp"

using Catch::Contains;
using ddp::Tensor;
using ddp::Variable;
namespace memory = ddp::memory;

TEST_CASE("Storage::release gives the memory back; restore brings it to the same views",
          "[memory][ch09]") {
  const memory::Snapshot before = memory::snapshot();
  Tensor flat = ddp::zeros({100});
  memory::tag(flat, memory::Category::Parameters);
  const Tensor view = flat.narrow(0, 10, 5);  // what autograd would keep for backward
  const auto live = [&] {
    return memory::snapshot()[memory::Category::Parameters].live -
           before[memory::Category::Parameters].live;
  };
  CHECK(live() == 400);
  flat.storage()->release();
  CHECK(live() == 0);
  CHECK(flat.storage()->is_released());
  CHECK_THROWS_WITH(view.to_vector<float>(), Contains("was used before its memory came back"));
  flat.storage()->release();  // twice: nothing more
  CHECK(live() == 0);
  flat.storage()->restore();
  CHECK(live() == 400);
  flat.fill_(2.0);  // the owner refills it (FSDP: the all-gather)
  CHECK(view.to_vector<float>() == std::vector<float>(5, 2.0f));
}

TEST_CASE("A module's forward hooks run around every call and may replace the output",
          "[hooks][ch09]") {
  ddp::Generator gen(3);
  ddp::nn::Linear layer(4, 2, true, gen);
  std::vector<std::string> calls;
  layer.set_forward_hooks([&](ddp::nn::Module&) { calls.push_back("pre"); },
                          [&](ddp::nn::Module&, const Variable& out) {
                            calls.push_back("post");
                            return ddp::mul(out, 2.0);
                          });
  const Variable x(ddp::ones({1, 4}));
  const Variable plain = layer.forward(x);  // forward() itself: no hooks
  const Variable hooked = layer(x);
  CHECK(calls == std::vector<std::string>{"pre", "post"});
  CHECK(hooked.data().to_vector<float>()[0] == Approx(2 * plain.data().to_vector<float>()[0]));
  layer.set_forward_hooks(nullptr, nullptr);
  layer(x);
  CHECK(calls.size() == 2);
}

TEST_CASE("before_backward runs its hook when the gradient arrives, before the ops under it",
          "[hooks][ch09]") {
  std::vector<std::string> order;
  Variable w(ddp::full({3}, 2.0), true);
  w.register_grad_ready_hook([&](const Variable&) { order.push_back("w ready"); });
  const Variable y = ddp::before_backward(ddp::mul(w, w), [&] { order.push_back("hook"); });
  CHECK(order.empty());  // forward: nothing
  ddp::sum(y).backward();
  CHECK(order == std::vector<std::string>{"hook", "w ready"});
  CHECK(w.grad().to_vector<float>() == std::vector<float>(3, 4.0f));  // d(w^2)/dw, unchanged
  bool ran = false;
  const Variable no_grad = ddp::before_backward(Variable(ddp::ones({2})), [&] { ran = true; });
  CHECK(!no_grad.requires_grad());
  CHECK(!ran);
}
