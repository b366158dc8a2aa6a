// Chapter 04, Module and the layers: registration and dotted names, train/eval, to(),
// zero_grad, load_state_dict's checks, PyTorch's default initialisation, and the output
// shapes of every layer of ResNetMnist.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "autograd/functions.hpp"
#include "nn/basic_block.hpp"
#include "nn/batch_norm2d.hpp"
#include "nn/conv2d.hpp"
#include "nn/init.hpp"
#include "nn/linear.hpp"
#include "nn/relu.hpp"
#include "nn/resnet_mnist.hpp"
#include "nn/sequential.hpp"
#include "tensor/ops.hpp"
#include "tensor/random.hpp"

using Catch::Contains;
using ddp::Generator;
using ddp::Shape;
using ddp::Tensor;
using ddp::Variable;
namespace nn = ddp::nn;

namespace {

std::vector<std::string> names_of(const auto& list) {
  std::vector<std::string> out;
  for (const auto& [name, value] : list) out.push_back(name);
  return out;
}

// A module that registers things the wrong way, to test the checks.
struct Tinkerer final : nn::Module {
  Variable forward(const Variable& x) override { return x; }
  std::string describe() const override { return "Tinkerer"; }
  using nn::Module::register_buffer;
  using nn::Module::register_module;
  using nn::Module::register_parameter;
};

bool same_values(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.to_vector<float>() == b.to_vector<float>();
}

}  // namespace

TEST_CASE("dotted names follow registration order, own entries first", "[nn][module]") {
  Generator gen(1);
  nn::BasicBlock block(16, 32, 2, gen);
  CHECK(names_of(block.named_parameters()) ==
        std::vector<std::string>{"conv1.weight", "bn1.weight", "bn1.bias", "conv2.weight",
                                 "bn2.weight", "bn2.bias", "shortcut.0.weight",
                                 "shortcut.1.weight", "shortcut.1.bias"});
  CHECK(names_of(block.named_buffers()) ==
        std::vector<std::string>{"bn1.running_mean", "bn1.running_var", "bn2.running_mean",
                                 "bn2.running_var", "shortcut.1.running_mean",
                                 "shortcut.1.running_var"});
  // The state_dict interleaves per module: parameters, then buffers, then children.
  const auto state = names_of(block.state_dict());
  REQUIRE(state.size() == 15);
  CHECK(state[0] == "conv1.weight");
  CHECK(state[1] == "bn1.weight");
  CHECK(state[3] == "bn1.running_mean");
  CHECK(state[14] == "shortcut.1.running_var");

  // An identity shortcut is an empty Sequential: no entries at all.
  nn::BasicBlock same(16, 16, 1, gen);
  CHECK(same.shortcut().empty());
  CHECK(same.named_parameters().size() == 6);
  CHECK(names_of(same.named_modules()) ==
        std::vector<std::string>{"", "conv1", "bn1", "conv2", "bn2", "shortcut"});

  // parameters() hands out the registered Variables themselves.
  CHECK(block.parameters()[0].same(block.conv1().weight()));
}

TEST_CASE("registering a bad name fails with a message naming it", "[nn][module]") {
  Tinkerer m;
  m.register_parameter("w", ddp::zeros({2}));
  CHECK_THROWS_WITH(m.register_buffer("w", ddp::zeros({2})), Contains("'w' is already"));
  CHECK_THROWS_WITH(m.register_parameter("a.b", ddp::zeros({2})), Contains("'a.b'"));
  CHECK_THROWS_WITH(m.register_parameter("", ddp::zeros({2})), Contains("non-empty"));
  CHECK_THROWS_WITH(m.register_parameter("n", ddp::zeros({2}, {ddp::DType::Int64})),
                    Contains("float32"));
  CHECK(m.named_parameters()[0].second.requires_grad());
  CHECK_FALSE(m.register_buffer("buf", ddp::zeros({2})).requires_grad());
}

TEST_CASE("train and eval reach every module, and to() keeps the Variables", "[nn][module]") {
  Generator gen(2);
  nn::ResNetMnist net(gen);
  CHECK(net.is_training());
  net.eval();
  for (const auto& [name, module] : net.named_modules()) {
    INFO(name);
    CHECK_FALSE(module->is_training());
  }
  net.train();
  for (const auto& [name, module] : net.named_modules()) CHECK(module->is_training());

  const std::vector<Variable> before = net.parameters();
  net.to(ddp::Device::cpu());
  const std::vector<Variable> after = net.parameters();
  REQUIRE(before.size() == after.size());
  for (std::size_t i = 0; i < before.size(); ++i) CHECK(before[i].same(after[i]));
}

TEST_CASE("zero_grad clears every gradient", "[nn][module]") {
  Generator gen(3);
  nn::Linear fc(4, 3, true, gen);
  const Variable x(ddp::randn({5, 4}, gen));
  ddp::sum(fc.forward(x)).backward();
  CHECK(fc.weight().grad().defined());
  CHECK(fc.bias().grad().defined());
  fc.zero_grad();
  CHECK_FALSE(fc.weight().grad().defined());
  CHECK_FALSE(fc.bias().grad().defined());
}

TEST_CASE("PyTorch's default initialisation: bounds, spread, BN constants", "[nn][init]") {
  // gain = sqrt(2 / (1 + a^2)), bound = gain * sqrt(3 / fan_in): 1/sqrt(fan_in) at a=sqrt(5).
  CHECK(nn::kaiming_uniform_bound(144, std::sqrt(5.0)) == Approx(1.0 / 12.0));
  CHECK(nn::kaiming_uniform_bound(50, 0.0) == Approx(std::sqrt(6.0 / 50.0)));

  Generator gen(4);
  nn::Conv2d conv(16, 32, 3, 1, 1, /*bias=*/true, gen);
  CHECK(nn::fan_in(conv.weight().data()) == 144);
  const double bound = 1.0 / 12.0;
  const std::vector<float> w = conv.weight().data().to_vector<float>();
  double sum = 0.0;
  double sum_sq = 0.0;
  for (float v : w) {
    CHECK(std::abs(v) <= bound);
    sum += v;
    sum_sq += static_cast<double>(v) * v;
  }
  const double n = static_cast<double>(w.size());  // 4608 draws
  CHECK(std::abs(sum / n) < 0.05 * bound);  // ~6 standard errors of the mean
  // U(-b, b) has standard deviation b / sqrt(3).
  CHECK(std::sqrt(sum_sq / n) == Approx(bound / std::sqrt(3.0)).epsilon(0.05));
  for (float v : conv.bias().data().to_vector<float>()) CHECK(std::abs(v) <= bound);

  nn::Linear fc(64, 10, true, gen);
  for (float v : fc.weight().data().to_vector<float>()) CHECK(std::abs(v) <= 0.125);
  for (float v : fc.bias().data().to_vector<float>()) CHECK(std::abs(v) <= 0.125);

  nn::BatchNorm2d bn(8);
  CHECK(same_values(bn.weight().data(), ddp::ones({8})));
  CHECK(same_values(bn.bias().data(), ddp::zeros({8})));
  CHECK(same_values(bn.running_mean(), ddp::zeros({8})));
  CHECK(same_values(bn.running_var(), ddp::ones({8})));

  // The Generator decides everything: same seed, same network; another seed, another.
  Generator a(9), b(9), c(10);
  nn::ResNetMnist na(a), nb(b), nc(c);
  CHECK(same_values(na.fc().weight().data(), nb.fc().weight().data()));
  CHECK_FALSE(same_values(na.fc().weight().data(), nc.fc().weight().data()));
}

TEST_CASE("every layer of ResNetMnist has the documented output shape", "[nn][module]") {
  Generator gen(5);
  nn::ResNetMnist net(gen);
  const Variable x(ddp::randn({2, 1, 28, 28}, gen));
  Variable h = net.conv().forward(x);
  CHECK(h.shape() == Shape{2, 16, 28, 28});
  h = ddp::relu(net.bn().forward(h));
  h = net.block1().forward(h);
  CHECK(h.shape() == Shape{2, 16, 28, 28});
  h = net.block2().forward(h);
  CHECK(h.shape() == Shape{2, 32, 14, 14});
  h = net.block3().forward(h);
  CHECK(h.shape() == Shape{2, 64, 7, 7});
  CHECK(net.forward(x).shape() == Shape{2, 10});
  CHECK_THROWS_WITH(net.forward(Variable(ddp::zeros({2, 3, 28, 28}))),
                    Contains("expected images (B, 1, H, W)"));
}

TEST_CASE("BatchNorm2d: batch statistics in training, running ones in eval", "[nn][module]") {
  Generator gen(6);
  nn::BatchNorm2d bn(3);
  const Variable x(ddp::normal({4, 3, 5, 5}, 2.0f, 3.0f, gen));
  const Tensor train_out = bn.forward(x).data();
  // Training updates the running mean: 0.9 * 0 + 0.1 * (batch mean ~ 2).
  for (float m : bn.running_mean().to_vector<float>()) CHECK(m == Approx(0.2).margin(0.1));
  bn.eval();
  const Tensor eval_before = bn.running_mean().clone();
  const Tensor eval_out = bn.forward(x).data();
  CHECK(same_values(bn.running_mean(), eval_before));  // eval leaves the statistics alone
  CHECK_FALSE(same_values(train_out, eval_out));
  // Training output per channel: mean 0 (weight 1, bias 0).
  CHECK(ddp::mean(train_out).item<float>() == Approx(0.0).margin(1e-5));
}

TEST_CASE("Sequential names its layers 0, 1, ... and an empty one is the identity",
          "[nn][module]") {
  Generator gen(7);
  nn::Sequential seq;
  seq.push_back(std::make_shared<nn::Linear>(4, 8, true, gen));
  seq.push_back(std::make_shared<nn::ReLU>());
  seq.push_back(std::make_shared<nn::Linear>(8, 2, false, gen));
  CHECK(names_of(seq.named_parameters()) ==
        std::vector<std::string>{"0.weight", "0.bias", "2.weight"});
  const Variable x(ddp::randn({3, 4}, gen));
  CHECK(seq.forward(x).shape() == Shape{3, 2});
  CHECK_THROWS_WITH(seq[3], Contains("has 3 layers"));
  nn::Sequential empty;
  CHECK(empty.forward(x).same(x));
}

TEST_CASE("load_state_dict copies into the existing tensors, all or nothing", "[nn][module]") {
  Generator ga(11), gb(12);
  nn::BasicBlock a(4, 8, 2, ga), b(4, 8, 2, gb);
  const Variable weight = b.conv1().weight();
  b.load_state_dict(a.state_dict(), "block a");
  CHECK(weight.same(b.conv1().weight()));  // the same Variable, new values
  for (const auto& [name, tensor] : a.state_dict()) {
    INFO(name);
    bool found = false;
    for (const auto& [other, value] : b.state_dict()) {
      if (other == name) {
        CHECK(same_values(tensor, value));
        found = true;
      }
    }
    CHECK(found);
  }

  Generator gc(13);
  nn::BasicBlock c(4, 8, 2, gc);
  const Tensor snapshot = c.conv1().weight().data().clone();
  nn::StateDict bad = a.state_dict();
  bad.back().second = ddp::zeros({9});  // the last entry: everything before it fits
  CHECK_THROWS_WITH(c.load_state_dict(bad, "block a"),
                    Contains("load_state_dict(block a)") &&
                        Contains("'shortcut.1.running_var'") && Contains("(8,)"));
  CHECK(same_values(c.conv1().weight().data(), snapshot));  // unchanged

  nn::StateDict missing = a.state_dict();
  missing.erase(missing.begin() + 2);
  CHECK_THROWS_WITH(c.load_state_dict(missing), Contains("'bn1.bias' is missing"));
  nn::StateDict extra = a.state_dict();
  extra.emplace_back("bn1.num_batches_tracked", ddp::zeros({1}));
  CHECK_THROWS_WITH(c.load_state_dict(extra),
                    Contains("unexpected entry 'bn1.num_batches_tracked'"));
  CHECK(same_values(c.conv1().weight().data(), snapshot));
}
