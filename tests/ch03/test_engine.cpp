// Chapter 03, the backward engine (autograd/engine.cpp) and the leaves' grad-ready
// hooks: accumulation, shared leaves, retain_graph, no_grad, detach, and the timing that
// chapter 07's Reducer relies on -- a parameter's hook fires as soon as its gradient is
// final, exactly once per backward, before the engine reaches the earlier layers.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "autograd/function.hpp"
#include "autograd/functions.hpp"
#include "autograd/grad_mode.hpp"
#include "autograd/graph_walk.hpp"
#include "tensor/ops.hpp"
#include "tests/ch03/naive.hpp"

using Catch::Contains;
using ddp::Tensor;
using ddp::Variable;
namespace test = ddp::test;

namespace {

Tensor vec(std::vector<float> v) {
  const auto n = static_cast<std::int64_t>(v.size());
  return ddp::from_data(v, {n});
}

// A linear layer whose backward Node writes its tag into `log` when it runs: the
// instrument that shows WHEN the engine reaches a layer.
struct LoggedLinearBackward final : ddp::Node {
  Tensor x, weight;
  std::vector<std::string>* log = nullptr;
  std::string tag;
  std::vector<Tensor> backward(const Tensor& g) override {
    log->push_back("backward " + tag);
    Tensor gx, gw, gb;
    if (needs_input_grad(0)) gx = ddp::matmul(g, weight);
    if (needs_input_grad(1)) gw = ddp::matmul(g.t(), x);
    if (needs_input_grad(2)) gb = ddp::sum(g, 0);
    return {gx, gw, gb};
  }
  const char* name() const override { return "LoggedLinearBackward"; }
};

Variable logged_linear(const Variable& x, const Variable& w, const Variable& b,
                       std::vector<std::string>& log, const std::string& tag) {
  Tensor y = ddp::add(ddp::matmul(x.data(), w.data().t()), b.data());
  return ddp::make_result(std::move(y), {x, w, b}, [&] {
    auto node = std::make_shared<LoggedLinearBackward>();
    node->x = x.data();
    node->weight = w.data();
    node->log = &log;
    node->tag = tag;
    return node;
  });
}

std::ptrdiff_t position(const std::vector<std::string>& log, const std::string& entry) {
  const auto it = std::find(log.begin(), log.end(), entry);
  return it == log.end() ? -1 : it - log.begin();
}

}  // namespace

TEST_CASE("gradients accumulate across backward passes until zero_grad",
          "[ch03][engine][ex03.2]") {
  const Variable x(vec({1, 2, 3}), true);
  ddp::sum(x * 2.0).backward();
  ddp::sum(x * 2.0).backward();
  CHECK(test::values(x.grad()) == std::vector<double>{4, 4, 4});
  x.zero_grad();
  CHECK_FALSE(x.grad().defined());
  ddp::sum(x * 3.0).backward();
  CHECK(test::values(x.grad()) == std::vector<double>{3, 3, 3});
}

TEST_CASE("a leaf used twice receives the sum of both paths", "[ch03][engine][ex03.2]") {
  const Variable x(vec({1, -2, 3}), true);
  ddp::sum(x * x).backward();  // d/dx x^2 = 2x, from two edges into one AccumulateGrad
  CHECK(test::values(x.grad()) == std::vector<double>{2, -4, 6});
  x.zero_grad();
  const Variable h = ddp::exp(x);
  ddp::sum(h + h * 2.0).backward();  // an intermediate used twice: 3 exp(x)
  const std::vector<double> got = test::values(x.grad());
  for (std::size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i] == Approx(3.0 * std::exp(std::vector<double>{1, -2, 3}[i])).epsilon(1e-6));
  }
}

TEST_CASE("count_dependencies counts the edges into each node of exp(x) + 2 exp(x)",
          "[ch03][engine][ex03.2]") {
  // sum <- add <- {exp, mul}, mul <- exp, exp <- AccumulateGrad(x): exp is reached twice.
  const Variable x(vec({1, -2, 3}), true);
  const Variable h = ddp::exp(x);
  const Variable loss = ddp::sum(h + h * 2.0);
  ddp::Node* sum = loss.grad_fn().get();
  REQUIRE(sum->next_functions().size() == 1);
  ddp::Node* add = sum->next_functions()[0].get();
  REQUIRE(add->next_functions().size() == 2);
  ddp::Node* exp = add->next_functions()[0].get();
  ddp::Node* mul = add->next_functions()[1].get();
  REQUIRE(mul->next_functions().size() == 1);
  REQUIRE(mul->next_functions()[0].get() == exp);
  REQUIRE(exp->next_functions().size() == 1);
  ddp::Node* accumulate = exp->next_functions()[0].get();

  const std::unordered_map<ddp::Node*, int> got = ddp::detail::count_dependencies(sum);
  CHECK(got.size() == 4);  // every node but the root
  CHECK(got.count(sum) == 0);
  CHECK(got.at(add) == 1);
  CHECK(got.at(mul) == 1);
  CHECK(got.at(exp) == 2);
  CHECK(got.at(accumulate) == 1);
}

TEST_CASE("walk_graph runs a node once, after every node that feeds it, the latest first",
          "[ch03][engine][ex03.2]") {
  // x -> L1 -> {L2, L3} -> a + b -> sum: L1 has two consumers and must wait for both.
  // L2 and L3 are ready together; L3 was created later, so it runs first.
  std::mt19937 rng(504);
  std::vector<std::string> log;
  std::vector<Variable> p;
  for (int i = 0; i < 6; ++i) {
    p.emplace_back(test::random_tensor(rng, i % 2 ? ddp::Shape{4} : ddp::Shape{4, 4}, -1, 1),
                   true);
  }
  const Variable x(test::random_tensor(rng, {3, 4}, -1, 1));
  const Variable h = logged_linear(x, p[0], p[1], log, "L1");
  const Variable a = logged_linear(h, p[2], p[3], log, "L2");
  const Variable b = logged_linear(h, p[4], p[5], log, "L3");
  ddp::sum(a + b).backward();
  CHECK(log == std::vector<std::string>{"backward L3", "backward L2", "backward L1"});
  // d(sum)/db1 = sum over the batch of (dh = ones W2 + ones W3): the gradients of both
  // consumers arrived before L1 ran.
  const std::vector<double> w2 = test::values(p[2].data()), w3 = test::values(p[4].data());
  const std::vector<double> gb1 = test::values(p[1].grad());
  for (std::size_t k = 0; k < 4; ++k) {
    double want = 0;
    for (std::size_t o = 0; o < 4; ++o) want += 3.0 * (w2[o * 4 + k] + w3[o * 4 + k]);
    CHECK(gb1[k] == Approx(want).epsilon(1e-5));
  }
}

TEST_CASE("retain_graph keeps the saved tensors, and without it a second backward fails",
          "[ch03][engine][ex03.2]") {
  const Variable x(vec({1, 2}), true);
  const Variable loss = ddp::sum(x * x);
  loss.backward(Tensor(), /*retain_graph=*/true);
  loss.backward();  // allowed: the graph was kept, and this pass frees it
  CHECK(test::values(x.grad()) == std::vector<double>{4, 8});
  CHECK_THROWS_WITH(loss.backward(), Contains("a second time") && Contains("retain_graph"));
}

TEST_CASE("backward needs a one-element output or an explicit gradient", "[ch03][engine]") {
  const Variable x(vec({1, 2}), true);
  CHECK_THROWS_WITH((x * 2.0).backward(), Contains("one-element output"));
  const Variable y = x * 2.0;
  y.backward(vec({1, 10}));
  CHECK(test::values(x.grad()) == std::vector<double>{2, 20});
  CHECK_THROWS_WITH(Variable(vec({1})).backward(), Contains("does not require grad"));
}

TEST_CASE("under NoGradGuard nothing is recorded", "[ch03][engine]") {
  const Variable w(vec({1, 2}), true);
  {
    ddp::NoGradGuard no_grad;
    const Variable y = ddp::sum(w * w);
    CHECK_FALSE(y.requires_grad());
    CHECK(y.grad_fn() == nullptr);
    CHECK_FALSE(ddp::grad_enabled());
  }
  CHECK(ddp::grad_enabled());
  CHECK(ddp::sum(w * w).requires_grad());
}

TEST_CASE("detach cuts the graph but shares the values", "[ch03][engine]") {
  const Variable x(vec({1, 2}), true), w(vec({3, 4}), true);
  const Variable d = x.detach();
  CHECK(d.is_leaf());
  CHECK_FALSE(d.requires_grad());
  CHECK(d.data().storage() == x.data().storage());
  ddp::sum(d * w + x).backward();
  CHECK(test::values(x.grad()) == std::vector<double>{1, 1});  // only through "+ x"
  CHECK(test::values(w.grad()) == std::vector<double>{1, 2});
}

TEST_CASE("an input that needs no gradient gets none, and its backward work is skipped",
          "[ch03][engine][ex03.2]") {
  std::mt19937 rng(501);
  const Variable x(test::random_tensor(rng, {2, 3, 5, 5}, -1, 1));  // data: no grad
  const Variable w(test::random_tensor(rng, {4, 3, 3, 3}, -1, 1), true);
  const Variable y = ddp::conv2d(x, w, Variable(), 1, 1);
  CHECK(y.grad_fn()->needs_input_grad(1));
  CHECK_FALSE(y.grad_fn()->needs_input_grad(0));
  ddp::sum(y).backward();
  CHECK_FALSE(x.grad().defined());
  CHECK(w.grad().shape() == ddp::Shape{4, 3, 3, 3});
}

TEST_CASE("grad-ready hooks fire in reverse layer order, before earlier layers run",
          "[ch03][engine][hooks][ex03.2]") {
  // x -> L1 -> relu -> L2 -> relu -> L3 -> loss. Each layer's backward Node logs when it
  // runs, each parameter's hook logs when it fires.
  std::mt19937 rng(502);
  std::vector<std::string> log;
  std::vector<Variable> params;
  for (int layer = 1; layer <= 3; ++layer) {
    params.emplace_back(test::random_tensor(rng, {4, 4}, -1, 1), true);  // W
    params.emplace_back(test::random_tensor(rng, {4}, -1, 1), true);     // b
  }
  const char* names[] = {"W1", "b1", "W2", "b2", "W3", "b3"};
  for (std::size_t i = 0; i < params.size(); ++i) {
    params[i].register_grad_ready_hook(
        [&log, name = std::string(names[i])](const Variable&) { log.push_back("hook " + name); });
  }
  const Variable x(test::random_tensor(rng, {3, 4}, -1, 1));
  Variable h = ddp::relu(logged_linear(x, params[0], params[1], log, "L1"));
  h = ddp::relu(logged_linear(h, params[2], params[3], log, "L2"));
  ddp::sum(logged_linear(h, params[4], params[5], log, "L3")).backward();

  INFO("order: " << [&] {
    std::string all;
    for (const std::string& e : log) all += e + "; ";
    return all;
  }());
  REQUIRE(log.size() == 9);
  // The last layer's parameters are handed over before the first layer's backward runs
  // (indeed before the second's): the overlap DDP's all-reduce is built on.
  CHECK(position(log, "backward L3") == 0);
  CHECK(position(log, "hook W3") < position(log, "backward L2"));
  CHECK(position(log, "hook b3") < position(log, "backward L2"));
  CHECK(position(log, "hook W2") < position(log, "backward L1"));
  CHECK(position(log, "hook b2") < position(log, "backward L1"));
  CHECK(position(log, "hook W3") < position(log, "backward L1"));
  CHECK(position(log, "hook W1") > position(log, "backward L1"));
  CHECK(position(log, "hook b1") > position(log, "backward L1"));
}

TEST_CASE("a hook fires once per backward, with the final gradient, even for a shared "
          "parameter", "[ch03][engine][hooks][ex03.2]") {
  // W is used by layer 1 and layer 3: its AccumulateGrad waits for both edges.
  std::mt19937 rng(503);
  std::vector<std::string> log;
  const Variable w(test::random_tensor(rng, {4, 4}, -1, 1), true);
  const Variable b1(test::random_tensor(rng, {4}, -1, 1), true);
  const Variable b2(test::random_tensor(rng, {4}, -1, 1), true);
  const Variable b3(test::random_tensor(rng, {4}, -1, 1), true);
  std::vector<Tensor> seen;  // the gradient at each firing, copied
  w.register_grad_ready_hook([&](const Variable& p) {
    log.push_back("hook W");
    seen.push_back(p.grad().clone());
  });
  const Variable v(test::random_tensor(rng, {4, 4}, -1, 1), true);
  const Variable x(test::random_tensor(rng, {3, 4}, -1, 1));
  auto loss = [&] {
    Variable h = ddp::relu(logged_linear(x, w, b1, log, "L1"));
    h = ddp::relu(logged_linear(h, v, b2, log, "L2"));
    return ddp::sum(logged_linear(h, w, b3, log, "L3"));
  };
  loss().backward();
  REQUIRE(seen.size() == 1);
  CHECK(position(log, "hook W") > position(log, "backward L1"));  // after BOTH uses
  CHECK(test::close(seen[0], w.grad(), 0.0) == "");

  // A second pass (no zero_grad): one more firing, with the accumulated gradient.
  const Tensor first = w.grad().clone();
  loss().backward();
  REQUIRE(seen.size() == 2);
  CHECK(test::close(seen[1], w.grad(), 0.0) == "");
  CHECK(test::close(seen[1], ddp::mul(first, 2.0), 1e-6) == "");
}

TEST_CASE("a parameter can be used by a new graph while an old, freed graph is alive",
          "[ch03][engine][ex03.2]") {
  // The training-loop pattern `loss = f(w); loss.backward();` with `loss` declared
  // outside the loop: while step 2 builds its graph, step 1's loss (backwarded, freed)
  // still holds w's AccumulateGrad, and the new graph shares it.
  const Variable w(vec({1, 2}), true);
  Variable loss;
  for (int step = 0; step < 3; ++step) {
    loss = ddp::sum(w * w);
    loss.backward();
  }
  CHECK(test::values(w.grad()) == std::vector<double>{6, 12});
}
