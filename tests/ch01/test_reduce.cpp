// Chapter 01, ops.hpp reductions: sum, mean, max, min, argmax over every dimension of
// random strided tensors (positive and negative dims, with and without keepdim), the
// full reductions, int64 labels, and sum_to; against loops in double.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "tensor/ops.hpp"
#include "tensor/tensor.hpp"
#include "tests/support/reference.hpp"

using Catch::Contains;
using ddp::DType;
using ddp::Shape;
using ddp::Tensor;
namespace ref = ddp::ref;
using ref::Reduce;

namespace {

Tensor place(std::mt19937& rng, const ref::Array& values, bool strided,
             DType dtype = DType::Float32) {
  if (!strided) return ref::make_contiguous(values, dtype);
  const ref::Layout layout = ref::random_layout(rng, values.shape);
  return ref::make_tensor(values, layout.strides, layout.offset, dtype);
}

const char* name(Reduce op) {
  switch (op) {
    case Reduce::Sum:
      return "sum";
    case Reduce::Mean:
      return "mean";
    case Reduce::Max:
      return "max";
    case Reduce::Min:
      return "min";
    case Reduce::ArgMax:
      return "argmax";
  }
  return "?";
}

Tensor run(Reduce op, const Tensor& x, std::int64_t dim, bool keepdim) {
  switch (op) {
    case Reduce::Sum:
      return ddp::sum(x, dim, keepdim);
    case Reduce::Mean:
      return ddp::mean(x, dim, keepdim);
    case Reduce::Max:
      return ddp::max(x, dim, keepdim);
    case Reduce::Min:
      return ddp::min(x, dim, keepdim);
    case Reduce::ArgMax:
      return ddp::argmax(x, dim, keepdim);
  }
  return {};
}

DType result_dtype(Reduce op, DType input) {
  if (op == Reduce::ArgMax) return DType::Int64;
  if (op == Reduce::Mean) return DType::Float32;
  return input;
}

// Per-element tolerance scale for a sum or mean: the same reduction of |x|.
std::vector<double> magnitude(const ref::Array& x, std::int64_t dim, bool keepdim, Reduce op) {
  if (op != Reduce::Sum && op != Reduce::Mean) return {};
  return ref::reduce_dim(ref::map(x, [](double v) { return std::fabs(v); }), dim, keepdim, op).v;
}

}  // namespace

TEST_CASE("every reduction over every dim, with and without keepdim, matches the loops",
          "[ch01][ops][reduce]") {
  std::mt19937 rng(501);
  for (Reduce op : {Reduce::Sum, Reduce::Mean, Reduce::Max, Reduce::Min, Reduce::ArgMax}) {
    for (int trial = 0; trial < 24; ++trial) {
      const Shape shape = ref::random_shape(rng, 1, 4, 7);
      // Whole numbers on some trials, so that max/min/argmax meet ties.
      const ref::Array x = trial % 3 == 0 ? ref::random_ints(rng, shape, -2, 2)
                                          : ref::random_array(rng, shape, -3, 3);
      const Tensor t = place(rng, x, trial % 2 == 1);
      const auto ndim = static_cast<std::int64_t>(shape.size());
      for (std::int64_t dim = 0; dim < ndim; ++dim) {
        for (bool keepdim : {false, true}) {
          const std::int64_t as_given = (trial + dim) % 2 == 0 ? dim : dim - ndim;
          INFO(name(op) << " of " << ref::shape_text(shape) << " over dim " << as_given
                        << (keepdim ? ", keepdim" : ""));
          const bool empty = shape[static_cast<std::size_t>(dim)] == 0;
          if (empty && op != Reduce::Sum && op != Reduce::Mean) {
            // No element to pick from: an error, as in PyTorch, unless the result is empty.
            if (ref::count(shape) == 0 && ref::reduce_dim(x, dim, keepdim, Reduce::Sum).v.empty()) {
              continue;
            }
            CHECK_THROWS_AS(run(op, t, as_given, keepdim), ddp::Error);
            continue;
          }
          const Tensor got = run(op, t, as_given, keepdim);
          const ref::Array want = ref::reduce_dim(x, dim, keepdim, op);
          CHECK(got.dtype() == result_dtype(op, DType::Float32));
          CHECK(got.is_contiguous());
          CHECK(ref::mismatch(got, want, {1e-5, 1e-6}, magnitude(x, dim, keepdim, op)) == "");
        }
      }
      CHECK(ref::mismatch(t, x, ref::kExact) == "");  // the input is only read
    }
  }
}

TEST_CASE("reductions over a size-0 dimension: sum is 0, mean is NaN, max refuses",
          "[ch01][ops][reduce]") {
  const Tensor x = ddp::zeros({3, 0});
  CHECK(ddp::sum(x, 1).shape() == Shape{3});
  CHECK(ddp::sum(x, 1).to_vector<float>() == std::vector<float>(3, 0.0f));
  CHECK(ddp::sum(x, 1, true).shape() == Shape{3, 1});
  const auto means = ddp::mean(x, 1).to_vector<float>();
  REQUIRE(means.size() == 3);
  for (float m : means) CHECK(std::isnan(m));
  CHECK_THROWS_AS(ddp::max(x, 1), ddp::Error);
  CHECK_THROWS_AS(ddp::min(x, -1), ddp::Error);
  CHECK_THROWS_AS(ddp::argmax(x, 1), ddp::Error);
  // Over the non-empty dimension the result is just empty.
  CHECK(ddp::max(x, 0).shape() == Shape{0});
  CHECK(ddp::argmax(x, 0, true).shape() == Shape{1, 0});
  CHECK(ddp::sum(x).item<float>() == 0.0f);
  CHECK(std::isnan(ddp::mean(x).item<float>()));
  CHECK_THROWS_AS(ddp::max(x), ddp::Error);
  CHECK_THROWS_AS(ddp::min(x), ddp::Error);
}

TEST_CASE("full reductions return a 0-d tensor", "[ch01][ops][reduce]") {
  std::mt19937 rng(502);
  for (int trial = 0; trial < 20; ++trial) {
    Shape shape = ref::random_shape(rng, 0, 4, 6);
    for (auto& s : shape) s = s == 0 ? 2 : s;  // non-empty: max and min need an element
    const ref::Array x = ref::random_array(rng, shape, -3, 3);
    const Tensor t = place(rng, x, trial % 2 == 0);
    INFO("shape " << ref::shape_text(shape));
    const ref::Array absx = ref::map(x, [](double v) { return std::fabs(v); });
    for (Reduce op : {Reduce::Sum, Reduce::Mean, Reduce::Max, Reduce::Min}) {
      const Tensor got = op == Reduce::Sum    ? ddp::sum(t)
                         : op == Reduce::Mean ? ddp::mean(t)
                         : op == Reduce::Max  ? ddp::max(t)
                                              : ddp::min(t);
      INFO(name(op));
      CHECK(got.dim() == 0);
      CHECK(got.dtype() == DType::Float32);
      const std::vector<double> scale = op == Reduce::Sum || op == Reduce::Mean
                                            ? ref::reduce_all(absx, op).v
                                            : std::vector<double>{};
      CHECK(ref::mismatch(got, ref::reduce_all(x, op), {1e-5, 1e-6}, scale) == "");
    }
  }
  // A 0-d input reduces over "dimension 0" to itself.
  const Tensor s = ddp::scalar_tensor(-2.5);
  CHECK(ddp::sum(s).item<float>() == -2.5f);
  CHECK(ddp::sum(s, 0).dim() == 0);
  CHECK(ddp::sum(s, 0).item<float>() == -2.5f);
  CHECK(ddp::max(s, -1).item<float>() == -2.5f);
  CHECK(ddp::argmax(s, 0).item<std::int64_t>() == 0);
}

TEST_CASE("long sums are exact on whole numbers and accurate on fractions", "[ch01][ops][reduce]") {
  std::mt19937 rng(503);
  // Whole numbers below 2^24 in total add exactly in float32 in any order, so every
  // element must be counted exactly once; the odd length exercises a vector loop's tail.
  const std::int64_t n = 100003;
  const ref::Array ints = ref::random_ints(rng, {n}, 0, 3);
  const Tensor ti = ref::make_contiguous(ints);
  CHECK(ref::mismatch(ddp::sum(ti), ref::reduce_all(ints, Reduce::Sum), ref::kExact) == "");
  const ref::Array block = ref::random_ints(rng, {7, 4001, 3}, -3, 3);
  const Tensor tb = place(rng, block, true);
  for (std::int64_t dim = 0; dim < 3; ++dim) {
    INFO("dim " << dim);
    CHECK(ref::mismatch(ddp::sum(tb, dim), ref::reduce_dim(block, dim, false, Reduce::Sum),
                        ref::kExact) == "");
  }
  // Fractions: a sum of 1e5 numbers in [0, 1) within 1e-4 relative of the double sum.
  const ref::Array x = ref::random_array(rng, {n}, 0, 1);
  const Tensor t = ref::make_contiguous(x);
  CHECK(ref::mismatch(ddp::sum(t), ref::reduce_all(x, Reduce::Sum), {1e-4, 0}) == "");
  CHECK(ref::mismatch(ddp::mean(t), ref::reduce_all(x, Reduce::Mean), {1e-4, 0}) == "");
}

TEST_CASE("int64 reductions: sum keeps int64 exactly, argmax finds the first maximum",
          "[ch01][ops][reduce][int64]") {
  std::mt19937 rng(504);
  for (int trial = 0; trial < 10; ++trial) {
    Shape shape = ref::random_shape(rng, 1, 3, 6);
    for (auto& s : shape) s = s == 0 ? 3 : s;
    const ref::Array x = ref::random_ints(rng, shape, -3, 3);
    const Tensor t = place(rng, x, trial % 2 == 0, DType::Int64);
    INFO("shape " << ref::shape_text(shape));
    for (std::int64_t dim = 0; dim < static_cast<std::int64_t>(shape.size()); ++dim) {
      for (Reduce op : {Reduce::Sum, Reduce::Max, Reduce::Min, Reduce::ArgMax}) {
        INFO(name(op) << " over " << dim);
        const Tensor got = run(op, t, dim, trial % 3 == 0);
        CHECK(got.dtype() == DType::Int64);
        CHECK(ref::mismatch(got, ref::reduce_dim(x, dim, trial % 3 == 0, op), ref::kExact) == "");
      }
    }
    const Tensor total = ddp::sum(t);
    CHECK(total.dtype() == DType::Int64);
    CHECK(ref::mismatch(total, ref::reduce_all(x, Reduce::Sum), ref::kExact) == "");
  }
  // Beyond 2^24 a float32 accumulator would lose the +1s.
  const std::int64_t big = std::int64_t{1} << 40;
  const Tensor v = ddp::from_data(std::vector<std::int64_t>{big, 1, 1, 1}, {4});
  CHECK(ddp::sum(v).item<std::int64_t>() == big + 3);
  // Ties: the first maximum wins.
  const Tensor ties = ddp::from_data(std::vector<float>{1, 5, 5, 2, 7, 7, 7, 0}, {2, 4});
  CHECK(ddp::argmax(ties, 1).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 0});
  CHECK(ddp::argmax(ties, 0).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 1, 1, 0});
}

TEST_CASE("accuracy the way a training loop computes it: eq(argmax(logits), labels)",
          "[ch01][ops][reduce][int64]") {
  std::mt19937 rng(505);
  const std::int64_t n = 64, classes = 10;
  const ref::Array logits = ref::random_array(rng, {n, classes}, -4, 4);
  const ref::Array labels = ref::random_ints(rng, {n}, 0, classes - 1);
  const Tensor predicted = ddp::argmax(ref::make_contiguous(logits), 1);
  const Tensor hits = ddp::eq(predicted, ref::make_contiguous(labels, DType::Int64));
  CHECK(hits.dtype() == DType::Float32);
  const ref::Array want_pred = ref::reduce_dim(logits, 1, false, Reduce::ArgMax);
  double want_hits = 0;
  for (std::int64_t k = 0; k < n; ++k) {
    want_hits += want_pred.v[static_cast<std::size_t>(k)] == labels.v[static_cast<std::size_t>(k)];
  }
  CHECK(ref::mismatch(predicted, want_pred, ref::kExact) == "");
  CHECK(ddp::sum(hits).item<float>() == static_cast<float>(want_hits));
  CHECK(ddp::mean(hits).item<float>() == Approx(want_hits / static_cast<double>(n)).epsilon(1e-6));
}

TEST_CASE("reductions reject a dimension out of range", "[ch01][ops][reduce][errors]") {
  const Tensor x = ddp::zeros({2, 3});
  REQUIRE_THROWS_WITH(ddp::sum(x, 2), Contains("dimension 2") && Contains("2 dimensions"));
  CHECK_THROWS_AS(ddp::mean(x, -3), ddp::Error);
  CHECK_THROWS_AS(ddp::argmax(x, 5), ddp::Error);
  CHECK_THROWS_AS(ddp::sum(ddp::scalar_tensor(1.0), 1), ddp::Error);
}

TEST_CASE("sum_to undoes broadcasting by summing over the broadcast dimensions",
          "[ch01][ops][reduce][sum_to]") {
  std::mt19937 rng(506);
  for (int trial = 0; trial < 60; ++trial) {
    const Shape target = ref::random_shape(rng, 0, 4, 4);
    // x's shape: target broadcast up (extra leading dims, 1s grown), as in a forward pass.
    Shape full = ref::random_shape(rng, 0, 2, 3);
    for (std::int64_t s : target) {
      full.push_back(s == 1 ? std::uniform_int_distribution<std::int64_t>(0, 3)(rng) : s);
    }
    const ref::Array x = ref::random_array(rng, full, -2, 2);
    const Tensor t = place(rng, x, trial % 2 == 0);
    INFO(ref::shape_text(full) << " down to " << ref::shape_text(target));
    const Tensor got = ddp::sum_to(t, target);
    CHECK(got.shape() == target);
    const std::vector<double> scale =
        ref::sum_to(ref::map(x, [](double v) { return std::fabs(v); }), target).v;
    CHECK(ref::mismatch(got, ref::sum_to(x, target), {1e-5, 1e-6}, scale) == "");
  }
  // Same shape: the values come back unchanged.
  const Tensor m = ddp::arange(6).view({2, 3});
  CHECK(ddp::sum_to(m, {2, 3}).to_vector<float>() == m.to_vector<float>());
  CHECK(ddp::sum_to(m, {}).item<float>() == 15.0f);
  CHECK(ddp::sum_to(m, {3}).to_vector<float>() == std::vector<float>{3, 5, 7});
  CHECK(ddp::sum_to(m, {2, 1}).to_vector<float>() == std::vector<float>{3, 12});
  CHECK(ddp::sum_to(m, {1, 3}).shape() == Shape{1, 3});
}

TEST_CASE("sum_to refuses a shape that does not broadcast to the input",
          "[ch01][ops][reduce][sum_to][errors]") {
  const Tensor m = ddp::zeros({2, 3});
  REQUIRE_THROWS_WITH(ddp::sum_to(m, {4}), Contains("(2, 3)") && Contains("(4,)"));
  CHECK_THROWS_AS(ddp::sum_to(m, {2, 2}), ddp::Error);
  CHECK_THROWS_AS(ddp::sum_to(m, {1, 2, 3, 4}), ddp::Error);
}
