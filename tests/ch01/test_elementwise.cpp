// Chapter 01, ops.hpp elementwise: every unary op, every binary op (tensor-tensor with
// broadcasting, tensor-scalar, the operators), on random shapes with size-0 and size-1
// dimensions, 0-d tensors and strided inputs, against std:: math in double; int64 ops;
// and the errors (the broadcasting message names both shapes).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "tensor/ops.hpp"
#include "tensor/tensor.hpp"
#include "tests/support/reference.hpp"

using Catch::Contains;
using ddp::BinaryOp;
using ddp::DType;
using ddp::Shape;
using ddp::Tensor;
using ddp::UnaryOp;
namespace ref = ddp::ref;

namespace {

// A tensor holding `values`, contiguous or in a random strided layout.
Tensor place(std::mt19937& rng, const ref::Array& values, bool strided,
             DType dtype = DType::Float32) {
  if (!strided) return ref::make_contiguous(values, dtype);
  const ref::Layout layout = ref::random_layout(rng, values.shape);
  return ref::make_tensor(values, layout.strides, layout.offset, dtype);
}

struct UnaryCase {
  UnaryOp op;
  Tensor (*fn)(const Tensor&);
  double (*want)(double);
  double low, high;  // the input range drawn from
};

const UnaryCase kUnary[] = {
    {UnaryOp::Neg, ddp::neg, [](double x) { return -x; }, -5, 5},
    {UnaryOp::Exp, ddp::exp, [](double x) { return std::exp(x); }, -8, 8},
    {UnaryOp::Log, ddp::log, [](double x) { return std::log(x); }, 0.01, 50},
    {UnaryOp::Sqrt, ddp::sqrt, [](double x) { return std::sqrt(x); }, 0, 50},
    {UnaryOp::Rsqrt, ddp::rsqrt, [](double x) { return 1.0 / std::sqrt(x); }, 0.01, 50},
    {UnaryOp::Abs, ddp::abs, [](double x) { return std::fabs(x); }, -5, 5},
    {UnaryOp::Relu, ddp::relu, [](double x) { return x > 0 ? x : 0.0; }, -5, 5},
    {UnaryOp::Tanh, ddp::tanh, [](double x) { return std::tanh(x); }, -6, 6},
    {UnaryOp::Sigmoid, ddp::sigmoid, [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, -12, 12},
    {UnaryOp::Square, ddp::square, [](double x) { return x * x; }, -5, 5},
};

struct BinaryCase {
  BinaryOp op;
  Tensor (*fn)(const Tensor&, const Tensor&);
};

const BinaryCase kBinary[] = {
    {BinaryOp::Add, ddp::add}, {BinaryOp::Sub, ddp::sub},         {BinaryOp::Mul, ddp::mul},
    {BinaryOp::Div, ddp::div}, {BinaryOp::Maximum, ddp::maximum}, {BinaryOp::Minimum, ddp::minimum},
    {BinaryOp::Pow, ddp::pow}, {BinaryOp::Eq, ddp::eq},           {BinaryOp::Ne, ddp::ne},
    {BinaryOp::Lt, ddp::lt},   {BinaryOp::Le, ddp::le},           {BinaryOp::Gt, ddp::gt},
    {BinaryOp::Ge, ddp::ge},
};

// Inputs that exercise each op: positive bases for pow, no zeros to divide by, and
// small whole numbers for the comparisons so that ties happen.
ref::Array operand(std::mt19937& rng, BinaryOp op, const Shape& shape, bool right) {
  if (ddp::is_comparison(op) || op == BinaryOp::Maximum || op == BinaryOp::Minimum) {
    return ref::random_ints(rng, shape, -2, 2);
  }
  if (op == BinaryOp::Pow) {
    return right ? ref::random_array(rng, shape, -2, 2) : ref::random_array(rng, shape, 0.1, 3);
  }
  if (op == BinaryOp::Div && right) {
    ref::Array b = ref::random_array(rng, shape, 0.5, 2);
    for (std::size_t k = 0; k < b.v.size(); k += 2) b.v[k] = -b.v[k];
    return b;
  }
  return ref::random_array(rng, shape, -4, 4);
}

void check_contiguous_result(const Tensor& t, const Shape& shape) {
  CHECK(t.shape() == shape);
  CHECK(t.is_contiguous());
  CHECK(t.strides() == ref::row_major_strides(shape));
}

}  // namespace

TEST_CASE("every unary op matches std:: math on random strided inputs", "[ch01][ops][unary]") {
  std::mt19937 rng(401);
  for (const UnaryCase& c : kUnary) {
    for (int trial = 0; trial < 12; ++trial) {
      const Shape shape = ref::random_shape(rng, 0, 4, 6);
      const ref::Array x = ref::random_array(rng, shape, c.low, c.high);
      const Tensor t = place(rng, x, trial % 2 == 1);
      INFO(ddp::op_name(c.op) << " on " << ref::shape_text(shape) << ", trial " << trial);
      const Tensor by_name = c.fn(t);
      const Tensor by_enum = ddp::unary(c.op, t);
      check_contiguous_result(by_name, shape);
      CHECK(by_name.dtype() == DType::Float32);
      const ref::Array want = ref::map(x, c.want);
      CHECK(ref::mismatch(by_name, want, ref::kFloat) == "");
      CHECK(ref::mismatch(by_enum, want, ref::kFloat) == "");
      CHECK(ref::mismatch(t, x, ref::kExact) == "");  // the input is only read
    }
  }
}

TEST_CASE("unary ops handle the edge values of their domains", "[ch01][ops][unary]") {
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor x =
      ddp::from_data(std::vector<float>{0.0f, -0.0f, 1e-30f, 80.0f, -80.0f, -1.0f}, {6});
  const auto relu = ddp::relu(x).to_vector<float>();
  CHECK(relu == std::vector<float>{0, 0, 1e-30f, 80, 0, 0});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(std::isnan(ddp::relu(ddp::full({1}, nan)).item<float>()));  // PyTorch: NaN stays NaN
  const auto sig = ddp::sigmoid(x).to_vector<float>();
  CHECK(sig[0] == 0.5f);
  CHECK(sig[3] == Approx(1.0).epsilon(1e-7));
  CHECK(sig[4] == Approx(0.0).margin(1e-30));
  CHECK(ddp::exp(x).to_vector<float>()[4] == Approx(std::exp(-80.0)).epsilon(1e-5));
  CHECK(ddp::log(x).to_vector<float>()[0] == -inf);
  CHECK(std::isnan(ddp::log(x).to_vector<float>()[5]));
  CHECK(std::isnan(ddp::sqrt(x).to_vector<float>()[5]));
  CHECK(ddp::rsqrt(x).to_vector<float>()[0] == inf);
  CHECK(ddp::tanh(x).to_vector<float>()[3] == 1.0f);
  CHECK(ddp::abs(x).to_vector<float>()[1] == 0.0f);
  // 0-d in, 0-d out.
  const Tensor s = ddp::exp(ddp::scalar_tensor(1.0));
  CHECK(s.dim() == 0);
  CHECK(s.item<float>() == Approx(std::exp(1.0)).epsilon(1e-6));
}

TEST_CASE("every binary op matches the reference with broadcasting and strided inputs",
          "[ch01][ops][binary][broadcast]") {
  std::mt19937 rng(402);
  for (const BinaryCase& c : kBinary) {
    for (int trial = 0; trial < 16; ++trial) {
      const Shape sa = ref::random_shape(rng, 0, 4, 4);
      const Shape sb = trial % 4 == 0 ? sa : ref::random_broadcast_partner(rng, sa);
      const bool swap = trial % 3 == 0;
      const Shape& left = swap ? sb : sa;
      const Shape& right = swap ? sa : sb;
      const ref::Array a = operand(rng, c.op, left, false);
      const ref::Array b = operand(rng, c.op, right, true);
      const Tensor ta = place(rng, a, trial % 2 == 0), tb = place(rng, b, trial % 3 != 2);
      INFO(ddp::op_name(c.op) << ": " << ref::shape_text(left) << " with " << ref::shape_text(right)
                              << ", trial " << trial);
      const Tensor by_name = c.fn(ta, tb);
      const Tensor by_enum = ddp::binary(c.op, ta, tb);
      const ref::Array want =
          ref::zip(a, b, [op = c.op](double x, double y) { return ref::apply(op, x, y); });
      check_contiguous_result(by_name, want.shape);
      CHECK(by_name.dtype() == DType::Float32);
      const ref::Tol tol = c.op == BinaryOp::Pow ? ref::Tol{1e-5, 1e-6} : ref::kFloat;
      CHECK(ref::mismatch(by_name, want, tol) == "");
      CHECK(ref::mismatch(by_enum, want, tol) == "");
    }
  }
}

TEST_CASE("broadcasting edge cases: ranks, 0-d, size 0, expanded inputs",
          "[ch01][ops][broadcast]") {
  std::mt19937 rng(403);
  const auto check_add = [&](const Shape& sa, const Shape& sb, const Shape& expected) {
    const ref::Array a = ref::random_array(rng, sa, -1, 1), b = ref::random_array(rng, sb, -1, 1);
    INFO(ref::shape_text(sa) << " + " << ref::shape_text(sb));
    const Tensor got = ddp::add(ref::make_contiguous(a), ref::make_contiguous(b));
    CHECK(got.shape() == expected);
    CHECK(ref::mismatch(got, ref::zip(a, b, [](double x, double y) { return x + y; }),
                        ref::kFloat) == "");
  };
  check_add({8, 1, 6, 1}, {7, 1, 5}, {8, 7, 6, 5});
  check_add({7, 1, 5}, {8, 1, 6, 1}, {8, 7, 6, 5});
  check_add({}, {3, 4}, {3, 4});
  check_add({3, 4}, {}, {3, 4});
  check_add({}, {}, {});
  check_add({0, 3}, {1, 3}, {0, 3});
  check_add({2, 1}, {0}, {2, 0});
  check_add({1}, {0}, {0});
  check_add({5, 1, 1}, {1, 4, 1}, {5, 4, 1});
  check_add({1, 1}, {3}, {1, 3});

  // A stride-0 (expanded) operand, and the same tensor on both sides.
  const Tensor row = ddp::from_data(std::vector<float>{1, 2, 3}, {1, 3});
  const Tensor grid = row.expand({4, 3});
  const Tensor doubled = ddp::add(grid, grid);
  CHECK(doubled.shape() == Shape{4, 3});
  CHECK(doubled.to_vector<float>() == std::vector<float>{2, 4, 6, 2, 4, 6, 2, 4, 6, 2, 4, 6});
  const Tensor sq = ddp::arange(9).view({3, 3});
  CHECK(ddp::sub(sq, sq.t()).to_vector<float>() ==
        std::vector<float>{0, -2, -4, 2, 0, -2, 4, 2, 0});
}

TEST_CASE("scalar forms put the scalar on the right", "[ch01][ops][scalar]") {
  std::mt19937 rng(404);
  for (int trial = 0; trial < 10; ++trial) {
    const Shape shape = ref::random_shape(rng, 0, 4, 5);
    const ref::Array x = ref::random_array(rng, shape, 0.25, 3);
    const Tensor t = place(rng, x, trial % 2 == 0);
    const double s = 1.75;
    INFO("shape " << ref::shape_text(shape));
    const auto want = [&](BinaryOp op) {
      return ref::map(x, [op, s](double v) { return ref::apply(op, v, s); });
    };
    CHECK(ref::mismatch(ddp::add(t, s), want(BinaryOp::Add), ref::kFloat) == "");
    CHECK(ref::mismatch(ddp::sub(t, s), want(BinaryOp::Sub), ref::kFloat) == "");
    CHECK(ref::mismatch(ddp::mul(t, s), want(BinaryOp::Mul), ref::kFloat) == "");
    CHECK(ref::mismatch(ddp::div(t, s), want(BinaryOp::Div), ref::kFloat) == "");
    CHECK(ref::mismatch(ddp::pow(t, s), want(BinaryOp::Pow), {1e-5, 1e-6}) == "");
    CHECK(ref::mismatch(ddp::maximum(t, s), want(BinaryOp::Maximum), ref::kExact) == "");
    CHECK(ref::mismatch(ddp::minimum(t, s), want(BinaryOp::Minimum), ref::kExact) == "");
    for (BinaryOp op :
         {BinaryOp::Eq, BinaryOp::Ne, BinaryOp::Lt, BinaryOp::Le, BinaryOp::Gt, BinaryOp::Ge}) {
      const Tensor got = ddp::binary(op, t, 1.0);
      CHECK(got.dtype() == DType::Float32);
      CHECK(ref::mismatch(got, ref::map(x, [op](double v) { return ref::apply(op, v, 1.0); }),
                          ref::kExact) == "");
    }
    CHECK(ref::mismatch(ddp::binary(BinaryOp::Sub, t, s), want(BinaryOp::Sub), ref::kFloat) == "");
  }
  // pow(x, 2) squares, pow(x, 0.5) is the square root.
  const Tensor x = ddp::from_data(std::vector<float>{4, 9, 2.5f}, {3});
  CHECK(ddp::pow(x, 2.0).to_vector<float>() == std::vector<float>{16, 81, 6.25f});
  CHECK(ddp::pow(x, 0.5).to_vector<float>()[1] == 3.0f);
  // Ties in comparisons with a scalar.
  CHECK(ddp::binary(BinaryOp::Eq, x, 9.0).to_vector<float>() == std::vector<float>{0, 1, 0});
  CHECK(ddp::binary(BinaryOp::Ge, x, 4.0).to_vector<float>() == std::vector<float>{1, 1, 0});
}

TEST_CASE("maximum and minimum propagate a NaN from either side, as PyTorch does",
          "[ch01][ops][nan]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor a = ddp::from_data(std::vector<float>{nan, 1.0f, nan, -2.0f}, {4});
  const Tensor b = ddp::from_data(std::vector<float>{1.0f, nan, nan, 3.0f}, {4});
  for (const auto& [name, op] : {std::pair{"maximum", ddp::maximum(a, b)},
                                 std::pair{"maximum, swapped", ddp::maximum(b, a)},
                                 std::pair{"minimum", ddp::minimum(a, b)},
                                 std::pair{"minimum, swapped", ddp::minimum(b, a)}}) {
    INFO(name);
    const auto got = op.to_vector<float>();
    CHECK(std::isnan(got[0]));
    CHECK(std::isnan(got[1]));
    CHECK(std::isnan(got[2]));
    CHECK(got[3] == (name[1] == 'a' ? 3.0f : -2.0f));
  }
  CHECK(std::isnan(ddp::maximum(a, 0.0).to_vector<float>()[0]));
  CHECK(ddp::maximum(a, 0.0).to_vector<float>()[1] == 1.0f);
  CHECK(std::isnan(ddp::minimum(a, 0.0).to_vector<float>()[2]));
}

TEST_CASE("the operators are the named ops", "[ch01][ops][operators]") {
  std::mt19937 rng(405);
  const ref::Array a = ref::random_array(rng, {3, 1, 4}, 0.5, 2);
  const ref::Array b = ref::random_array(rng, {2, 1}, 0.5, 2);
  const Tensor ta = place(rng, a, true), tb = place(rng, b, true);
  const auto both = [&](double (*f)(double, double)) { return ref::zip(a, b, f); };
  const auto one = [&](const std::function<double(double)>& f) { return ref::map(a, f); };
  CHECK(ref::mismatch(-ta, one([](double x) { return -x; }), ref::kExact) == "");
  CHECK(ref::mismatch(ta + tb, both([](double x, double y) { return x + y; }), ref::kFloat) == "");
  CHECK(ref::mismatch(ta - tb, both([](double x, double y) { return x - y; }), ref::kFloat) == "");
  CHECK(ref::mismatch(ta * tb, both([](double x, double y) { return x * y; }), ref::kFloat) == "");
  CHECK(ref::mismatch(ta / tb, both([](double x, double y) { return x / y; }), ref::kFloat) == "");
  CHECK(ref::mismatch(ta + 3.0, one([](double x) { return x + 3; }), ref::kFloat) == "");
  CHECK(ref::mismatch(ta - 3.0, one([](double x) { return x - 3; }), ref::kFloat) == "");
  CHECK(ref::mismatch(ta * 3.0, one([](double x) { return x * 3; }), ref::kFloat) == "");
  CHECK(ref::mismatch(ta / 3.0, one([](double x) { return x / 3; }), ref::kFloat) == "");
  CHECK(ref::mismatch(3.0 + ta, one([](double x) { return 3 + x; }), ref::kFloat) == "");
  CHECK(ref::mismatch(3.0 - ta, one([](double x) { return 3 - x; }), ref::kFloat) == "");
  CHECK(ref::mismatch(3.0 * ta, one([](double x) { return 3 * x; }), ref::kFloat) == "");
}

TEST_CASE("int64 ops are exact and comparisons return float32 1/0", "[ch01][ops][int64]") {
  std::mt19937 rng(406);
  for (int trial = 0; trial < 10; ++trial) {
    const Shape sa = ref::random_shape(rng, 0, 3, 5);
    const Shape sb = ref::random_broadcast_partner(rng, sa);
    const ref::Array a = ref::random_ints(rng, sa, -1000000, 1000000);
    const ref::Array b = ref::random_ints(rng, sb, -3, 3);
    const Tensor ta = place(rng, a, trial % 2 == 0, DType::Int64);
    const Tensor tb = place(rng, b, true, DType::Int64);
    INFO(ref::shape_text(sa) << " with " << ref::shape_text(sb));
    for (BinaryOp op :
         {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Maximum, BinaryOp::Minimum}) {
      const Tensor got = ddp::binary(op, ta, tb);
      CHECK(got.dtype() == DType::Int64);
      CHECK(ref::mismatch(got,
                          ref::zip(a, b, [op](double x, double y) { return ref::apply(op, x, y); }),
                          ref::kExact) == "");
    }
    for (BinaryOp op :
         {BinaryOp::Eq, BinaryOp::Ne, BinaryOp::Lt, BinaryOp::Le, BinaryOp::Gt, BinaryOp::Ge}) {
      const Tensor tc = place(rng, ref::random_ints(rng, sa, -2, 2), false, DType::Int64);
      const ref::Array c = ref::read(tc);
      const Tensor got = ddp::binary(op, tc, tb);
      CHECK(got.dtype() == DType::Float32);
      CHECK(ref::mismatch(got,
                          ref::zip(c, b, [op](double x, double y) { return ref::apply(op, x, y); }),
                          ref::kExact) == "");
    }
  }
  // Values beyond float32's 24-bit mantissa stay exact (big * big < 2^63).
  const std::int64_t big = (std::int64_t{1} << 31) + 1;
  const Tensor x = ddp::from_data(std::vector<std::int64_t>{big, -big}, {2});
  const Tensor one = ddp::from_data(std::vector<std::int64_t>{1}, {1});
  CHECK(ddp::add(x, one).to_vector<std::int64_t>() == std::vector<std::int64_t>{big + 1, -big + 1});
  CHECK((x * x).to_vector<std::int64_t>() == std::vector<std::int64_t>{big * big, big * big});
  // Scalar forms keep int64.
  const Tensor shifted = ddp::add(x, 2.0);
  CHECK(shifted.dtype() == DType::Int64);
  CHECK(shifted.to_vector<std::int64_t>() == std::vector<std::int64_t>{big + 2, -big + 2});
  CHECK(ddp::mul(x, 3.0).to_vector<std::int64_t>() == std::vector<std::int64_t>{3 * big, -3 * big});
  CHECK(ddp::eq(x, x).to_vector<float>() == std::vector<float>{1, 1});
}

TEST_CASE("a broadcasting error names both shapes", "[ch01][ops][errors]") {
  const Tensor a = ddp::zeros({2, 3}), b = ddp::zeros({4});
  REQUIRE_THROWS_AS(ddp::add(a, b), ddp::Error);
  REQUIRE_THROWS_WITH(ddp::add(a, b), Contains("(2, 3)") && Contains("(4,)"));
  REQUIRE_THROWS_WITH(a * b, Contains("(2, 3)") && Contains("(4,)"));
  REQUIRE_THROWS_WITH(ddp::lt(b, a), Contains("(2, 3)") && Contains("(4,)"));
  REQUIRE_THROWS_WITH(ddp::add(ddp::zeros({0}), ddp::zeros({2})),
                      Contains("(0,)") && Contains("(2,)"));
}

TEST_CASE("ops refuse mixed dtypes, int64 where only float32 makes sense, and undefined tensors",
          "[ch01][ops][errors]") {
  const Tensor f = ddp::ones({3});
  const Tensor i = ddp::ones({3}, {DType::Int64});
  REQUIRE_THROWS_WITH(ddp::add(f, i), Contains("float32") && Contains("int64"));
  REQUIRE_THROWS_WITH(ddp::div(i, i), Contains("div") && Contains("int64"));
  REQUIRE_THROWS_WITH(ddp::pow(i, i), Contains("pow") && Contains("int64"));
  REQUIRE_THROWS_WITH(ddp::exp(i), Contains("exp") && Contains("int64"));
  REQUIRE_THROWS_AS(ddp::relu(i), ddp::Error);
  REQUIRE_THROWS_AS(ddp::add(Tensor(), f), ddp::Error);
  REQUIRE_THROWS_AS(ddp::neg(Tensor()), ddp::Error);
}
