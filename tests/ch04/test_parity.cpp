// Chapter 04, the network against PyTorch: ResNetMnist loaded with PyTorch's initial
// weights (tests/data/resnet_mnist) must give PyTorch's logits, loss and gradients, the
// same parameters and BatchNorm statistics after 3 SGD steps, and the same eval-mode
// logits. Tolerances from the fixture's README (measured: PyTorch float64 vs float32).
// Also: the names and the parameter count, and overfitting one batch.
#include <catch2/catch.hpp>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "autograd/functions.hpp"
#include "autograd/grad_mode.hpp"
#include "nn/resnet_mnist.hpp"
#include "nn/sgd.hpp"
#include "tensor/ops.hpp"
#include "tensor/random.hpp"
#include "nn/resnet_fixture.hpp"

using ddp::Generator;
using ddp::Tensor;
using ddp::Variable;
using ddp::nn::relative_error;
using ddp::nn::ResNetMnist;

namespace {

constexpr double kLogitsTol = 1e-4;  // logits and loss, relative
constexpr double kGradTol = 1e-3;    // every parameter's gradient
constexpr double kAfter3Tol = 5e-3;  // every parameter and BN buffer after 3 steps

const ddp::nn::ResNetFixture& fixture() {
  static const auto fx = ddp::nn::load_resnet_fixture(DDP_RESNET_FIXTURE_DIR);
  return fx;
}

ddp::nn::SGDOptions reference_sgd() {
  // ref_model.py HPARAMS: lr 0.1, momentum 0.9, dampening 0, no Nesterov, wd 5e-4.
  return {.lr = 0.1, .momentum = 0.9, .dampening = 0.0, .weight_decay = 5e-4,
          .nesterov = false};
}

// A network holding PyTorch's initial weights (the seed here does not matter).
std::unique_ptr<ResNetMnist> pytorch_initialised() {
  Generator gen(7);
  auto net = std::make_unique<ResNetMnist>(gen);
  net->load_state_dict(fixture().with_prefix("init/"), "the parity fixture's init/*");
  return net;
}

}  // namespace

TEST_CASE("ResNetMnist has ref_model.py's 77,754 parameters under PyTorch's names",
          "[nn][parity]") {
  Generator gen(0);
  ResNetMnist net(gen);
  CHECK(net.num_parameters() == 77754);
  CHECK(net.num_parameters() == ResNetMnist::kNumParameters);

  // state_dict names (parameters + BN buffers) = the fixture's init/* names, in order.
  std::vector<std::string> expected_state;
  for (const auto& [name, tensor] : fixture().with_prefix("init/")) expected_state.push_back(name);
  std::vector<std::string> state;
  for (const auto& [name, tensor] : net.state_dict()) state.push_back(name);
  CHECK(state == expected_state);
  CHECK(state.size() == 47);

  // named_parameters = the fixture's step0/grad/* names (PyTorch's named_parameters).
  std::vector<std::string> expected_params;
  for (const auto& [name, tensor] : fixture().with_prefix("step0/grad/")) {
    expected_params.push_back(name);
  }
  std::vector<std::string> params;
  for (const auto& [name, p] : net.named_parameters()) params.push_back(name);
  CHECK(params == expected_params);
  CHECK(params.size() == 29);

  // And the shapes match, entry by entry.
  for (const auto& [name, tensor] : net.state_dict()) {
    INFO(name);
    CHECK(tensor.shape() == fixture().at("init/" + name).shape());
  }
}

TEST_CASE("parity with PyTorch: training-mode forward, loss and every gradient",
          "[nn][parity]") {
  const auto& fx = fixture();
  auto net = pytorch_initialised();
  net->train();
  const Variable x(fx.at("batch/x"));
  const Variable logits = net->forward(x);
  const Variable loss = ddp::cross_entropy(logits, fx.labels);
  REQUIRE(logits.shape() == ddp::Shape{16, 10});

  const double logits_err = relative_error(logits.data(), fx.at("step0/logits"));
  const double loss_err = relative_error(loss.data(), fx.at("step0/loss"));
  CAPTURE(logits_err, loss_err);
  CHECK(logits_err < kLogitsTol);
  CHECK(loss_err < kLogitsTol);

  loss.backward();
  double worst = 0.0;
  std::string worst_name;
  for (const auto& [name, p] : net->named_parameters()) {
    INFO("gradient of " << name);
    REQUIRE(p.grad().defined());
    const double err = relative_error(p.grad(), fx.at("step0/grad/" + name));
    CHECK(err < kGradTol);
    if (err > worst) {
      worst = err;
      worst_name = name;
    }
  }
  std::printf("parity step 0: logits %.2e, loss %.2e, worst gradient %.2e (%s)\n", logits_err,
              loss_err, worst, worst_name.c_str());
}

TEST_CASE("parity with PyTorch: 3 SGD steps, then eval-mode logits", "[nn][parity]") {
  const auto& fx = fixture();
  auto net = pytorch_initialised();
  ddp::nn::SGD sgd(net->parameters(), reference_sgd());
  const Variable x(fx.at("batch/x"));
  net->train();
  for (int step = 0; step < 3; ++step) {
    sgd.zero_grad();
    ddp::cross_entropy(net->forward(x), fx.labels).backward();
    sgd.step();
  }
  double worst = 0.0;
  std::string worst_name;
  for (const auto& [name, tensor] : net->state_dict()) {
    INFO("after 3 steps: " << name);
    const double err = relative_error(tensor, fx.at("after3/" + name));
    CHECK(err < kAfter3Tol);
    if (err > worst) {
      worst = err;
      worst_name = name;
    }
  }

  net->eval();
  ddp::NoGradGuard no_grad;
  const double eval_err = relative_error(net->forward(x).data(), fx.at("after3/eval_logits"));
  CAPTURE(eval_err);
  CHECK(eval_err < kLogitsTol);
  std::printf("parity after 3 steps: worst tensor %.2e (%s), eval logits %.2e\n", worst,
              worst_name.c_str(), eval_err);
}

TEST_CASE("ResNetMnist overfits one batch of 16 digits to 100% accuracy", "[nn][train]") {
  // From our own initialisation (not PyTorch's): the network, the loss, the gradients and
  // SGD together must be able to learn. 16 images, 10 classes: a working stack fits them
  // in well under 30 steps (11 here); a broken gradient never does.
  const auto& fx = fixture();
  Generator gen(2024);
  ResNetMnist net(gen);
  ddp::nn::SGD sgd(net.parameters(), reference_sgd());
  const Variable x(fx.at("batch/x"));
  const std::vector<std::int64_t> labels = fx.labels.to_vector<std::int64_t>();
  constexpr int kMaxSteps = 30;
  int steps = 0;
  double accuracy = 0.0;
  double first_loss = 0.0;
  double last_loss = 0.0;
  for (; steps < kMaxSteps; ++steps) {
    sgd.zero_grad();
    const Variable logits = net.forward(x);
    const Variable loss = ddp::cross_entropy(logits, fx.labels);
    last_loss = loss.data().item<float>();
    if (steps == 0) first_loss = last_loss;
    const std::vector<std::int64_t> predicted =
        ddp::argmax(logits.data(), 1).to_vector<std::int64_t>();
    int correct = 0;
    for (std::size_t i = 0; i < labels.size(); ++i) correct += predicted[i] == labels[i];
    accuracy = static_cast<double>(correct) / static_cast<double>(labels.size());
    if (accuracy == 1.0) break;
    loss.backward();
    sgd.step();
  }
  CAPTURE(steps, accuracy, first_loss, last_loss);
  CHECK(accuracy == 1.0);
  CHECK(last_loss < first_loss);
}
