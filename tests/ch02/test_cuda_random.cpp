// Chapter 02: seeded random tensors are the same on the GPU as on the CPU (philox.hpp:
// element i is a function of (seed, offset + i) on both), and a Generator advances the
// same way whichever device draws.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "tensor/ops.hpp"
#include "tensor/random.hpp"
#include "tests/ch02/gpu_compare.hpp"

using namespace ddp;
using ddp::test::kGpu;
using ddp::test::kRandomTol;
using ddp::test::mismatch;

TEST_CASE("uniform, rand, normal and randn on the GPU equal the CPU's", "[ch02][cuda][random]") {
  for (const Shape& shape : std::vector<Shape>{{1000}, {7, 13}, {1}, {}, {0, 4}, {3, 1 << 18}}) {
    CAPTURE(shape_str(shape));
    Generator gc(42), gg(42);
    CHECK(mismatch(uniform(shape, -2.0f, 3.0f, gg, kGpu), uniform(shape, -2.0f, 3.0f, gc),
                   kRandomTol) == "");
    CHECK(mismatch(rand(shape, gg, kGpu), rand(shape, gc), kRandomTol) == "");
    CHECK(mismatch(normal(shape, 1.5f, 0.5f, gg, kGpu), normal(shape, 1.5f, 0.5f, gc),
                   kRandomTol) == "");
    CHECK(mismatch(randn(shape, gg, kGpu), randn(shape, gc), kRandomTol) == "");
    CHECK(gg.offset() == gc.offset());
  }
}

TEST_CASE("the first values of a seeded draw are the same numbers on both devices",
          "[ch02][cuda][random]") {
  // Not just "close": element by element the same stream positions, so a shift of one
  // position (drawing from offset + i + 1) would fail here.
  Generator gc(7), gg(7);
  const std::vector<float> c = randn({8}, gc).to_vector<float>();
  const std::vector<float> g = randn({8}, gg, kGpu).to_vector<float>();
  for (std::size_t i = 0; i < c.size(); ++i) {
    CAPTURE(i);
    CHECK(g[i] == Approx(c[i]).epsilon(kRandomTol).margin(kRandomTol));
  }
  Generator shifted(7);
  shifted.take(1);
  Generator fresh(7);
  CHECK(mismatch(randn({8}, shifted, kGpu), randn({8}, fresh), kRandomTol) != "");
}

TEST_CASE("uniform_ and normal_ fill GPU tensors, contiguous or not, like the CPU",
          "[ch02][cuda][random]") {
  Generator gc(5), gg(5);
  Tensor c = empty({6, 10}), g = empty({6, 10}, {DType::Float32, kGpu});
  uniform_(c, -1.0f, 1.0f, gc);
  uniform_(g, -1.0f, 1.0f, gg);
  CHECK(mismatch(g, c, kRandomTol) == "");
  normal_(c, 0.0f, 2.0f, gc);
  normal_(g, 0.0f, 2.0f, gg);
  CHECK(mismatch(g, c, kRandomTol) == "");
  // A transposed view: drawn in its row-major order, then written through the view.
  Tensor ct = c.t(), gt = g.t();
  normal_(ct, 3.0f, 1.0f, gc);
  normal_(gt, 3.0f, 1.0f, gg);
  CHECK(mismatch(gt, ct, kRandomTol) == "");
  CHECK(mismatch(g, c, kRandomTol) == "");
  CHECK(gg.offset() == gc.offset());
}

TEST_CASE("draws on the GPU advance the Generator like draws on the CPU", "[ch02][cuda][random]") {
  // randperm runs on the CPU; drawing on the GPU before it must not change what it gives.
  Generator gc(9), gg(9);
  (void)rand({100}, gc);
  (void)rand({100}, gg, kGpu);
  CHECK(mismatch(randperm(50, gg), randperm(50, gc), 0.0) == "");
  CHECK(mismatch(randn({3, 3}, gg, kGpu), randn({3, 3}, gc), kRandomTol) == "");
}
