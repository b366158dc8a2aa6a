// Chapter 03, forward values: conv2d, batch_norm, the pools and the losses against the
// naive loops of naive.hpp (in double), the running-statistics rule against numbers
// worked out by hand, and the errors a wrong shape or label produces.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <cstdint>
#include <random>
#include <vector>

#include "autograd/functions.hpp"
#include "autograd/grad_mode.hpp"
#include "tensor/ops.hpp"
#include "tests/ch03/naive.hpp"

using Catch::Contains;
using ddp::Tensor;
using ddp::Variable;
namespace test = ddp::test;

namespace {

constexpr double kTol = 1e-5;  // float32 results against double references

Variable leaf(const Tensor& t) { return Variable(t, true); }

}  // namespace

// ==== conv2d ===========================================================================

TEST_CASE("conv2d matches the seven-loop convolution", "[ch03][forward][conv]") {
  std::mt19937 rng(401);
  struct Case {
    ddp::Shape x, w;
    std::int64_t stride, padding;
    bool bias;
  };
  const std::vector<Case> cases{
      {{2, 3, 7, 6}, {4, 3, 3, 3}, 1, 1, true},   // "same" 3x3
      {{2, 3, 8, 8}, {5, 3, 3, 3}, 2, 1, true},   // downsampling 3x3
      {{3, 4, 6, 6}, {2, 4, 1, 1}, 2, 0, false},  // 1x1 shortcut
      {{1, 2, 5, 7}, {3, 2, 2, 3}, 1, 0, true},   // non-square kernel
      {{2, 1, 4, 4}, {2, 1, 4, 4}, 1, 2, false},  // kernel as large as the image, big pad
      {{1, 2, 9, 9}, {3, 2, 3, 3}, 3, 0, true},   // stride = kernel: no overlap
  };
  for (const Case& c : cases) {
    const Tensor x = test::random_tensor(rng, c.x, -1, 1);
    const Tensor w = test::random_tensor(rng, c.w, -1, 1);
    const Tensor b = c.bias ? test::random_tensor(rng, {c.w[0]}, -1, 1) : Tensor();
    const Variable y = ddp::conv2d(leaf(x), leaf(w), c.bias ? leaf(b) : Variable(), c.stride,
                                   c.padding);
    const std::int64_t ho = (c.x[2] + 2 * c.padding - c.w[2]) / c.stride + 1;
    const std::int64_t wo = (c.x[3] + 2 * c.padding - c.w[3]) / c.stride + 1;
    INFO("x " << ddp::shape_str(c.x) << ", w " << ddp::shape_str(c.w) << ", stride "
              << c.stride << ", padding " << c.padding);
    CHECK(y.data().is_contiguous());
    CHECK(test::close(y.data(), test::conv2d(x, w, b, c.stride, c.padding),
                      {c.x[0], c.w[0], ho, wo}, kTol) == "");
  }
}

TEST_CASE("conv2d reads a non-contiguous input through its strides", "[ch03][forward][conv]") {
  std::mt19937 rng(402);
  // (B, H, W, C) memory seen as (B, C, H, W): a channels-last view.
  const Tensor nhwc = test::random_tensor(rng, {2, 5, 5, 3}, -1, 1);
  const Tensor x = nhwc.permute({0, 3, 1, 2});
  REQUIRE_FALSE(x.is_contiguous());
  const Tensor w = test::random_tensor(rng, {4, 3, 3, 3}, -1, 1);
  for (std::int64_t padding : {0, 1}) {
    const Variable y = ddp::conv2d(Variable(x), Variable(w), Variable(), 1, padding);
    CHECK(test::close(y.data(), test::conv2d(x.contiguous(), w, Tensor(), 1, padding),
                      y.shape(), kTol) == "");
  }
}

TEST_CASE("conv2d names the shapes that do not fit", "[ch03][forward][conv][errors]") {
  const Variable x(ddp::zeros({2, 3, 5, 5}));
  CHECK_THROWS_WITH(ddp::conv2d(x, Variable(ddp::zeros({4, 2, 3, 3})), Variable()),
                    Contains("has 3 channels") && Contains("(4, 2, 3, 3)"));
  CHECK_THROWS_WITH(ddp::conv2d(x, Variable(ddp::zeros({4, 3, 7, 7})), Variable()),
                    Contains("does not fit the padded input 5x5"));
  CHECK_THROWS_WITH(ddp::conv2d(x, Variable(ddp::zeros({4, 3, 3, 3})), Variable(ddp::zeros({3}))),
                    Contains("bias float32 (3,)") && Contains("expected (4,)"));
  CHECK_THROWS_WITH(ddp::conv2d(Variable(ddp::zeros({3, 5, 5})), Variable(ddp::zeros({4, 3, 3, 3})),
                                Variable()),
                    Contains("expected x (B, C, H, W)"));
}

// ==== batch_norm =======================================================================

TEST_CASE("batch_norm training normalises with the batch statistics", "[ch03][forward][bn]") {
  std::mt19937 rng(403);
  // A large mean next to a small spread: the two-pass variance must keep its digits.
  Tensor x = ddp::add(test::random_tensor(rng, {4, 3, 3, 5}, -1, 1), 50.0);
  const Tensor w = test::random_tensor(rng, {3}, 0.5f, 1.5f);
  const Tensor b = test::random_tensor(rng, {3}, -1, 1);
  Tensor running_mean = ddp::zeros({3}), running_var = ddp::ones({3});
  const Variable y = ddp::batch_norm(leaf(x), leaf(w), leaf(b), running_mean, running_var, true);
  const test::ChannelStats st = test::channel_stats(x);
  CHECK(test::close(y.data(), test::batch_norm(x, st.mean, st.var, w, b, 1e-5), x.shape(), 1e-4) ==
        "");
}

TEST_CASE("batch_norm evaluation uses the running statistics and leaves them alone",
          "[ch03][forward][bn]") {
  std::mt19937 rng(404);
  const Tensor x = test::random_tensor(rng, {2, 3, 2, 4}, -2, 2);
  const Tensor w = test::random_tensor(rng, {3}, 0.5f, 1.5f);
  const Tensor b = test::random_tensor(rng, {3}, -1, 1);
  Tensor running_mean = test::random_tensor(rng, {3}, -1, 1);
  Tensor running_var = test::random_tensor(rng, {3}, 0.5f, 2.0f);
  const std::vector<double> mean_before = test::values(running_mean);
  const std::vector<double> var_before = test::values(running_var);
  const Variable y = ddp::batch_norm(leaf(x), leaf(w), leaf(b), running_mean, running_var, false);
  CHECK(test::close(y.data(), test::batch_norm(x, mean_before, var_before, w, b, 1e-5), x.shape(),
                    kTol) == "");
  CHECK(test::values(running_mean) == mean_before);
  CHECK(test::values(running_var) == var_before);
}

TEST_CASE("batch_norm updates running statistics with momentum and the unbiased variance",
          "[ch03][forward][bn]") {
  // Channel 0 holds 1, 2, 3, 6: mean 3, biased variance (4+1+0+9)/4 = 3.5, unbiased
  // 14/3. Channel 1 holds 0, 0, 4, 4: mean 2, biased variance 4, unbiased 16/3.
  // x is (B=2, C=2, H=1, W=2).
  const std::vector<float> values{1, 2, 0, 0, 3, 6, 4, 4};
  const Tensor x = ddp::from_data(values, {2, 2, 1, 2});
  Tensor running_mean = ddp::from_data(std::vector<float>{0.0f, 1.0f}, {2});
  Tensor running_var = ddp::from_data(std::vector<float>{1.0f, 2.0f}, {2});
  const double m = 0.1;
  // The update runs the same under NoGradGuard: statistics are state, not graph.
  ddp::NoGradGuard no_grad;
  ddp::batch_norm(Variable(x), Variable(), Variable(), running_mean, running_var, true, m);
  CHECK(test::close(running_mean, {0.9 * 0.0 + 0.1 * 3.0, 0.9 * 1.0 + 0.1 * 2.0}, {2}, 1e-6) == "");
  CHECK(test::close(running_var, {0.9 * 1.0 + 0.1 * 14.0 / 3.0, 0.9 * 2.0 + 0.1 * 16.0 / 3.0},
                    {2}, 1e-6) == "");
  // A second step compounds: running = 0.9 * running + 0.1 * batch again.
  ddp::batch_norm(Variable(x), Variable(), Variable(), running_mean, running_var, true, m);
  CHECK(test::close(running_mean, {0.9 * 0.3 + 0.3, 0.9 * 1.1 + 0.2}, {2}, 1e-6) == "");
}

TEST_CASE("batch_norm rejects what it cannot normalise", "[ch03][forward][bn][errors]") {
  Tensor rm = ddp::zeros({3}), rv = ddp::ones({3}), none_mean, none_var;
  CHECK_THROWS_WITH(ddp::batch_norm(Variable(ddp::ones({1, 3, 1, 1})), Variable(), Variable(), rm,
                                    rv, true),
                    Contains("more than one value per channel"));
  CHECK_THROWS_WITH(ddp::batch_norm(Variable(ddp::ones({2, 4, 2, 2})), Variable(), Variable(), rm,
                                    rv, true),
                    Contains("running_mean is float32 (3,)") && Contains("expected float32 (4,)"));
  CHECK_THROWS_WITH(ddp::batch_norm(Variable(ddp::ones({2, 3, 2, 2})), Variable(), Variable(),
                                    none_mean, none_var, false),
                    Contains("evaluation mode needs running_mean"));
}

// ==== Pools ============================================================================

TEST_CASE("max_pool2d and global_avg_pool2d match the loops", "[ch03][forward][pool]") {
  std::mt19937 rng(405);
  const Tensor x = test::random_tensor(rng, {2, 3, 7, 6}, -1, 1);
  for (auto [k, s] : {std::pair<std::int64_t, std::int64_t>{2, 2}, {3, 2}, {3, 1}, {2, 3}}) {
    INFO("kernel " << k << ", stride " << s);
    const Variable y = ddp::max_pool2d(Variable(x), k, s);
    CHECK(test::close(y.data(), test::max_pool2d(x, k, s),
                      {2, 3, (7 - k) / s + 1, (6 - k) / s + 1}, 0.0) == "");
  }
  CHECK(test::close(ddp::global_avg_pool2d(Variable(x)).data(), test::global_avg_pool2d(x),
                    {2, 3}, kTol) == "");
}

TEST_CASE("max_pool2d sends the gradient to the first maximum of a window",
          "[ch03][forward][pool]") {
  // One 2x2 window with a tie between positions (0, 1) and (1, 0).
  const Variable x(ddp::from_data(std::vector<float>{1, 5, 5, 2}, {1, 1, 2, 2}), true);
  ddp::sum(ddp::max_pool2d(x, 2, 2)).backward();
  CHECK(test::values(x.grad()) == std::vector<double>{0, 1, 0, 0});
}

// ==== Losses ===========================================================================

TEST_CASE("log_softmax, nll_loss and cross_entropy match the loops", "[ch03][forward][loss]") {
  std::mt19937 rng(406);
  const std::vector<std::int64_t> labels{3, 0, 2, 2, 1};
  const Tensor logits = test::random_tensor(rng, {5, 4}, -3, 3);
  const Tensor y = test::labels_tensor(labels);
  CHECK(test::close(ddp::log_softmax(Variable(logits)).data(), test::log_softmax(logits), {5, 4},
                    kTol) == "");
  const double want = test::cross_entropy(logits, labels);
  CHECK(ddp::cross_entropy(Variable(logits), y).data().item<float>() == Approx(want).epsilon(1e-5));
  CHECK(ddp::nll_loss(ddp::log_softmax(Variable(logits)), y).data().item<float>() ==
        Approx(want).epsilon(1e-5));
}

TEST_CASE("log_softmax stays finite for huge logits", "[ch03][forward][loss]") {
  const Tensor logits = ddp::from_data(std::vector<float>{1000, 0, -1000, 500, 500, 500}, {2, 3});
  const std::vector<double> got = test::values(ddp::log_softmax(Variable(logits)).data());
  for (double v : got) CHECK(std::isfinite(v));
  CHECK(test::close(ddp::log_softmax(Variable(logits)).data(), test::log_softmax(logits), {2, 3},
                    kTol) == "");
}

TEST_CASE("a -inf logit that is not the label leaves the loss finite, as in PyTorch",
          "[ch03][forward][loss]") {
  // Masked-out classes (-inf) and logits so far apart that the shift overflows: the
  // unpicked entries are -inf, and -inf * 0 made the loss NaN.
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor masked = ddp::from_data(std::vector<float>{0, -inf, 1, 2}, {2, 2});
  const Tensor y = test::labels_tensor({0, 1});
  // Row 0 picks probability 1 (loss 0); row 1 is log(1 + e^-1).
  const double want = std::log1p(std::exp(-1.0)) / 2;
  CHECK(ddp::cross_entropy(Variable(masked), y).data().item<float>() == Approx(want));
  CHECK(ddp::nll_loss(ddp::log_softmax(Variable(masked)), y).data().item<float>() ==
        Approx(want));
  const Tensor apart = ddp::from_data(std::vector<float>{3e38f, -3e38f}, {1, 2});
  CHECK(ddp::cross_entropy(Variable(apart), test::labels_tensor({0})).data().item<float>() ==
        0.0f);
}

TEST_CASE("cross_entropy's fused backward equals nll_loss(log_softmax) chained",
          "[ch03][forward][loss]") {
  std::mt19937 rng(407);
  const Tensor logits = test::random_tensor(rng, {6, 5}, -2, 2);
  const Tensor y = test::labels_tensor({4, 0, 1, 1, 3, 2});
  const Variable a(logits, true), b(logits.clone(), true);
  ddp::cross_entropy(a, y).backward();
  ddp::nll_loss(ddp::log_softmax(b), y).backward();
  CHECK(test::close(a.grad(), b.grad(), 1e-6) == "");
}

TEST_CASE("the losses name a bad label by value and position", "[ch03][forward][loss][errors]") {
  const Variable logits(ddp::zeros({3, 4}), true);
  CHECK_THROWS_WITH(ddp::cross_entropy(logits, test::labels_tensor({0, 1, 7})),
                    Contains("label 7 at position 2 is outside [0, 4)"));
  CHECK_THROWS_WITH(ddp::nll_loss(logits, test::labels_tensor({-1, 1, 2})),
                    Contains("label -1 at position 0"));
  CHECK_THROWS_WITH(ddp::cross_entropy(logits, test::labels_tensor({0, 1})),
                    Contains("labels must be int64 (3,)"));
  CHECK_THROWS_WITH(ddp::cross_entropy(logits, ddp::zeros({3})),
                    Contains("got float32 (3,)"));
  CHECK_THROWS_WITH(ddp::log_softmax(Variable(ddp::zeros({2, 3, 4}))),
                    Contains("expected (B, K) scores"));
}

// ==== matmul ===========================================================================

TEST_CASE("matmul matches the triple loop, and the gradients of its sum the closed forms",
          "[ch03][forward][matmul][ex03.1]") {
  // A batched A against a shared B: B's gradient must add up over the batch.
  std::mt19937 rng(331);
  const std::int64_t nb = 2, m = 3, k = 4, n = 5;
  const Tensor a = test::random_tensor(rng, {nb, m, k}, -1.0f, 1.0f);
  const Tensor b = test::random_tensor(rng, {k, n}, -1.0f, 1.0f);
  const std::vector<double> av = test::values(a), bv = test::values(b);
  std::vector<double> c(nb * m * n, 0.0), da(nb * m * k, 0.0), db(k * n, 0.0);
  for (std::int64_t s = 0; s < nb; ++s) {
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        for (std::int64_t t = 0; t < k; ++t) {
          c[(s * m + i) * n + j] += av[(s * m + i) * k + t] * bv[t * n + j];
          // d(sum C)/dA[s,i,t] = sum_j B[t,j];  d(sum C)/dB[t,j] = sum_{s,i} A[s,i,t].
          da[(s * m + i) * k + t] += bv[t * n + j];
          db[t * n + j] += av[(s * m + i) * k + t];
        }
      }
    }
  }
  const Variable va = leaf(a), vb = leaf(b);
  const Variable vc = ddp::matmul(va, vb);
  CHECK(test::close(vc.data(), c, {nb, m, n}, kTol) == "");
  ddp::sum(vc).backward();
  CHECK(test::close(va.grad(), da, {nb, m, k}, kTol) == "");
  CHECK(test::close(vb.grad(), db, {k, n}, kTol) == "");

  // An operand that needs no gradient gets none.
  const Variable frozen(b);
  ddp::sum(ddp::matmul(leaf(a), frozen)).backward();
  CHECK_FALSE(frozen.grad().defined());
}
