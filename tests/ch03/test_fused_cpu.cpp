// Chapter 03, the fused CPU paths (autograd/fused_cpu.hpp, Note [Fused CPU paths]):
// conv2d_cpu, batch_norm_cpu and relu_cpu against their textbook twins conv2d_views,
// batch_norm_composed and relu_composed, forward values and every input's gradient
// from the same random output gradient. conv2d() & co. pick the fused versions on the
// CPU, so test_gradcheck.cpp checks those (one case on a shape that takes Winograd);
// here gradcheck also runs on the textbook versions by name, which the CPU would
// otherwise never reach. Also: which shapes take Winograd, and 1 vs 2 threads.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "autograd/functions.hpp"
#include "autograd/fused_cpu.hpp"
#include "autograd/gradcheck.hpp"
#include "autograd/ops/conv_winograd_cpu.hpp"
#include "tensor/ops.hpp"
#include "tensor/threads.hpp"
#include "tests/ch03/naive.hpp"

using ddp::Tensor;
using ddp::Variable;
using ddp::test::random_tensor;
using Vars = std::vector<Variable>;
using Op = std::function<Variable(const Vars&)>;

namespace {

// The output and the gradient of every input of op(inputs), for the output gradient R.
struct Run {
  Tensor y;
  std::vector<Tensor> grads;
};

Run run(const Op& op, const std::vector<Tensor>& inputs, std::mt19937::result_type seed) {
  Vars leaves;
  for (const Tensor& t : inputs) leaves.emplace_back(t, true);  // views stay views
  const Variable y = op(leaves);
  std::mt19937 rng(seed);
  y.backward(random_tensor(rng, y.shape(), -1, 1));
  Run r{y.data(), {}};
  for (const Variable& v : leaves) r.grads.push_back(v.grad());
  return r;
}

// "" when got and want agree to tol * (1 + max |want|) everywhere, else where they do not.
std::string agree(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  if (got.shape() != want.shape()) return what + ": shapes differ";
  const std::vector<float> g = got.to_vector<float>(), w = want.to_vector<float>();
  double scale = 0.0;
  for (float v : w) scale = std::max(scale, static_cast<double>(std::abs(v)));
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (!(std::abs(g[i] - w[i]) <= tol * (1.0 + scale))) {
      return what + " differs at flat index " + std::to_string(i) + ": got " +
             std::to_string(g[i]) + ", want " + std::to_string(w[i]);
    }
  }
  return "";
}

void check_same(const Op& fused, const Op& textbook, const std::vector<Tensor>& inputs,
                double tol = 1e-5) {
  const Run a = run(fused, inputs, 77), b = run(textbook, inputs, 77);
  CHECK(agree(a.y, b.y, tol, "output") == "");
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    CHECK(agree(a.grads[i], b.grads[i], tol, "gradient of input " + std::to_string(i)) == "");
  }
}

Tensor rnd(std::mt19937& rng, const ddp::Shape& shape) { return random_tensor(rng, shape, -1, 1); }

struct ConvCase {
  ddp::Shape x, w;
  bool bias;
  std::int64_t stride, padding;
};

}  // namespace

// ==== conv2d ============================================================================

TEST_CASE("conv2d_cpu matches conv2d_views, forward and backward", "[ch03][fused][conv]") {
  std::mt19937 rng(401);
  const std::vector<ConvCase> cases = {
      {{3, 4, 9, 9}, {5, 4, 3, 3}, false, 1, 1},      // the ResNet 3x3
      {{3, 4, 9, 8}, {6, 4, 3, 3}, false, 2, 1},      // 3x3, stride 2
      {{2, 4, 8, 8}, {6, 4, 1, 1}, false, 2, 0},      // the 1x1 stride-2 shortcut
      {{2, 3, 6, 7}, {4, 3, 2, 3}, true, 1, 2},       // non-square kernel, padding > kernel/2
      {{2, 2, 11, 10}, {3, 2, 5, 4}, true, 3, 1},     // stride 3: gaps between windows
      {{1, 1, 4, 4}, {2, 1, 4, 4}, true, 1, 0},       // one output pixel
      {{2, 3, 7, 6}, {4, 3, 5, 3}, false, 1, 1},      // same width, not same height
      {{2, 3, 5, 5}, {4, 3, 1, 1}, true, 1, 0},       // 1x1, stride 1
      {{1, 64, 12, 40}, {2, 64, 3, 3}, false, 1, 1},  // patch matrix cut into row bands
      {{2, 3, 7, 7}, {4, 3, 3, 3}, true, 2, 1},       // phase planes, odd size: zero tails
      {{1, 64, 24, 40}, {2, 64, 3, 3}, false, 2, 1},  // phase planes cut into row bands
      {{2, 3, 9, 9}, {4, 3, 3, 3}, false, 3, 1},      // phase planes, stride 3
      {{2, 3, 8, 8}, {4, 3, 3, 3}, false, 2, 0},      // stride 2, Wo != W/2: plain loops
      // Winograd F(2x2, 3x3) (conv_winograd_cpu.cpp; the next test checks that it takes
      // these): odd sizes leave half tiles at the bottom and right edges.
      {{3, 16, 28, 28}, {16, 16, 3, 3}, false, 1, 1},  // block1 of ResNet-MNIST
      {{2, 9, 11, 10}, {10, 9, 3, 3}, true, 1, 1},     // odd height, bias
      {{2, 8, 10, 13}, {12, 8, 3, 3}, false, 1, 1},    // odd width
      {{2, 8, 1, 101}, {8, 8, 3, 3}, true, 1, 1},      // one row: every tile half padding
      {{1, 33, 4, 25}, {8, 33, 3, 3}, false, 1, 1},    // C not a multiple of the SIMD width
      {{70, 8, 10, 10}, {9, 8, 3, 3}, false, 1, 1},    // > 32 images: 2-3 per dW chunk
      {{2, 8, 101, 1}, {8, 8, 3, 3}, true, 1, 1},      // one column
      {{1, 8, 50, 2}, {8, 8, 3, 3}, false, 1, 1},      // two columns: one tile wide
      // Padding wider than the image: some taps shift every column into the padding.
      {{4, 2, 5, 1}, {3, 2, 5, 5}, true, 1, 2},        // one column, 5x5
      {{4, 2, 6, 1}, {3, 2, 8, 8}, false, 2, 4},       // the same on phase planes
  };
  const int threads_before = ddp::get_num_threads();
  for (int threads : {1, 2}) {
    ddp::set_num_threads(threads);
    for (const ConvCase& c : cases) {
      const std::int64_t stride = c.stride, padding = c.padding;
      INFO("threads " << threads << ", x " << ddp::shape_str(c.x) << ", weight "
                      << ddp::shape_str(c.w) << ", stride " << stride << ", padding " << padding);
      std::vector<Tensor> inputs = {rnd(rng, c.x), rnd(rng, c.w)};
      if (c.bias) inputs.push_back(rnd(rng, {c.w[0]}));
      auto with = [&](auto conv) {
        return [conv, stride, padding](const Vars& v) {
          return conv(v[0], v[1], v.size() > 2 ? v[2] : Variable(), stride, padding);
        };
      };
      check_same(with(ddp::conv2d_cpu), with(ddp::conv2d_views), inputs);
    }
  }
  ddp::set_num_threads(threads_before);
}

TEST_CASE("conv2d_cpu backward with padding wider than the image is exact on 2 threads",
          "[ch03][fused][conv]") {
  // A 7x7 tap on a 2-pixel-wide image shifts every column into the padding. Its shifted
  // add once ran past the image's plane, into floats of the next image that another
  // thread was writing: wrong input gradients in a few passes of every hundred. 500 passes catch that.
  std::mt19937 rng(409);
  const Tensor x = rnd(rng, {64, 4, 16, 2}), w = rnd(rng, {3, 4, 7, 7});
  const Op textbook = [](const Vars& v) { return ddp::conv2d_views(v[0], v[1], Variable(), 1, 3); };
  const Op fused = [](const Vars& v) { return ddp::conv2d_cpu(v[0], v[1], Variable(), 1, 3); };
  const Run want = run(textbook, {x, w}, 5);
  const int threads_before = ddp::get_num_threads();
  ddp::set_num_threads(2);
  int wrong = 0;
  for (int pass = 0; pass < 500; ++pass) {
    const Run got = run(fused, {x, w}, 5);
    wrong += agree(got.grads[0], want.grads[0], 1e-5, "dx") != "";
  }
  ddp::set_num_threads(threads_before);
  CHECK(wrong == 0);
}

TEST_CASE("winograd_applies: 3x3 stride-1 padding-1 layers with enough channels and pixels",
          "[ch03][fused][conv]") {
  auto shape = [](std::int64_t C, std::int64_t O, std::int64_t H, std::int64_t W,
                  std::int64_t stride, std::int64_t padding = 1) {
    ddp::detail::ConvShape s;
    s.B = 1, s.C = C, s.H = H, s.W = W, s.O = O, s.kh = 3, s.kw = 3;
    s.stride = stride, s.padding = padding;
    return s;
  };
  // The Winograd cases of the test above.
  CHECK(ddp::detail::winograd_applies(shape(16, 16, 28, 28, 1)));
  CHECK(ddp::detail::winograd_applies(shape(9, 10, 11, 10, 1)));
  CHECK(ddp::detail::winograd_applies(shape(8, 12, 10, 13, 1)));
  CHECK(ddp::detail::winograd_applies(shape(8, 8, 1, 101, 1)));
  CHECK(ddp::detail::winograd_applies(shape(33, 8, 4, 25, 1)));
  CHECK(ddp::detail::winograd_applies(shape(8, 9, 10, 10, 1)));
  CHECK(ddp::detail::winograd_applies(shape(8, 8, 101, 1, 1)));
  CHECK(ddp::detail::winograd_applies(shape(8, 8, 50, 2, 1)));
  CHECK(ddp::detail::winograd_applies(shape(8, 12, 10, 10, 1)));  // the next test
  CHECK(ddp::detail::winograd_applies(shape(8, 8, 10, 10, 1)));   // the bit-identity test
  // The others take the patch matrix: stride 2, the 1-channel stem, 7x7 images, no padding.
  CHECK_FALSE(ddp::detail::winograd_applies(shape(16, 16, 28, 28, 1, 0)));
  CHECK_FALSE(ddp::detail::winograd_applies(shape(16, 32, 28, 28, 2)));
  CHECK_FALSE(ddp::detail::winograd_applies(shape(1, 16, 28, 28, 1)));
  CHECK_FALSE(ddp::detail::winograd_applies(shape(64, 64, 7, 7, 1)));
}

TEST_CASE("conv2d_cpu reads a non-contiguous input and a frozen first layer",
          "[ch03][fused][conv]") {
  std::mt19937 rng(402);
  const Tensor w = rnd(rng, {4, 3, 3, 3});
  // x as a permuted view: (B, H, W, C) memory read as (B, C, H, W).
  const Tensor x = rnd(rng, {2, 6, 5, 3}).permute({0, 3, 1, 2});
  const Tensor want = ddp::conv2d_views(Variable(x), Variable(w), Variable(), 1, 1).data();
  CHECK(agree(ddp::conv2d_cpu(Variable(x), Variable(w), Variable(), 1, 1).data(), want, 1e-5,
              "output") == "");
  // The stem: x needs no gradient, so only dW is computed (and x's grad stays undefined).
  const Variable xv(x.contiguous()), wv(w.clone(), true), wt(w.clone(), true);
  std::mt19937 g_rng(9);
  const Tensor g = random_tensor(g_rng, {2, 4, 6, 5}, -1, 1);
  ddp::conv2d_cpu(xv, wv, Variable(), 1, 1).backward(g);
  ddp::conv2d_views(xv, wt, Variable(), 1, 1).backward(g);
  CHECK_FALSE(xv.grad().defined());
  CHECK(agree(wv.grad(), wt.grad(), 1e-5, "weight gradient") == "");
}

TEST_CASE("conv2d_cpu by Winograd: each gradient alone matches conv2d_views",
          "[ch03][fused][conv]") {
  // Each of backward_winograd's two halves alone: dW of a layer whose input needs no
  // gradient, dx of a frozen layer. C != O, so that a mixed-up channel count shows.
  std::mt19937 rng(403);
  const Tensor x = rnd(rng, {2, 8, 10, 10}), w = rnd(rng, {12, 8, 3, 3});
  std::mt19937 g_rng(10);
  const Tensor g = random_tensor(g_rng, {2, 12, 10, 10}, -1, 1);
  {
    const Variable xv(x), wv(w.clone(), true), wt(w.clone(), true);
    ddp::conv2d_cpu(xv, wv, Variable(), 1, 1).backward(g);
    ddp::conv2d_views(xv, wt, Variable(), 1, 1).backward(g);
    CHECK(agree(wv.grad(), wt.grad(), 1e-5, "weight gradient") == "");
  }
  {
    const Variable xv(x.clone(), true), xt(x.clone(), true), wv(w);
    ddp::conv2d_cpu(xv, wv, Variable(), 1, 1).backward(g);
    ddp::conv2d_views(xt, wv, Variable(), 1, 1).backward(g);
    CHECK(agree(xv.grad(), xt.grad(), 1e-5, "input gradient") == "");
  }
}

namespace {
// Runs net forward and backward on 1 thread, then on 2: the output and every gradient
// must agree bit for bit.
void check_same_bits_on_1_and_2_threads(const Op& net, const std::vector<Tensor>& inputs,
                                        std::mt19937::result_type seed) {
  const int threads_before = ddp::get_num_threads();
  ddp::set_num_threads(1);
  const Run one = run(net, inputs, seed);
  ddp::set_num_threads(2);
  const Run two = run(net, inputs, seed);
  ddp::set_num_threads(threads_before);
  CHECK(one.y.to_vector<float>() == two.y.to_vector<float>());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    INFO("input " << i);
    CHECK(one.grads[i].to_vector<float>() == two.grads[i].to_vector<float>());
  }
}
}  // namespace

TEST_CASE("conv2d_cpu and batch_norm_cpu give the same bits on 1 and 2 threads",
          "[ch03][fused][threads]") {
  // Note [Work shared out on demand]: dW is summed over fixed chunks of images, so the
  // thread count and the schedule do not change the rounding. 40 images: uneven chunks of
  // 1 and 2. The second conv takes Winograd (8 channels, 10x10), the third has stride 2
  // (Note [Strided convolution on phase planes]).
  std::mt19937 rng(406);
  const std::vector<Tensor> inputs = {rnd(rng, {40, 3, 10, 10}), rnd(rng, {8, 3, 3, 3}),
                                      random_tensor(rng, {8}, 0.5f, 1.5f), rnd(rng, {8}),
                                      rnd(rng, {8, 8, 3, 3}), rnd(rng, {5, 8, 3, 3})};
  const Op net = [](const Vars& v) {
    Tensor none_mean, none_var;
    const Variable h = ddp::conv2d_cpu(v[0], v[1], Variable(), 1, 1);
    const Variable n = ddp::batch_norm_cpu(h, v[2], v[3], none_mean, none_var, true, 0.1, 1e-5);
    const Variable w = ddp::conv2d_cpu(n, v[4], Variable(), 1, 1);
    return ddp::conv2d_cpu(w, v[5], Variable(), 2, 1);
  };
  check_same_bits_on_1_and_2_threads(net, inputs, 5);
}

TEST_CASE("conv2d_cpu of one image gives the same bits on 1 and 2 threads",
          "[ch03][fused][threads]") {
  // One image: the loop over images runs on one thread, and a product this large (K =
  // 128 * 9 = 1152, stride 2 so on the patch matrix) is one that Eigen, called outside a
  // multi-threaded region, could split over threads itself, blocking the sum over K
  // differently. It must not: the bits may not depend on the thread count (Note [Eigen
  // inside our loops], tensor/threads.hpp). Eigen's K block comes from the L1 size it
  // reads off the CPU; with the dev box's 32 KiB, the serial and the 2-thread blocking
  // happen to agree (288), and this test passed with the bug present, failing only on an
  // AVX-512 host. Eigen told that L1 is 48 KiB blocks K by 392 serially and 320 over
  // threads, so the test catches the bug on every x86 CPU.
  struct CacheSizes {
    std::ptrdiff_t l1 = Eigen::l1CacheSize(), l2 = Eigen::l2CacheSize(),
                   l3 = Eigen::l3CacheSize();
    ~CacheSizes() { Eigen::setCpuCacheSizes(l1, l2, l3); }
  } restore;
  Eigen::setCpuCacheSizes(48 * 1024, restore.l2, restore.l3);
  std::mt19937 rng(407);
  const std::vector<Tensor> inputs = {rnd(rng, {1, 128, 56, 56}), rnd(rng, {256, 128, 3, 3})};
  const Op net = [](const Vars& v) { return ddp::conv2d_cpu(v[0], v[1], Variable(), 2, 1); };
  check_same_bits_on_1_and_2_threads(net, inputs, 7);
}

TEST_CASE("conv2d on the CPU takes the fused path", "[ch03][fused][conv]") {
  const Variable x(ddp::ones({1, 1, 3, 3}), true), w(ddp::ones({1, 1, 3, 3}), true);
  CHECK(ddp::fused_cpu_applies(x.data()));
  CHECK(std::string(ddp::conv2d(x, w, Variable(), 1, 1).grad_fn()->name()) == "Conv2dCpuBackward");
  Tensor running_mean = ddp::zeros({1}), running_var = ddp::ones({1});
  CHECK(std::string(ddp::batch_norm(x, Variable(), Variable(), running_mean, running_var, false)
                        .grad_fn()
                        ->name()) == "BatchNormCpuBackward");
  CHECK(std::string(ddp::relu(x).grad_fn()->name()) == "ReluCpuBackward");
}

// ==== batch_norm and relu ===============================================================

TEST_CASE("batch_norm_cpu matches batch_norm_composed, forward, backward, running stats",
          "[ch03][fused][bn]") {
  std::mt19937 rng(403);
  const Tensor x = random_tensor(rng, {4, 3, 5, 6}, -2, 3);
  const Tensor w = random_tensor(rng, {3}, 0.5f, 1.5f), b = rnd(rng, {3});
  const int threads_before = ddp::get_num_threads();
  for (int threads : {1, 2}) {
    ddp::set_num_threads(threads);
    for (bool training : {true, false}) {
      INFO("threads " << threads << (training ? ", training" : ", evaluation"));
      Tensor mean_a = rnd(rng, {3}), var_a = random_tensor(rng, {3}, 0.5f, 2.0f);
      Tensor mean_b = mean_a.clone(), var_b = var_a.clone();
      check_same(
          [&](const Vars& v) {
            return ddp::batch_norm_cpu(v[0], v[1], v[2], mean_a, var_a, training, 0.1, 1e-5);
          },
          [&](const Vars& v) {
            return ddp::batch_norm_composed(v[0], v[1], v[2], mean_b, var_b, training, 0.1, 1e-5);
          },
          {x, w, b}, 1e-5);
      CHECK(agree(mean_a, mean_b, 1e-6, "running_mean") == "");
      CHECK(agree(var_a, var_b, 1e-6, "running_var") == "");
    }
  }
  ddp::set_num_threads(threads_before);
  // No affine parameters, no running statistics, and a non-contiguous input.
  Tensor none_a, none_b, none_c, none_d;
  check_same(
      [&](const Vars& v) {
        return ddp::batch_norm_cpu(v[0], Variable(), Variable(), none_a, none_b, true, 0.1, 1e-5);
      },
      [&](const Vars& v) {
        return ddp::batch_norm_composed(v[0], Variable(), Variable(), none_c, none_d, true, 0.1,
                                        1e-5);
      },
      {x.permute({0, 1, 3, 2})});
}

TEST_CASE("relu_cpu matches relu_composed", "[ch03][fused][relu]") {
  std::mt19937 rng(404);
  // 2^16 elements: above the size where the loop is shared among threads.
  check_same([](const Vars& v) { return ddp::relu_cpu(v[0]); },
             [](const Vars& v) { return ddp::relu_composed(v[0]); },
             {random_tensor(rng, {4, 16, 32, 32}, -1, 1, 1e-3f)}, 0.0);
}

// ==== gradcheck of the textbook versions by name ========================================

TEST_CASE("gradcheck: the textbook conv2d_views, batch_norm_composed, relu_composed",
          "[ch03][fused][gradcheck]") {
  std::mt19937 rng(405);
  auto check = [](const ddp::GradcheckFn& f, const std::vector<Tensor>& inputs) {
    const ddp::GradcheckResult result = ddp::gradcheck(f, inputs);
    INFO(result.summary());
    CHECK(result.ok);
  };
  check([](const Vars& v) { return ddp::conv2d_views(v[0], v[1], v[2], 2, 1); },
        {rnd(rng, {2, 2, 5, 5}), rnd(rng, {3, 2, 3, 3}), rnd(rng, {3})});
  Tensor running_mean = ddp::zeros({2}), running_var = ddp::ones({2});
  check(
      [&](const Vars& v) {
        return ddp::batch_norm_composed(v[0], v[1], v[2], running_mean, running_var, true, 0.1,
                                        1e-5);
      },
      {random_tensor(rng, {3, 2, 3, 2}, -2, 2), random_tensor(rng, {2}, 0.5f, 1.5f),
       rnd(rng, {2})});
  check([](const Vars& v) { return ddp::relu_composed(v[0]); },
        {random_tensor(rng, {3, 5}, -1, 1, 0.05f)});
}
