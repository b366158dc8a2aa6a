// Chapter 09, exercise 09.3: when FSDP gathers and frees a unit (fsdp_unit_order.cpp), on
// a group of one rank, where every collective is a copy: the order of gathers, frees and
// reduce-scatters over a training step against the schedule of
// fully_sharded_data_parallel.hpp, and three steps of training against the same network
// trained without FSDP, bit for bit. (ch09.fsdp runs the same hooks at 2 to 4 ranks.)
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "dist/parallel/fully_sharded_data_parallel.hpp"
#include "autograd/functions.hpp"
#include "autograd/grad_mode.hpp"
#include "nn/linear.hpp"
#include "nn/relu.hpp"
#include "nn/sequential.hpp"
#include "nn/sgd.hpp"
#include "tensor/ops.hpp"
#include "tensor/random.hpp"
#include "tests/ch09/fsdp_schedule.hpp"
#include "tests/support/replicas.hpp"
#include "tests/support/world_of_one.hpp"

using ddp::FullyShardedDataParallel;
using ddp::Tensor;
using ddp::Variable;

namespace {

// Three units, one per Linear (the ReLUs have no parameters: no unit).
std::shared_ptr<ddp::nn::Sequential> three_units() {
  ddp::Generator gen(5);
  auto model = std::make_shared<ddp::nn::Sequential>();
  model->push_back(std::make_shared<ddp::nn::Linear>(16, 12, true, gen));
  model->push_back(std::make_shared<ddp::nn::ReLU>());
  model->push_back(std::make_shared<ddp::nn::Linear>(12, 8, true, gen));
  model->push_back(std::make_shared<ddp::nn::ReLU>());
  model->push_back(std::make_shared<ddp::nn::Linear>(8, 4, true, gen));
  return model;
}

std::unique_ptr<ddp::nn::Optimizer> sgd(std::vector<Variable> parameters) {
  return std::make_unique<ddp::nn::SGD>(std::move(parameters),
                                        ddp::nn::SGDOptions{.lr = 0.1, .momentum = 0.9});
}

struct Batch {
  Tensor x, y;
};

Batch batch(std::uint64_t seed) {
  ddp::Generator gen(seed);
  std::vector<std::int64_t> labels = {0, 1, 2, 3, 1, 2};
  return {ddp::randn({6, 16}, gen), ddp::from_data(std::span<const std::int64_t>(labels), {6})};
}

std::string joined(const std::vector<std::string>& events) {
  std::string out;
  for (const std::string& e : events) out += (out.empty() ? "" : ", ") + e;
  return out;
}

}  // namespace

TEST_CASE("FSDP gathers each unit before its forward and backward and frees it after",
          "[fsdp][ch09][ex09.3]") {
  auto group = ddp::testing::world_of_one();
  FullyShardedDataParallel fsdp(three_units(), *group, sgd);
  fsdp.record_events(true);
  const Batch b = batch(1);
  ddp::cross_entropy(fsdp(Variable(b.x)), b.y).backward();
  const std::vector<std::string>& expected = ddp::test::kThreeUnitStep;
  CHECK(joined(fsdp.events()) == joined(expected));
}

TEST_CASE("FSDP without a backward to follow frees every unit after its forward",
          "[fsdp][ch09][ex09.3]") {
  auto group = ddp::testing::world_of_one();
  FullyShardedDataParallel fsdp(three_units(), *group, sgd);
  fsdp.record_events(true);
  const Batch b = batch(1);
  {
    const ddp::NoGradGuard no_grad;  // an evaluation: nothing will need the last unit
    fsdp(Variable(b.x));
  }
  const std::vector<std::string> expected = {"gather 0", "gather 1", "free 0",
                                             "gather 2", "free 1",   "free 2"};
  CHECK(joined(fsdp.events()) == joined(expected));
}

TEST_CASE("FSDP on one rank trains as the network without it, bit for bit",
          "[fsdp][ch09][ex09.3]") {
  auto group = ddp::testing::world_of_one();
  auto reference = three_units();
  auto plain = sgd(reference->parameters());
  FullyShardedDataParallel fsdp(three_units(), *group, sgd);
  for (std::uint64_t step = 0; step < 3; ++step) {
    const Batch b = batch(10 + step);
    ddp::cross_entropy((*reference)(Variable(b.x)), b.y).backward();
    plain->step();
    plain->zero_grad();
    ddp::cross_entropy(fsdp(Variable(b.x)), b.y).backward();
    fsdp.step();
    fsdp.zero_grad();
    const FullyShardedDataParallel::SummonFullParameters full(fsdp);
    INFO("after step " << step + 1);
    CHECK(ddp::test::max_difference(fsdp.module(), *reference) == 0.0);
  }
}

TEST_CASE("FSDP after a forward that no backward followed: the step leaves no unit stale",
          "[fsdp][ch09]") {
  // The last unit stays whole after a forward that records gradients. If no backward comes
  // and the optimizer steps, the next forward must gather it again, not compute with the
  // values from before the step.
  auto group = ddp::testing::world_of_one();
  auto reference = three_units();
  auto plain = sgd(reference->parameters());
  FullyShardedDataParallel fsdp(three_units(), *group, sgd);
  const Batch b = batch(20);
  ddp::cross_entropy((*reference)(Variable(b.x)), b.y).backward();
  ddp::cross_entropy(fsdp(Variable(b.x)), b.y).backward();
  plain->step();
  fsdp.step();
  (*reference)(Variable(b.x));  // a forward with gradients on, and no backward after it
  fsdp(Variable(b.x));
  plain->step();  // the same gradients again
  fsdp.step();
  const ddp::NoGradGuard no_grad;
  const Tensor want = (*reference)(Variable(b.x)).data();
  const Tensor got = fsdp(Variable(b.x)).data();
  CHECK(ddp::max(ddp::abs(ddp::sub(want, got))).item<float>() == 0.0f);
}
