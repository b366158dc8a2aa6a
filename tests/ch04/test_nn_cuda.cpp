// Chapter 04 on a GPU: the PyTorch parity check of test_parity.cpp with the network
// moved to cuda:0 (Module::to), and the CPU and GPU networks side by side on the same
// batch: logits, loss, every gradient and one SGD step agree. Skipped without a GPU.
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "autograd/functions.hpp"
#include "autograd/grad_mode.hpp"
#include "nn/resnet_mnist.hpp"
#include "nn/sgd.hpp"
#include "tensor/random.hpp"
#include "nn/resnet_fixture.hpp"

using ddp::Device;
using ddp::Generator;
using ddp::Variable;
using ddp::nn::relative_error;
using ddp::nn::ResNetMnist;

namespace {

const ddp::nn::ResNetFixture& fixture() {
  static const auto fx = ddp::nn::load_resnet_fixture(DDP_RESNET_FIXTURE_DIR);
  return fx;
}

std::unique_ptr<ResNetMnist> pytorch_initialised(Device device) {
  Generator gen(7);
  auto net = std::make_unique<ResNetMnist>(gen);
  net->load_state_dict(fixture().with_prefix("init/"), "the parity fixture's init/*");
  net->to(device);
  return net;
}

const ddp::nn::SGDOptions kRecipe{.lr = 0.1, .momentum = 0.9, .weight_decay = 5e-4};

}  // namespace

TEST_CASE("parity with PyTorch on the GPU: forward, gradients, 3 steps, eval",
          "[nn][parity][cuda]") {
  const auto& fx = fixture();
  const Device gpu = Device::cuda(0);
  auto net = pytorch_initialised(gpu);
  for (const auto& [name, tensor] : net->state_dict()) REQUIRE(tensor.device() == gpu);
  const Variable x(fx.at("batch/x").to(gpu));
  const ddp::Tensor labels = fx.labels.to(gpu);

  const Variable logits = net->forward(x);
  const Variable loss = ddp::cross_entropy(logits, labels);
  CHECK(relative_error(logits.data(), fx.at("step0/logits")) < 1e-4);
  CHECK(relative_error(loss.data(), fx.at("step0/loss")) < 1e-4);
  loss.backward();
  for (const auto& [name, p] : net->named_parameters()) {
    INFO("gradient of " << name);
    CHECK(p.grad().device() == gpu);
    CHECK(relative_error(p.grad(), fx.at("step0/grad/" + name)) < 1e-3);
  }
  ddp::nn::SGD sgd(net->parameters(), kRecipe);
  sgd.step();
  for (int step = 1; step < 3; ++step) {
    sgd.zero_grad();
    ddp::cross_entropy(net->forward(x), labels).backward();
    sgd.step();
  }
  for (const auto& [name, tensor] : net->state_dict()) {
    INFO("after 3 steps: " << name);
    CHECK(relative_error(tensor, fx.at("after3/" + name)) < 5e-3);
  }
  net->eval();
  ddp::NoGradGuard no_grad;
  CHECK(relative_error(net->forward(x).data(), fx.at("after3/eval_logits")) < 1e-4);
}

TEST_CASE("the CPU and GPU networks agree: forward, backward, one SGD step",
          "[nn][cuda]") {
  const auto& fx = fixture();
  Generator gen_cpu(99), gen_gpu(99);
  ResNetMnist cpu_net(gen_cpu), gpu_net(gen_gpu);  // same seed: same weights
  gpu_net.to(Device::cuda(0));
  const Variable x_cpu(fx.at("batch/x"));
  const Variable x_gpu(fx.at("batch/x").cuda());

  const Variable loss_cpu = ddp::cross_entropy(cpu_net.forward(x_cpu), fx.labels);
  const Variable loss_gpu = ddp::cross_entropy(gpu_net.forward(x_gpu), fx.labels.cuda());
  CHECK(relative_error(loss_gpu.data(), loss_cpu.data()) < 1e-5);
  loss_cpu.backward();
  loss_gpu.backward();
  const auto cpu_params = cpu_net.named_parameters();
  const auto gpu_params = gpu_net.named_parameters();
  REQUIRE(cpu_params.size() == gpu_params.size());
  for (std::size_t i = 0; i < cpu_params.size(); ++i) {
    INFO("gradient of " << cpu_params[i].first);
    CHECK(relative_error(gpu_params[i].second.grad(), cpu_params[i].second.grad()) < 1e-4);
  }
  ddp::nn::SGD sgd_cpu(cpu_net.parameters(), kRecipe), sgd_gpu(gpu_net.parameters(), kRecipe);
  sgd_cpu.step();
  sgd_gpu.step();
  const auto cpu_state = cpu_net.state_dict();
  const auto gpu_state = gpu_net.state_dict();
  for (std::size_t i = 0; i < cpu_state.size(); ++i) {
    INFO(cpu_state[i].first);
    CHECK(relative_error(gpu_state[i].second, cpu_state[i].second) < 1e-4);
  }
}
