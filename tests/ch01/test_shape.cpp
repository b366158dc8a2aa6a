// Chapter 01, shape.hpp: numel, contiguous_strides, shape_str, broadcast_shapes and
// normalize_dim, against closed forms and the reference broadcasting rule.
#include <catch2/catch.hpp>

#include <random>

#include "base/error.hpp"
#include "tensor/shape.hpp"
#include "tests/support/reference.hpp"

using Catch::Contains;
using ddp::Shape;

TEST_CASE("numel multiplies the sizes, 1 for a 0-d shape and 0 with any size 0", "[ch01][shape]") {
  CHECK(ddp::numel({}) == 1);
  CHECK(ddp::numel({5}) == 5);
  CHECK(ddp::numel({2, 3, 4}) == 24);
  CHECK(ddp::numel({2, 0, 4}) == 0);
  CHECK(ddp::numel({1, 1, 1}) == 1);
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const Shape shape = ddp::ref::random_shape(rng, 0, 6, 7);
    CHECK(ddp::numel(shape) == ddp::ref::count(shape));
  }
}

TEST_CASE("contiguous_strides are row-major, in elements", "[ch01][shape]") {
  CHECK(ddp::contiguous_strides({2, 3, 4}) == Shape{12, 4, 1});
  CHECK(ddp::contiguous_strides({}) == Shape{});
  CHECK(ddp::contiguous_strides({7}) == Shape{1});
  CHECK(ddp::contiguous_strides({5, 1}) == Shape{1, 1});
  // A size-0 dimension counts as 1 (PyTorch's convention), so strides stay non-zero.
  CHECK(ddp::contiguous_strides({2, 0, 3}) == Shape{3, 3, 1});
  std::mt19937 rng(12);
  for (int trial = 0; trial < 200; ++trial) {
    const Shape shape = ddp::ref::random_shape(rng, 0, 6, 7);
    CHECK(ddp::contiguous_strides(shape) == ddp::ref::row_major_strides(shape));
  }
}

TEST_CASE("shape_str writes shapes the way Python writes tuples", "[ch01][shape]") {
  CHECK(ddp::shape_str({}) == "()");
  CHECK(ddp::shape_str({4}) == "(4,)");
  CHECK(ddp::shape_str({2, 3}) == "(2, 3)");
  CHECK(ddp::shape_str({8, 1, 6, 1}) == "(8, 1, 6, 1)");
  CHECK(ddp::shape_str({0}) == "(0,)");
}

TEST_CASE("broadcast_shapes follows NumPy's rules on the classic examples",
          "[ch01][shape][broadcast][ex01.1]") {
  CHECK(ddp::broadcast_shapes({8, 1, 6, 1}, {7, 1, 5}) == Shape{8, 7, 6, 5});
  CHECK(ddp::broadcast_shapes({7, 1, 5}, {8, 1, 6, 1}) == Shape{8, 7, 6, 5});
  CHECK(ddp::broadcast_shapes({}, {2, 3}) == Shape{2, 3});
  CHECK(ddp::broadcast_shapes({2, 3}, {}) == Shape{2, 3});
  CHECK(ddp::broadcast_shapes({}, {}) == Shape{});
  CHECK(ddp::broadcast_shapes({5, 4}, {1}) == Shape{5, 4});
  CHECK(ddp::broadcast_shapes({15, 3, 5}, {15, 1, 5}) == Shape{15, 3, 5});
  // Size 0 broadcasts against 1, and wins: the result is empty.
  CHECK(ddp::broadcast_shapes({0, 3}, {1, 3}) == Shape{0, 3});
  CHECK(ddp::broadcast_shapes({1}, {0}) == Shape{0});
  CHECK(ddp::broadcast_shapes({2, 1}, {0}) == Shape{2, 0});
}

TEST_CASE("broadcast_shapes agrees with the reference rule on random pairs",
          "[ch01][shape][broadcast][ex01.1]") {
  std::mt19937 rng(13);
  for (int trial = 0; trial < 500; ++trial) {
    const Shape a = ddp::ref::random_shape(rng, 0, 5, 4);
    const Shape b = trial % 2 ? ddp::ref::random_broadcast_partner(rng, a)
                              : ddp::ref::random_shape(rng, 0, 5, 4);
    const auto want = ddp::ref::broadcast_shape(a, b);
    INFO("a = " << ddp::ref::shape_text(a) << ", b = " << ddp::ref::shape_text(b));
    if (want) {
      CHECK(ddp::broadcast_shapes(a, b) == *want);
      CHECK(ddp::broadcast_shapes(b, a) == *want);
    } else {
      CHECK_THROWS_WITH(ddp::broadcast_shapes(a, b),
                        Catch::Contains(ddp::ref::shape_text(a)) &&
                            Catch::Contains(ddp::ref::shape_text(b)));
    }
  }
}

TEST_CASE("broadcast_shapes names both shapes when they do not broadcast",
          "[ch01][shape][broadcast][errors][ex01.1]") {
  REQUIRE_THROWS_WITH(ddp::broadcast_shapes({2, 3}, {4}), Contains("(2, 3)") && Contains("(4,)"));
  REQUIRE_THROWS_WITH(ddp::broadcast_shapes({8, 4, 3}, {2, 1}),
                      Contains("(8, 4, 3)") && Contains("(2, 1)"));
  REQUIRE_THROWS_WITH(ddp::broadcast_shapes({0}, {2}), Contains("(0,)") && Contains("(2,)"));
}

TEST_CASE("normalize_dim maps negative dims from the end and rejects the rest", "[ch01][shape]") {
  CHECK(ddp::normalize_dim(0, 3) == 0);
  CHECK(ddp::normalize_dim(2, 3) == 2);
  CHECK(ddp::normalize_dim(-1, 3) == 2);
  CHECK(ddp::normalize_dim(-3, 3) == 0);
  // A 0-d tensor accepts dim 0 and -1, as in PyTorch.
  CHECK(ddp::normalize_dim(0, 0) == 0);
  CHECK(ddp::normalize_dim(-1, 0) == 0);
  CHECK_THROWS_AS(ddp::normalize_dim(3, 3), ddp::Error);
  CHECK_THROWS_AS(ddp::normalize_dim(-4, 3), ddp::Error);
  CHECK_THROWS_AS(ddp::normalize_dim(1, 0), ddp::Error);
  REQUIRE_THROWS_WITH(ddp::normalize_dim(5, 2), Contains("5") && Contains("2 dimensions"));
}
