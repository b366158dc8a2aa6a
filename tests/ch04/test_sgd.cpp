// Chapter 04, SGD in PyTorch's form against closed forms: with a constant gradient g the
// trajectories of plain SGD, weight decay, momentum (with and without dampening) and
// Nesterov have formulas in t; with changing gradients, a step-by-step reference in
// double written out by hand. Also: skipped parameters, set_lr, and the optimizer state.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "nn/sgd.hpp"
#include "nn/state_dict.hpp"
#include "tensor/ops.hpp"
#include "tensor/random.hpp"

using Catch::Contains;
using ddp::Tensor;
using ddp::Variable;
using ddp::nn::SGD;
using ddp::nn::SGDOptions;

namespace {

Variable parameter(const std::vector<float>& values) {
  return Variable(ddp::from_data(values, {static_cast<std::int64_t>(values.size())}), true);
}

Tensor grad_of(const std::vector<float>& values) {
  return ddp::from_data(values, {static_cast<std::int64_t>(values.size())});
}

// Runs `steps` steps of `options` on p = p0 with the constant gradient g; returns p.
float run_constant(SGDOptions options, float p0, float g, int steps) {
  Variable p = parameter({p0});
  SGD sgd({p}, options);
  for (int t = 0; t < steps; ++t) {
    p.set_grad(grad_of({g}));
    sgd.step();
  }
  return p.data().item<float>();
}

}  // namespace

TEST_CASE("SGD with a constant gradient follows the closed forms", "[nn][sgd][ex04.1]") {
  const double p0 = 1.5, g = 0.8, lr = 0.05;
  const int T = 20;

  SECTION("plain: p_T = p0 - T lr g") {
    CHECK(run_constant({.lr = lr}, 1.5f, 0.8f, T) == Approx(p0 - T * lr * g).epsilon(1e-5));
  }
  SECTION("weight decay: p_T = (1 - lr wd)^T (p0 + g/wd) - g/wd") {
    const double wd = 0.1;
    const double expected = std::pow(1.0 - lr * wd, T) * (p0 + g / wd) - g / wd;
    CHECK(run_constant({.lr = lr, .weight_decay = wd}, 1.5f, 0.8f, T) ==
          Approx(expected).epsilon(1e-5));
  }
  SECTION("momentum: b_t = g (1 - m^(t+1)) / (1 - m), the first buffer is g itself") {
    const double m = 0.9;
    double expected = p0;
    for (int t = 0; t < T; ++t) expected -= lr * g * (1.0 - std::pow(m, t + 1)) / (1.0 - m);
    CHECK(run_constant({.lr = lr, .momentum = m}, 1.5f, 0.8f, T) ==
          Approx(expected).epsilon(1e-5));
  }
  SECTION("dampening d: b_0 = g (undamped), b_t = m^t g + (1 - d) g (1 - m^t) / (1 - m)") {
    const double m = 0.9, d = 0.5;
    double expected = p0;
    for (int t = 0; t < T; ++t) {
      const double b = std::pow(m, t) * g + (1.0 - d) * g * (1.0 - std::pow(m, t)) / (1.0 - m);
      expected -= lr * b;
    }
    CHECK(run_constant({.lr = lr, .momentum = m, .dampening = d}, 1.5f, 0.8f, T) ==
          Approx(expected).epsilon(1e-5));
    // One step shows the undamped first buffer: p1 = p0 - lr g, not p0 - lr (1 - d) g.
    CHECK(run_constant({.lr = lr, .momentum = m, .dampening = d}, 1.5f, 0.8f, 1) ==
          Approx(p0 - lr * g).epsilon(1e-6));
  }
  SECTION("Nesterov: the step is g + m b_t") {
    const double m = 0.9;
    double expected = p0;
    for (int t = 0; t < T; ++t) {
      const double b = g * (1.0 - std::pow(m, t + 1)) / (1.0 - m);
      expected -= lr * (g + m * b);
    }
    CHECK(run_constant({.lr = lr, .momentum = m, .nesterov = true}, 1.5f, 0.8f, T) ==
          Approx(expected).epsilon(1e-5));
  }
}

TEST_CASE("SGD with changing gradients matches a hand-written reference", "[nn][sgd][ex04.1]") {
  // The update of torch.optim.SGD, written out in double, one element at a time.
  struct Case {
    const char* name;
    SGDOptions options;
  };
  const std::vector<Case> cases = {
      {"momentum + dampening + weight decay",
       {.lr = 0.1, .momentum = 0.8, .dampening = 0.3, .weight_decay = 0.01}},
      {"Nesterov + weight decay",
       {.lr = 0.05, .momentum = 0.9, .weight_decay = 5e-4, .nesterov = true}},
      {"ref_model.py's recipe", {.lr = 0.1, .momentum = 0.9, .weight_decay = 5e-4}},
  };
  const std::vector<std::vector<float>> grads = {
      {0.5f, -1.0f, 2.0f}, {0.1f, 0.3f, -0.7f}, {-0.4f, 0.0f, 1.2f}, {0.9f, -0.2f, 0.05f}};
  for (const Case& c : cases) {
    INFO(c.name);
    const SGDOptions& o = c.options;
    Variable p = parameter({1.0f, -2.0f, 0.25f});
    SGD sgd({p}, o);
    std::vector<double> ref = {1.0, -2.0, 0.25};
    std::vector<double> buf(3, 0.0);
    for (std::size_t t = 0; t < grads.size(); ++t) {
      p.set_grad(grad_of(grads[t]));
      sgd.step();
      for (std::size_t i = 0; i < 3; ++i) {
        double d = grads[t][i] + o.weight_decay * ref[i];
        buf[i] = t == 0 ? d : o.momentum * buf[i] + (1.0 - o.dampening) * d;
        d = o.nesterov ? d + o.momentum * buf[i] : buf[i];
        ref[i] -= o.lr * d;
      }
      const std::vector<float> got = p.data().to_vector<float>();
      const std::vector<float> got_buf = sgd.momentum_buffers()[0].to_vector<float>();
      for (std::size_t i = 0; i < 3; ++i) {
        CHECK(got[i] == Approx(ref[i]).epsilon(1e-5).margin(1e-7));
        CHECK(got_buf[i] == Approx(buf[i]).epsilon(1e-5).margin(1e-7));
      }
    }
  }
}

TEST_CASE("SGD skips parameters without a gradient and leaves gradients alone",
          "[nn][sgd][ex04.1]") {
  Variable a = parameter({1.0f, 2.0f});
  Variable b = parameter({3.0f});
  SGD sgd({a, b}, {.lr = 0.5, .momentum = 0.9, .weight_decay = 0.1});
  a.set_grad(grad_of({1.0f, 1.0f}));
  sgd.step();
  CHECK(b.data().item<float>() == 3.0f);  // no gradient, no weight decay either
  CHECK_FALSE(sgd.momentum_buffers()[1].defined());
  CHECK(a.grad().to_vector<float>() == std::vector<float>{1.0f, 1.0f});
  // a = 1 - 0.5 (1 + 0.1 * 1) = 0.45
  CHECK(a.data().to_vector<float>()[0] == Approx(0.45));
  sgd.zero_grad();
  CHECK_FALSE(a.grad().defined());
}

TEST_CASE("set_lr changes later steps without rescaling the momentum", "[nn][sgd][ex04.1]") {
  Variable p = parameter({0.0f});
  SGD sgd({p}, {.lr = 0.1, .momentum = 0.9});
  p.set_grad(grad_of({1.0f}));
  sgd.step();  // b = 1, p = -0.1
  sgd.set_lr(0.01);
  sgd.step();  // b = 0.9 + 1 = 1.9, p = -0.1 - 0.019
  CHECK(p.data().item<float>() == Approx(-0.119));
  CHECK(sgd.lr() == 0.01);
}

TEST_CASE("SGD's momentum buffers survive a save and a load", "[nn][sgd][ex04.1]") {
  const SGDOptions options{.lr = 0.1, .momentum = 0.9, .weight_decay = 5e-4};
  Variable a = parameter({1.0f, 2.0f, 3.0f});
  SGD sgd_a({a}, options);
  for (float g : {0.5f, -0.25f}) {
    a.set_grad(grad_of({g, g, g}));
    sgd_a.step();
  }
  const auto path = std::filesystem::temp_directory_path() /
                    ("ddp_ch04_sgd_" + std::to_string(::getpid()) + ".state");
  ddp::nn::save_state_dict(sgd_a.state_dict(), path);

  // A restarted run: the parameter's values (from a model checkpoint) and the buffers.
  Variable b(a.data().clone(), true);
  SGD sgd_b({b}, options);
  sgd_b.load_state_dict(ddp::nn::read_state_dict(path), path.string());
  std::filesystem::remove(path);
  a.set_grad(grad_of({0.3f, 0.3f, 0.3f}));
  b.set_grad(grad_of({0.3f, 0.3f, 0.3f}));
  sgd_a.step();
  sgd_b.step();
  CHECK(a.data().to_vector<float>() == b.data().to_vector<float>());

  ddp::nn::StateDict wrong = {{"momentum_buffer.0", ddp::zeros({4})}};
  CHECK_THROWS_WITH(sgd_b.load_state_dict(wrong, "ckpt.state"),
                    Contains("ckpt.state") && Contains("'momentum_buffer.0'"));
  ddp::nn::StateDict unknown = {{"momentum_buffer.7", ddp::zeros({3})}};
  CHECK_THROWS_WITH(sgd_b.load_state_dict(unknown), Contains("unexpected entry"));
}

TEST_CASE("SGD rejects the option combinations PyTorch rejects", "[nn][sgd]") {
  Variable p = parameter({1.0f});
  CHECK_THROWS_WITH(SGD({p}, {.lr = -1.0}), Contains("learning rate"));
  CHECK_THROWS_WITH(SGD({p}, {.lr = 0.1, .nesterov = true}), Contains("Nesterov"));
  CHECK_THROWS_WITH(SGD({p}, {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .nesterov = true}),
                    Contains("dampening = 0"));
  CHECK_THROWS_WITH(SGD({Variable(ddp::zeros({1}))}, {.lr = 0.1}), Contains("requires grad"));
}
