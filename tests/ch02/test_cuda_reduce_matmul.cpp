// Chapter 02: reductions (sum, mean, max, min, argmax, sum_to) and matrix multiplies
// (cuBLAS through ddp::matmul, and the hand-written matmul_tiled) on the GPU against
// the CPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <vector>

#include "tensor/cuda/matmul_tiled.hpp"
#include "tensor/ops.hpp"
#include "tensor/random.hpp"
#include "tests/ch02/gpu_compare.hpp"

using namespace ddp;
using ddp::test::kElementwiseTol;
using ddp::test::kGpu;
using ddp::test::kMatmulTol;
using ddp::test::mismatch;

namespace {

// Every reduction of `x` over every dimension (with and without keepdim) and over
// everything, on both devices. `x` is on the CPU; the GPU gets a copy.
void check_all_reductions(const Tensor& x, bool float_only_ops) {
  const Tensor g = x.to(kGpu);
  CHECK(mismatch(sum(g), sum(x), kElementwiseTol) == "");
  if (x.numel() > 0) {
    CHECK(mismatch(max(g), max(x), 0.0) == "");
    CHECK(mismatch(min(g), min(x), 0.0) == "");
  }
  if (float_only_ops) CHECK(mismatch(mean(g), mean(x), kElementwiseTol) == "");
  for (std::int64_t d = -x.dim(); d < std::max<std::int64_t>(x.dim(), 1); ++d) {
    for (bool keepdim : {false, true}) {
      CAPTURE(x.describe(), d, keepdim);
      CHECK(mismatch(sum(g, d, keepdim), sum(x, d, keepdim), kElementwiseTol) == "");
      if (float_only_ops) {
        CHECK(mismatch(mean(g, d, keepdim), mean(x, d, keepdim), kElementwiseTol) == "");
      }
      const bool empty_dim = x.dim() > 0 && x.size(d) == 0;
      if (empty_dim) {
        CHECK_THROWS_AS(max(g, d, keepdim), Error);
        continue;
      }
      CHECK(mismatch(max(g, d, keepdim), max(x, d, keepdim), 0.0) == "");
      CHECK(mismatch(min(g, d, keepdim), min(x, d, keepdim), 0.0) == "");
      CHECK(mismatch(argmax(g, d, keepdim), argmax(x, d, keepdim), 0.0) == "");
    }
  }
}

}  // namespace

TEST_CASE("reductions on the GPU match the CPU over every dimension", "[ch02][cuda][reduce]") {
  Generator gen(11);
  for (const Shape& shape :
       std::vector<Shape>{{7}, {3, 5}, {4, 1, 6}, {2, 3, 4, 5}, {1}, {}, {3, 0, 2}, {0}}) {
    CAPTURE(shape_str(shape));
    check_all_reductions(randn(shape, gen), true);
  }
}

TEST_CASE("reductions on the GPU: ties, int64, non-contiguous inputs", "[ch02][cuda][reduce]") {
  Generator gen(12);
  // Whole numbers in [-3, 3]: many ties, and argmax must pick the first maximum.
  const Tensor ties = uniform({6, 40}, -3.5f, 3.5f, gen).to(DType::Int64);
  check_all_reductions(ties.to(DType::Float32), true);
  check_all_reductions(ties, false);
  // A transposed input is made contiguous by the op before the backend sees it.
  const Tensor x = randn({5, 9}, gen);
  check_all_reductions(x.t(), true);
  check_all_reductions(x.slice(1, 0, 9, 4), true);
}

TEST_CASE("reductions on the GPU: long dimensions and many outputs", "[ch02][cuda][reduce]") {
  Generator gen(13);
  // Longer than one block's 256 threads: each thread walks a stripe.
  const Tensor long_row = uniform({3, 100000}, -1.0f, 1.0f, gen);
  check_all_reductions(long_row, true);
  // More outputs (70000) than the grid's 65535 blocks: blocks loop over outputs.
  const Tensor many = randn({70000, 3}, gen);
  const Tensor g = many.to(kGpu);
  CHECK(mismatch(sum(g, 1), sum(many, 1), kElementwiseTol) == "");
  CHECK(mismatch(argmax(g, 1), argmax(many, 1), 0.0) == "");
  CHECK(mismatch(max(g, 0), max(many, 0), 0.0) == "");
}

TEST_CASE("max and argmax on the GPU: NaN wins, as on the CPU", "[ch02][cuda][reduce]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> v = {1, 5, nan, 2, 9, nan, 4, 3, 7, 7, 1, 7};
  const Tensor x = from_data(std::span<const float>(v), {3, 4});
  const Tensor g = x.to(kGpu);
  for (std::int64_t d : {0, 1}) {
    CAPTURE(d);
    CHECK(mismatch(max(g, d), max(x, d), 0.0) == "");
    CHECK(mismatch(min(g, d), min(x, d), 0.0) == "");
    CHECK(mismatch(argmax(g, d), argmax(x, d), 0.0) == "");
  }
  CHECK(mismatch(max(g), max(x), 0.0) == "");
}

TEST_CASE("sum_to on the GPU matches the CPU", "[ch02][cuda][reduce]") {
  Generator gen(14);
  const Tensor x = randn({4, 3, 5}, gen);
  const Tensor g = x.to(kGpu);
  for (const Shape& shape :
       std::vector<Shape>{{4, 3, 5}, {3, 5}, {5}, {1, 5}, {3, 1}, {4, 1, 1}, {}, {1}}) {
    CAPTURE(shape_str(shape));
    CHECK(mismatch(sum_to(g, shape), sum_to(x, shape), kElementwiseTol) == "");
  }
}

// ---- Matmul -------------------------------------------------------------------------

TEST_CASE("matmul on the GPU (cuBLAS) matches the CPU", "[ch02][cuda][matmul]") {
  Generator gen(21);
  struct Case {
    Shape a, b;
  };
  const std::vector<Case> cases = {
      {{7, 13}, {13, 5}},       {{64, 128}, {128, 32}}, {{1, 9}, {9, 1}},    {{1, 1}, {1, 1}},
      {{33, 1}, {1, 17}},       {{3, 4, 5}, {3, 5, 6}}, {{4, 5}, {3, 5, 6}}, {{3, 4, 5}, {5, 6}},
      {{1, 4, 5}, {3, 5, 2}},   {{0, 5}, {5, 3}},       {{4, 0}, {0, 3}},    {{2, 0, 3}, {2, 3, 4}},
      {{100, 300}, {300, 200}},
  };
  for (const Case& c : cases) {
    CAPTURE(shape_str(c.a), shape_str(c.b));
    const Tensor a = randn(c.a, gen), b = randn(c.b, gen);
    const Tensor got = matmul(a.to(kGpu), b.to(kGpu));
    CHECK(got.device() == kGpu);
    CHECK(mismatch(got, matmul(a, b), kMatmulTol) == "");
  }
}

TEST_CASE("matmul on the GPU reads transposed and sliced operands", "[ch02][cuda][matmul]") {
  Generator gen(22);
  const Tensor a = randn({6, 9}, gen), b = randn({9, 4}, gen);
  const Tensor at = randn({9, 6}, gen), bt = randn({4, 9}, gen);
  const Tensor ga = a.to(kGpu), gb = b.to(kGpu), gat = at.to(kGpu), gbt = bt.to(kGpu);
  // Every combination of row- and column-major operands (no copies needed).
  CHECK(mismatch(matmul(gat.t(), gb), matmul(at.t(), b), kMatmulTol) == "");
  CHECK(mismatch(matmul(ga, gbt.t()), matmul(a, bt.t()), kMatmulTol) == "");
  CHECK(mismatch(matmul(gat.t(), gbt.t()), matmul(at.t(), bt.t()), kMatmulTol) == "");
  // Row stride larger than the row (a narrowed block of a wider matrix).
  CHECK(mismatch(matmul(ga.narrow(1, 2, 5), gb.narrow(0, 1, 5)),
                 matmul(a.narrow(1, 2, 5), b.narrow(0, 1, 5)), kMatmulTol) == "");
  // A stepped slice is neither layout: ops.cpp copies it first.
  CHECK(mismatch(matmul(ga.slice(1, 0, 9, 3), gb.slice(0, 0, 9, 3)),
                 matmul(a.slice(1, 0, 9, 3), b.slice(0, 0, 9, 3)), kMatmulTol) == "");
  // Batched with transposed matrices inside (permuted 3-D views).
  const Tensor a3 = randn({3, 5, 4}, gen), b3 = randn({3, 6, 5}, gen);
  CHECK(mismatch(matmul(a3.to(kGpu).transpose(1, 2), b3.to(kGpu).transpose(1, 2)),
                 matmul(a3.transpose(1, 2), b3.transpose(1, 2)), kMatmulTol) == "");
  // The batch is not the outermost dimension in memory: batch stride 5, row stride 15.
  const Tensor a3b = randn({4, 3, 5}, gen);
  CHECK(mismatch(matmul(a3b.to(kGpu).transpose(0, 1), b3.to(kGpu).transpose(1, 2)),
                 matmul(a3b.transpose(0, 1), b3.transpose(1, 2)), kMatmulTol) == "");
}

TEST_CASE("matmul_tiled matches the CPU", "[ch02][cuda][matmul]") {
  Generator gen(23);
  for (const auto& [m, k, n] : std::vector<std::array<std::int64_t, 3>>{{1, 1, 1},
                                                                        {32, 32, 32},
                                                                        {33, 65, 17},
                                                                        {128, 256, 64},
                                                                        {5, 300, 7},
                                                                        {70, 3, 90},
                                                                        {4, 0, 3},
                                                                        {0, 4, 3}}) {
    CAPTURE(m, k, n);
    const Tensor a = randn({m, k}, gen), b = randn({k, n}, gen);
    const Tensor out = empty({m, n}, {DType::Float32, kGpu});
    cuda::matmul_tiled(a.to(kGpu), b.to(kGpu), out);
    CHECK(mismatch(out, matmul(a, b), kMatmulTol) == "");
  }
}

TEST_CASE("matmul_tiled checks its arguments", "[ch02][cuda][matmul]") {
  const Tensor a = zeros({4, 5}, {DType::Float32, kGpu}), b = zeros({5, 3}, {DType::Float32, kGpu});
  const Tensor out = empty({4, 3}, {DType::Float32, kGpu});
  CHECK_THROWS_WITH(cuda::matmul_tiled(a, b.t(), out), Catch::Contains("matmul_tiled expects"));
  CHECK_THROWS_WITH(cuda::matmul_tiled(a, b.cpu(), out), Catch::Contains("one GPU"));
  CHECK_THROWS_WITH(cuda::matmul_tiled(a.t().t(), zeros({3, 5}, {DType::Float32, kGpu}).t(), out),
                    Catch::Contains("contiguous"));
}
