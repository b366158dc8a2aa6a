// Chapter 03, finite-difference checks: every differentiable op of autograd/functions.hpp
// against gradcheck() (autograd/gradcheck.hpp) on random inputs, a small network end to
// end, and the planted bugs that prove the checker can fail: a convolution whose
// backward is 5% too large, and a batch norm whose backward misses one term.
#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "autograd/function.hpp"
#include "autograd/functions.hpp"
#include "autograd/gradcheck.hpp"
#include "tensor/ops.hpp"
#include "tests/ch03/naive.hpp"

using ddp::GradcheckOptions;
using ddp::GradcheckResult;
using ddp::Tensor;
using ddp::Variable;
using ddp::test::distinct_tensor;
using ddp::test::labels_tensor;
using ddp::test::random_tensor;
using Vars = std::vector<Variable>;

namespace {

GradcheckResult check(const ddp::GradcheckFn& f, const std::vector<Tensor>& inputs,
                      const GradcheckOptions& options = {}) {
  const GradcheckResult result = ddp::gradcheck(f, inputs, options);
  INFO(result.summary());
  CHECK(result.ok);
  return result;
}

Tensor rnd(std::mt19937& rng, const ddp::Shape& shape) { return random_tensor(rng, shape, -1, 1); }

}  // namespace

// ==== Elementwise, reductions, shapes ===================================================

TEST_CASE("gradcheck: add, sub, mul, div with broadcasting", "[ch03][gradcheck]") {
  std::mt19937 rng(301);
  const Tensor a = rnd(rng, {2, 3, 4});
  SECTION("add (2,3,4) + (3,1)") {
    check([](const Vars& v) { return v[0] + v[1]; }, {a, rnd(rng, {3, 1})});
  }
  SECTION("sub (4) - (2,3,4)") {
    check([](const Vars& v) { return v[0] - v[1]; }, {rnd(rng, {4}), a});
  }
  SECTION("mul (2,1,4) * (3,4)") {
    check([](const Vars& v) { return v[0] * v[1]; }, {rnd(rng, {2, 1, 4}), rnd(rng, {3, 4})});
  }
  SECTION("div (2,3,4) / (1,3,1), divisor away from 0") {
    check([](const Vars& v) { return ddp::div(v[0], v[1]); },
          {a, random_tensor(rng, {1, 3, 1}, 0.5f, 2.0f)});
  }
  SECTION("a * a: one input used twice") {
    check([](const Vars& v) { return v[0] * v[0]; }, {a});
  }
}

TEST_CASE("gradcheck: scalar ops and unary functions", "[ch03][gradcheck]") {
  std::mt19937 rng(302);
  const Tensor x = rnd(rng, {3, 5});
  SECTION("add scalar") { check([](const Vars& v) { return ddp::add(v[0], 2.5); }, {x}); }
  SECTION("mul scalar") { check([](const Vars& v) { return v[0] * -1.5; }, {x}); }
  SECTION("neg") { check([](const Vars& v) { return ddp::neg(v[0]); }, {x}); }
  SECTION("relu, inputs away from the kink") {
    check([](const Vars& v) { return ddp::relu(v[0]); },
          {random_tensor(rng, {3, 5}, -1, 1, 0.05f)});
  }
  SECTION("exp") { check([](const Vars& v) { return ddp::exp(v[0]); }, {x}); }
  SECTION("log, positive inputs") {
    check([](const Vars& v) { return ddp::log(v[0]); }, {random_tensor(rng, {3, 5}, 0.5f, 2)});
  }
}

TEST_CASE("gradcheck: sum and mean, over everything and over one dim", "[ch03][gradcheck]") {
  std::mt19937 rng(303);
  const Tensor x = rnd(rng, {2, 3, 4});
  check([](const Vars& v) { return ddp::sum(v[0]); }, {x});
  check([](const Vars& v) { return ddp::mean(v[0]); }, {x});
  check([](const Vars& v) { return ddp::sum(v[0], 1); }, {x});
  check([](const Vars& v) { return ddp::sum(v[0], -1, true); }, {x});
  check([](const Vars& v) { return ddp::mean(v[0], 0); }, {x});
  check([](const Vars& v) { return ddp::mean(v[0], 2, true); }, {x});
}

TEST_CASE("gradcheck: reshape, flatten, transpose", "[ch03][gradcheck]") {
  std::mt19937 rng(304);
  const Tensor x = rnd(rng, {2, 3, 4});
  // A non-uniform factor after the shape op makes a misplaced gradient visible.
  const Tensor w = rnd(rng, {4, 3, 2});
  check([&](const Vars& v) { return ddp::reshape(v[0], {4, 3, 2}) * Variable(w); }, {x});
  check([](const Vars& v) { return ddp::flatten(v[0]); }, {x});
  check([](const Vars& v) { return ddp::transpose(v[0], 0, 2); }, {x});
}

TEST_CASE("gradcheck: matmul (2-D, batched, shared 2-D operand) and linear",
          "[ch03][gradcheck][ex03.1]") {
  std::mt19937 rng(305);
  SECTION("(3,4) @ (4,5)") {
    check([](const Vars& v) { return ddp::matmul(v[0], v[1]); },
          {rnd(rng, {3, 4}), rnd(rng, {4, 5})});
  }
  SECTION("(2,3,4) @ (2,4,5)") {
    check([](const Vars& v) { return ddp::matmul(v[0], v[1]); },
          {rnd(rng, {2, 3, 4}), rnd(rng, {2, 4, 5})});
  }
  SECTION("(2,3,4) @ (4,5): the 2-D operand's gradient sums over the batch") {
    check([](const Vars& v) { return ddp::matmul(v[0], v[1]); },
          {rnd(rng, {2, 3, 4}), rnd(rng, {4, 5})});
  }
  SECTION("(3,4) @ (2,4,5)") {
    check([](const Vars& v) { return ddp::matmul(v[0], v[1]); },
          {rnd(rng, {3, 4}), rnd(rng, {2, 4, 5})});
  }
  SECTION("(1,3,4) @ (2,4,5) and (2,3,4) @ (1,4,5): a batch of 1 is shared too") {
    check([](const Vars& v) { return ddp::matmul(v[0], v[1]); },
          {rnd(rng, {1, 3, 4}), rnd(rng, {2, 4, 5})});
    check([](const Vars& v) { return ddp::matmul(v[0], v[1]); },
          {rnd(rng, {2, 3, 4}), rnd(rng, {1, 4, 5})});
  }
  SECTION("linear with bias") {
    check([](const Vars& v) { return ddp::linear(v[0], v[1], v[2]); },
          {rnd(rng, {4, 6}), rnd(rng, {3, 6}), rnd(rng, {3})});
  }
  SECTION("linear without bias") {
    check([](const Vars& v) { return ddp::linear(v[0], v[1], Variable()); },
          {rnd(rng, {4, 6}), rnd(rng, {3, 6})});
  }
}

// ==== Convolution =======================================================================

TEST_CASE("gradcheck: conv2d 3x3, stride 2, padding 1, with bias", "[ch03][gradcheck][conv]") {
  std::mt19937 rng(306);
  check([](const Vars& v) { return ddp::conv2d(v[0], v[1], v[2], 2, 1); },
        {rnd(rng, {2, 3, 5, 6}), rnd(rng, {4, 3, 3, 3}), rnd(rng, {4})});
}

TEST_CASE("gradcheck: conv2d 3x3, stride 1, padding 1, by Winograd on the CPU",
          "[ch03][gradcheck][conv]") {
  // 8 channels in, 12 out, 10x10: enough for conv2d_cpu to take Winograd's F(2x2, 3x3)
  // (winograd_applies, autograd/ops/conv_winograd_cpu.cpp; pinned in test_fused_cpu.cpp).
  // Its loss sums 1200 outputs of ~72 products: at the default step, the float32 rounding
  // of that sum alone is ~4e-3 in a numeric derivative. The convolution is linear in each
  // input, so central differences are exact at any step, and a larger one divides the
  // rounding away (Note [Finite differences in float32]).
  std::mt19937 rng(330);
  GradcheckOptions options;
  options.eps = 5e-2;
  check([](const Vars& v) { return ddp::conv2d(v[0], v[1], v[2], 1, 1); },
        {rnd(rng, {1, 8, 10, 10}), rnd(rng, {12, 8, 3, 3}), rnd(rng, {12})}, options);
}

TEST_CASE("gradcheck: conv2d 1x1, stride 2 (the ResNet shortcut), no bias",
          "[ch03][gradcheck][conv]") {
  std::mt19937 rng(307);
  check([](const Vars& v) { return ddp::conv2d(v[0], v[1], Variable(), 2, 0); },
        {rnd(rng, {2, 3, 5, 5}), rnd(rng, {4, 3, 1, 1})});
}

TEST_CASE("gradcheck: conv2d with overlapping windows and a non-square kernel",
          "[ch03][gradcheck][conv]") {
  std::mt19937 rng(308);
  SECTION("2x3 kernel, stride 1, padding 2") {
    check([](const Vars& v) { return ddp::conv2d(v[0], v[1], v[2], 1, 2); },
          {rnd(rng, {1, 2, 4, 4}), rnd(rng, {3, 2, 2, 3}), rnd(rng, {3})});
  }
  SECTION("only the weight and bias need gradients (the first layer of a network)") {
    GradcheckOptions options;
    options.wrt = {false, true, true};
    check([](const Vars& v) { return ddp::conv2d(v[0], v[1], v[2], 1, 1); },
          {rnd(rng, {2, 2, 4, 4}), rnd(rng, {3, 2, 3, 3}), rnd(rng, {3})}, options);
  }
  SECTION("only the input needs a gradient") {
    GradcheckOptions options;
    options.wrt = {true, false};
    check([](const Vars& v) { return ddp::conv2d(v[0], v[1], Variable(), 2, 1); },
          {rnd(rng, {2, 2, 5, 5}), rnd(rng, {3, 2, 3, 3})}, options);
  }
}

// ==== Batch norm ========================================================================

TEST_CASE("gradcheck: batch_norm in training mode", "[ch03][gradcheck][bn]") {
  std::mt19937 rng(309);
  const Tensor x = random_tensor(rng, {3, 2, 3, 2}, -2, 2);
  SECTION("with weight and bias, updating running statistics") {
    Tensor running_mean = ddp::zeros({2}), running_var = ddp::ones({2});
    check([&](const Vars& v) {
      return ddp::batch_norm(v[0], v[1], v[2], running_mean, running_var, true);
    }, {x, random_tensor(rng, {2}, 0.5f, 1.5f), rnd(rng, {2})});
  }
  SECTION("without weight, bias or running statistics") {
    Tensor none_mean, none_var;
    check([&](const Vars& v) {
      return ddp::batch_norm(v[0], Variable(), Variable(), none_mean, none_var, true);
    }, {x});
  }
}

TEST_CASE("gradcheck: batch_norm in evaluation mode", "[ch03][gradcheck][bn]") {
  std::mt19937 rng(310);
  Tensor running_mean = rnd(rng, {3});
  Tensor running_var = random_tensor(rng, {3}, 0.5f, 2.0f);
  check([&](const Vars& v) {
    return ddp::batch_norm(v[0], v[1], v[2], running_mean, running_var, false);
  }, {rnd(rng, {2, 3, 2, 2}), rnd(rng, {3}), rnd(rng, {3})});
}

// ==== Pooling and losses ================================================================

TEST_CASE("gradcheck: max_pool2d and global_avg_pool2d", "[ch03][gradcheck][pool]") {
  std::mt19937 rng(311);
  SECTION("max 2x2, stride 2") {
    check([](const Vars& v) { return ddp::max_pool2d(v[0], 2, 2); },
          {distinct_tensor(rng, {2, 2, 4, 6})});
  }
  SECTION("max 3x3, stride 2: windows overlap") {
    check([](const Vars& v) { return ddp::max_pool2d(v[0], 3, 2); },
          {distinct_tensor(rng, {1, 2, 7, 5})});
  }
  SECTION("global average") {
    check([](const Vars& v) { return ddp::global_avg_pool2d(v[0]); }, {rnd(rng, {2, 3, 3, 4})});
  }
}

TEST_CASE("gradcheck: log_softmax, nll_loss, cross_entropy", "[ch03][gradcheck][loss]") {
  std::mt19937 rng(312);
  const Tensor logits = random_tensor(rng, {4, 5}, -2, 2);
  const Tensor labels = labels_tensor({1, 0, 4, 1});
  check([](const Vars& v) { return ddp::log_softmax(v[0]); }, {logits});
  check([&](const Vars& v) { return ddp::nll_loss(ddp::log_softmax(v[0]), labels); }, {logits});
  check([&](const Vars& v) { return ddp::nll_loss(v[0], labels); }, {logits});
  check([&](const Vars& v) { return ddp::cross_entropy(v[0], labels); }, {logits});
}

TEST_CASE("gradcheck: a small network end to end", "[ch03][gradcheck]") {
  // conv -> batch norm -> relu -> max pool -> conv (stride 2) -> global average -> linear
  // -> cross entropy, every parameter checked at once.
  std::mt19937 rng(313);
  const Tensor x = random_tensor(rng, {2, 2, 6, 6}, -1, 1);
  const Tensor labels = labels_tensor({2, 0});
  Tensor running_mean = ddp::zeros({3}), running_var = ddp::ones({3});
  check([&](const Vars& v) {
    Variable h = ddp::conv2d(v[0], v[1], v[2], 1, 1);
    h = ddp::relu(ddp::batch_norm(h, v[3], v[4], running_mean, running_var, true));
    h = ddp::max_pool2d(h, 2, 2);
    h = ddp::global_avg_pool2d(ddp::conv2d(h, v[5], Variable(), 2, 1));
    return ddp::cross_entropy(ddp::linear(h, v[6], v[7]), labels);
  }, {x, rnd(rng, {3, 2, 3, 3}), rnd(rng, {3}), random_tensor(rng, {3}, 0.5f, 1.5f),
      rnd(rng, {3}), rnd(rng, {4, 3, 3, 3}), rnd(rng, {3, 4}), rnd(rng, {3})});
}

// ==== Planted bugs: the checker must be able to fail =====================================

namespace {

// Identity forward; backward multiplies the gradient by `factor`. Placed after a
// correct op, it makes that op's whole backward `factor` times too large.
struct ScaledBackward final : ddp::Node {
  double factor = 1.0;
  std::vector<Tensor> backward(const Tensor& g) override { return {ddp::mul(g, factor)}; }
  const char* name() const override { return "ScaledBackward (planted bug)"; }
};

Variable scale_gradient(const Variable& x, double factor) {
  return ddp::make_result(x.data(), {x}, [&] {
    auto node = std::make_shared<ScaledBackward>();
    node->factor = factor;
    return node;
  });
}

// Batch norm without affine parameters, with its own backward that has one flag: drop
// the last term of dx = rstd/N * (N g - sum(g) - xhat * sum(g * xhat)). Dropping it is
// the classic mistake of forgetting that the variance depends on x.
struct PlantedBatchNormBackward final : ddp::Node {
  Tensor xhat, rstd;
  bool drop_variance_term = false;
  std::vector<Tensor> backward(const Tensor& g) override {
    const auto B = g.size(0), C = g.size(1);
    const double n = static_cast<double>(g.numel() / C);
    auto channel_sum = [&](const Tensor& t) {
      return ddp::sum(ddp::sum(t.reshape({B, C, -1}), 2), 0).view({1, C, 1, 1});
    };
    Tensor inner = ddp::sub(ddp::mul(g, n), channel_sum(g));
    if (!drop_variance_term) {
      inner = ddp::sub(inner, ddp::mul(xhat, channel_sum(ddp::mul(g, xhat))));
    }
    return {ddp::mul(inner, ddp::mul(rstd, 1.0 / n))};
  }
  const char* name() const override { return "PlantedBatchNormBackward"; }
};

Variable planted_batch_norm(const Variable& x, bool drop_variance_term) {
  const auto B = x.size(0), C = x.size(1);
  const double n = static_cast<double>(x.numel() / C);
  auto channel_mean = [&](const Tensor& t) {
    return ddp::mul(ddp::sum(ddp::sum(t.reshape({B, C, -1}), 2), 0), 1.0 / n).view({1, C, 1, 1});
  };
  const Tensor xc = ddp::sub(x.data(), channel_mean(x.data()));
  const Tensor rstd = ddp::rsqrt(ddp::add(channel_mean(ddp::square(xc)), 1e-5));
  Tensor xhat = ddp::mul(xc, rstd);
  return ddp::make_result(xhat, {x}, [&] {
    auto node = std::make_shared<PlantedBatchNormBackward>();
    node->xhat = xhat;
    node->rstd = rstd;
    node->drop_variance_term = drop_variance_term;
    return node;
  });
}

}  // namespace

TEST_CASE("planted bug: a conv2d backward scaled by 1.05 fails gradcheck",
          "[ch03][gradcheck][planted]") {
  std::mt19937 rng(314);
  const std::vector<Tensor> inputs{rnd(rng, {2, 3, 5, 6}), rnd(rng, {4, 3, 3, 3}), rnd(rng, {4})};
  auto conv = [](double factor) {
    return [factor](const Vars& v) {
      return scale_gradient(ddp::conv2d(v[0], v[1], v[2], 2, 1), factor);
    };
  };
  const GradcheckResult honest = ddp::gradcheck(conv(1.0), inputs);
  const GradcheckResult planted = ddp::gradcheck(conv(1.05), inputs);
  INFO("honest:  " << honest.summary());
  INFO("planted: " << planted.summary());
  CHECK(honest.ok);
  CHECK_FALSE(planted.ok);
  // Not a near miss: the 5% error exceeds what is allowed several times over.
  CHECK(planted.ratio > 2.0);
}

TEST_CASE("planted bug: a batch-norm backward without the variance term fails gradcheck",
          "[ch03][gradcheck][planted]") {
  std::mt19937 rng(315);
  const std::vector<Tensor> inputs{random_tensor(rng, {3, 2, 3, 2}, -2, 2)};
  const GradcheckResult honest =
      ddp::gradcheck([](const Vars& v) { return planted_batch_norm(v[0], false); }, inputs);
  const GradcheckResult planted =
      ddp::gradcheck([](const Vars& v) { return planted_batch_norm(v[0], true); }, inputs);
  INFO("honest:  " << honest.summary());
  INFO("planted: " << planted.summary());
  CHECK(honest.ok);
  CHECK_FALSE(planted.ok);
  CHECK(planted.ratio > 2.0);
}

TEST_CASE("gradcheck reports the worst element and rejects bad arguments", "[ch03][gradcheck]") {
  std::mt19937 rng(316);
  const Tensor x = rnd(rng, {2, 3});
  // Input 1's gradient is planted 1.5 times too large: the worst element must be there.
  const GradcheckResult r = ddp::gradcheck(
      [](const Vars& v) { return v[0] + scale_gradient(v[1], 1.5); }, {x, rnd(rng, {2, 3})});
  CHECK_FALSE(r.ok);
  CHECK(r.input == 1);
  CHECK(r.checked == 12);
  CHECK(r.analytic == Approx(1.5 * r.numeric).epsilon(1e-3));
  CHECK_THROWS_WITH(ddp::gradcheck([](const Vars& v) { return v[0]; },
                                   {ddp::zeros({2}, {ddp::DType::Int64})}),
                    Catch::Contains("only float32 inputs"));
}
