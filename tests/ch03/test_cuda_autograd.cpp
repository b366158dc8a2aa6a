// Chapter 03 on a GPU: the same small network (conv, batch norm, relu, max pool, 1x1
// conv, global average, linear, cross entropy) run forward and backward on the CPU and on
// cuda:0 from the same values; outputs, every gradient and the running statistics must
// agree. The ops of autograd/ops/ have no GPU code of their own (they are views and
// tensor ops), so this checks that the views and strided in-place adds they are built
// from behave the same on both backends. Skipped (exit 77) without a GPU.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <vector>

#include "autograd/functions.hpp"
#include "tensor/ops.hpp"
#include "tests/ch03/naive.hpp"

using ddp::Device;
using ddp::Tensor;
using ddp::Variable;
namespace test = ddp::test;

namespace {

struct Run {
  Tensor loss, logits, running_mean, running_var;
  std::vector<Tensor> grads;  // on the CPU
};

// params: conv1 w, b; bn w, b; conv2 w (1x1, stride 2); linear w, b.
Run run_network(const Tensor& x, const std::vector<Tensor>& params, const Tensor& labels,
                Device device) {
  std::vector<Variable> p;
  for (const Tensor& t : params) p.emplace_back(t.to(device), true);
  Run run;
  run.running_mean = ddp::zeros({4}).to(device);
  run.running_var = ddp::ones({4}).to(device);
  Variable h = ddp::conv2d(Variable(x.to(device)), p[0], p[1], 2, 1);
  h = ddp::relu(ddp::batch_norm(h, p[2], p[3], run.running_mean, run.running_var, true));
  h = ddp::max_pool2d(h, 3, 2);
  h = ddp::global_avg_pool2d(ddp::conv2d(h, p[4], Variable(), 2, 0));
  const Variable logits = ddp::linear(h, p[5], p[6]);
  const Variable loss = ddp::cross_entropy(logits, labels.to(device));
  loss.backward();
  run.loss = loss.data().cpu();
  run.logits = logits.data().cpu();
  run.running_mean = run.running_mean.cpu();
  run.running_var = run.running_var.cpu();
  for (const Variable& v : p) run.grads.push_back(v.grad().cpu());
  return run;
}

}  // namespace

TEST_CASE("conv, batch norm, pools and cross entropy agree on the CPU and the GPU",
          "[ch03][cuda]") {
  std::mt19937 rng(601);
  const Tensor x = test::random_tensor(rng, {4, 3, 12, 12}, -1, 1);
  const std::vector<Tensor> params{
      test::random_tensor(rng, {4, 3, 3, 3}, -0.5f, 0.5f), test::random_tensor(rng, {4}, -1, 1),
      test::random_tensor(rng, {4}, 0.5f, 1.5f),           test::random_tensor(rng, {4}, -1, 1),
      test::random_tensor(rng, {6, 4, 1, 1}, -1, 1),       test::random_tensor(rng, {5, 6}, -1, 1),
      test::random_tensor(rng, {5}, -1, 1)};
  const Tensor labels = test::labels_tensor({4, 0, 2, 1});
  const Run cpu = run_network(x, params, labels, Device::cpu());
  const Run gpu = run_network(x, params, labels, Device::cuda(0));
  CHECK(test::close(gpu.loss, cpu.loss, 1e-4) == "");
  CHECK(test::close(gpu.logits, cpu.logits, 1e-4) == "");
  CHECK(test::close(gpu.running_mean, cpu.running_mean, 1e-5) == "");
  CHECK(test::close(gpu.running_var, cpu.running_var, 1e-5) == "");
  for (std::size_t i = 0; i < cpu.grads.size(); ++i) {
    INFO("gradient of parameter " << i);
    CHECK(test::close(gpu.grads[i], cpu.grads[i], 1e-4) == "");
  }
}

TEST_CASE("a bad label is reported from a GPU tensor too", "[ch03][cuda]") {
  const Variable logits(ddp::zeros({2, 3}).to(Device::cuda(0)), true);
  CHECK_THROWS_WITH(ddp::cross_entropy(logits, test::labels_tensor({0, 3}).to(Device::cuda(0))),
                    Catch::Contains("label 3 at position 1"));
}
