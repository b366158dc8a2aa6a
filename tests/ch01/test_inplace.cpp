// Chapter 01, the in-place methods of Tensor (copy_, fill_, zero_, add_, sub_, mul_,
// div_, scalar add_/mul_) and ops.hpp's binary_: on strided views they must write
// exactly the view's elements (the gaps of the storage, which hold ref::kPoison, and
// the rest of the base stay as they were) with the values of the reference.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tensor/ops.hpp"
#include "tensor/random.hpp"
#include "tensor/tensor.hpp"
#include "tests/support/reference.hpp"

using Catch::Contains;
using ddp::BinaryOp;
using ddp::DType;
using ddp::Shape;
using ddp::Tensor;
namespace ref = ddp::ref;

namespace {

// A strided float32 tensor with gaps, and its values.
struct Strided {
  ref::Array values;
  Tensor tensor;
};

Strided random_strided(std::mt19937& rng, const Shape& shape, double low, double high,
                       DType dtype = DType::Float32) {
  ref::Array values = dtype == DType::Float32 ? ref::random_array(rng, shape, low, high)
                                              : ref::random_ints(rng, shape, -20, 20);
  const ref::Layout layout = ref::random_layout(rng, shape);
  return {values, ref::make_tensor(values, layout.strides, layout.offset, dtype)};
}

// A shape that broadcasts TO `shape` (never grows it): leading dims dropped, some 1s.
Shape shrink_for_broadcast(std::mt19937& rng, const Shape& shape) {
  std::uniform_int_distribution<std::size_t> drop(0, shape.size());
  std::uniform_int_distribution<int> coin(0, 2);
  Shape out(shape.begin() + static_cast<std::ptrdiff_t>(drop(rng)), shape.end());
  for (auto& s : out) {
    if (coin(rng) == 0) s = 1;
  }
  return out;
}

// "" when every storage slot that is not an element of `t` still holds what `before`
// held (float32 storage).
std::string untouched_outside(const Tensor& t, const std::vector<float>& before) {
  std::set<std::int64_t> slots;
  ref::for_each_index(t.shape(), [&](const std::vector<std::int64_t>& index) {
    slots.insert(ref::storage_index(t, index));
  });
  const std::vector<float> after = ref::storage_floats(t);
  for (std::size_t i = 0; i < before.size(); ++i) {
    if (slots.count(static_cast<std::int64_t>(i)) == 0 &&
        std::memcmp(&before[i], &after[i], sizeof(float)) != 0) {
      return "storage slot " + std::to_string(i) + " outside the view changed from " +
             std::to_string(before[i]) + " to " + std::to_string(after[i]);
    }
  }
  return "";
}

}  // namespace

TEST_CASE("fill_ and zero_ write every element of a strided view and nothing else",
          "[ch01][inplace]") {
  std::mt19937 rng(301);
  for (int trial = 0; trial < 30; ++trial) {
    const Shape shape = ref::random_shape(rng, 0, 4, 5);
    Strided s = random_strided(rng, shape, -1, 1);
    const std::vector<float> before = ref::storage_floats(s.tensor);
    Tensor& same = s.tensor.fill_(0.75);
    CHECK(&same == &s.tensor);
    CHECK(ref::mismatch(s.tensor, ref::map(s.values, [](double) { return 0.75; }), ref::kExact) ==
          "");
    CHECK(untouched_outside(s.tensor, before) == "");
    s.tensor.zero_();
    CHECK(ref::mismatch(s.tensor, ref::map(s.values, [](double) { return 0.0; }), ref::kExact) ==
          "");
    CHECK(untouched_outside(s.tensor, before) == "");
  }
  Tensor labels = ddp::zeros({2, 3}, {DType::Int64});
  labels.t().fill_(7.0);
  CHECK(labels.to_vector<std::int64_t>() == std::vector<std::int64_t>(6, 7));
}

TEST_CASE("add_, sub_, mul_ and div_ on strided views broadcast the other operand",
          "[ch01][inplace]") {
  std::mt19937 rng(302);
  for (int trial = 0; trial < 60; ++trial) {
    const Shape shape = ref::random_shape(rng, 0, 4, 5);
    const Shape other_shape = shrink_for_broadcast(rng, shape);
    INFO("out " << ref::shape_text(shape) << ", other " << ref::shape_text(other_shape));
    Strided other = random_strided(rng, other_shape, 0.5, 2.0);
    const int which = trial % 5;
    Strided out = random_strided(rng, shape, -3, 3);
    const std::vector<float> before = ref::storage_floats(out.tensor);
    ref::Array want;
    Tensor* result = nullptr;
    switch (which) {
      case 0:
        result = &out.tensor.add_(other.tensor);
        want = ref::zip(out.values, other.values, [](double a, double b) { return a + b; });
        break;
      case 1:
        result = &out.tensor.add_(other.tensor, -2.5f);
        want = ref::zip(out.values, other.values, [](double a, double b) { return a - 2.5 * b; });
        break;
      case 2:
        result = &out.tensor.sub_(other.tensor);
        want = ref::zip(out.values, other.values, [](double a, double b) { return a - b; });
        break;
      case 3:
        result = &out.tensor.mul_(other.tensor);
        want = ref::zip(out.values, other.values, [](double a, double b) { return a * b; });
        break;
      default:
        result = &out.tensor.div_(other.tensor);
        want = ref::zip(out.values, other.values, [](double a, double b) { return a / b; });
        break;
    }
    INFO("method " << which);
    CHECK(result == &out.tensor);
    CHECK(ref::mismatch(out.tensor, want, ref::kFloat) == "");
    CHECK(untouched_outside(out.tensor, before) == "");
    // The other operand is only read.
    CHECK(ref::mismatch(other.tensor, other.values, ref::kExact) == "");
  }
}

TEST_CASE("scalar add_ and mul_ work in place on a transposed view", "[ch01][inplace]") {
  Tensor m = ddp::arange(6).view({2, 3});
  Tensor mt = m.t();
  CHECK(&mt.add_(10.0f) == &mt);
  CHECK(m.to_vector<float>() == std::vector<float>{10, 11, 12, 13, 14, 15});
  CHECK(&mt.mul_(0.5f) == &mt);
  CHECK(m.to_vector<float>() == std::vector<float>{5, 5.5f, 6, 6.5f, 7, 7.5f});
  // Only the selected column changes.
  m.select(1, 1).mul_(-1.0f);
  CHECK(m.to_vector<float>() == std::vector<float>{5, -5.5f, 6, 6.5f, -7, 7.5f});
}

TEST_CASE("binary_ applies every op in place, with a tensor or a scalar", "[ch01][inplace]") {
  std::mt19937 rng(303);
  const BinaryOp ops[] = {BinaryOp::Add,     BinaryOp::Sub,     BinaryOp::Mul, BinaryOp::Div,
                          BinaryOp::Maximum, BinaryOp::Minimum, BinaryOp::Pow};
  for (BinaryOp op : ops) {
    for (int trial = 0; trial < 6; ++trial) {
      const Shape shape = ref::random_shape(rng, 1, 3, 5);
      const Shape other_shape = shrink_for_broadcast(rng, shape);
      INFO(ddp::op_name(op) << ": out " << ref::shape_text(shape) << ", other "
                            << ref::shape_text(other_shape));
      Strided out = random_strided(rng, shape, 0.5, 2.0);
      Strided other = random_strided(rng, other_shape, 0.5, 2.0);
      const std::vector<float> before = ref::storage_floats(out.tensor);
      ddp::binary_(op, out.tensor, other.tensor);
      const ref::Array want = ref::zip(out.values, other.values,
                                       [op](double a, double b) { return ref::apply(op, a, b); });
      CHECK(ref::mismatch(out.tensor, want, {1e-5, 1e-6}) == "");
      CHECK(untouched_outside(out.tensor, before) == "");

      Strided out2 = random_strided(rng, shape, 0.5, 2.0);
      ddp::binary_(op, out2.tensor, 1.25);
      const ref::Array want2 =
          ref::map(out2.values, [op](double a) { return ref::apply(op, a, 1.25); });
      CHECK(ref::mismatch(out2.tensor, want2, {1e-5, 1e-6}) == "");
    }
  }
}

TEST_CASE("in-place ops on int64 tensors stay exact", "[ch01][inplace][int64]") {
  std::mt19937 rng(304);
  const Shape shape{3, 4};
  Strided out = random_strided(rng, shape, 0, 0, DType::Int64);
  Strided other = random_strided(rng, {4}, 0, 0, DType::Int64);
  ref::Array want = ref::zip(out.values, other.values, [](double a, double b) { return a + b; });
  out.tensor.add_(other.tensor);
  CHECK(ref::mismatch(out.tensor, want, ref::kExact) == "");
  want = ref::zip(want, other.values, [](double a, double b) { return a * b; });
  out.tensor.mul_(other.tensor);
  CHECK(ref::mismatch(out.tensor, want, ref::kExact) == "");
  want = ref::zip(want, other.values, [](double a, double b) { return a - b; });
  out.tensor.sub_(other.tensor);
  CHECK(ref::mismatch(out.tensor, want, ref::kExact) == "");
  CHECK(out.tensor.dtype() == DType::Int64);
  CHECK_THROWS_AS(out.tensor.div_(other.tensor), ddp::Error);
}

TEST_CASE("int64 ops take whole-number scalars only", "[ch01][inplace][int64]") {
  // Cast to int64, 0.5 became 0: `x < 0.5` answered `x < 0`, and `x * 0.5` gave 0.
  Tensor x = ddp::from_data(std::vector<std::int64_t>{0, 2, 5}, {3});
  CHECK_THROWS_WITH(ddp::binary(BinaryOp::Lt, x, 0.5),
                    Contains("whole-number scalar") && Contains("int64"));
  CHECK_THROWS_WITH(ddp::binary(BinaryOp::Eq, x, 2.5), Contains("whole-number scalar"));
  CHECK_THROWS_WITH(ddp::mul(x, 0.5), Contains("whole-number scalar"));
  CHECK_THROWS_WITH(x.mul_(0.5f), Contains("whole-number scalar"));
  CHECK_THROWS_WITH(x.add_(x, 2.5f), Contains("whole-number scalar"));
  CHECK(x.to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 2, 5});  // untouched
  // Whole numbers are exact, as before.
  CHECK(ddp::mul(x, 3.0).to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 6, 15});
  CHECK(ddp::binary(BinaryOp::Lt, x, 2.0).to_vector<float>() == std::vector<float>{1, 0, 0});
  x.add_(x, 2.0f);
  CHECK(x.to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 6, 15});
}

TEST_CASE("copy_ broadcasts the source, converts dtype, and writes through views",
          "[ch01][inplace]") {
  std::mt19937 rng(305);
  for (int trial = 0; trial < 40; ++trial) {
    const Shape shape = ref::random_shape(rng, 0, 4, 5);
    const Shape src_shape = shrink_for_broadcast(rng, shape);
    INFO("dst " << ref::shape_text(shape) << ", src " << ref::shape_text(src_shape));
    Strided dst = random_strided(rng, shape, -1, 1);
    Strided src = random_strided(rng, src_shape, -9, 9);
    const std::vector<float> before = ref::storage_floats(dst.tensor);
    Tensor& same = dst.tensor.copy_(src.tensor);
    CHECK(&same == &dst.tensor);
    CHECK(ref::mismatch(dst.tensor, ref::broadcast_to(src.values, shape), ref::kExact) == "");
    CHECK(untouched_outside(dst.tensor, before) == "");
  }
  // int64 -> float32 and float32 -> int64 (truncation toward zero).
  Tensor f = ddp::zeros({2, 2});
  f.copy_(ddp::from_data(std::vector<std::int64_t>{1, -2, 3, 40}, {2, 2}).t());
  CHECK(f.to_vector<float>() == std::vector<float>{1, 3, -2, 40});
  Tensor i = ddp::zeros({3}, {DType::Int64});
  i.copy_(ddp::from_data(std::vector<float>{1.9f, -1.9f, 5.0f}, {3}));
  CHECK(i.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, -1, 5});
  // A 0-d source fills everything.
  Tensor g = ddp::zeros({2, 3});
  g.copy_(ddp::scalar_tensor(4.0));
  CHECK(g.to_vector<float>() == std::vector<float>(6, 4.0f));
}

TEST_CASE("in-place ops refuse an operand that would grow the output", "[ch01][inplace][errors]") {
  Tensor out = ddp::zeros({3, 1});
  const Tensor big = ddp::ones({3, 4});
  REQUIRE_THROWS_AS(out.add_(big), ddp::Error);
  REQUIRE_THROWS_WITH(out.add_(big), Contains("(3, 1)") && Contains("(3, 4)"));
  REQUIRE_THROWS_WITH(out.copy_(big), Contains("(3, 1)") && Contains("(3, 4)"));
  REQUIRE_THROWS_WITH(out.mul_(ddp::ones({2})), Contains("(3, 1)") && Contains("(2,)"));
  // Nothing was written by the failed calls.
  CHECK(out.to_vector<float>() == std::vector<float>(3, 0.0f));
}

TEST_CASE("in-place ops refuse a destination made by expand", "[ch01][inplace][errors]") {
  // 256 rows that are one row in memory: every write would hit the same 256 floats, from
  // several threads at once (65,536 elements take the parallel path). PyTorch refuses too.
  const Tensor row = ddp::zeros({1, 256});
  Tensor repeated = row.expand({256, 256});
  const Tensor ones = ddp::ones({256, 256});
  ddp::Generator gen(1);
  CHECK_THROWS_WITH(repeated.add_(ones), Contains("in-place add") && Contains("dimension 0") &&
                                             Contains("stride 0"));
  CHECK_THROWS_WITH(repeated.mul_(2.0f), Contains("stride 0"));
  CHECK_THROWS_WITH(repeated.copy_(ones), Contains("copy_") && Contains("(256, 256)"));
  CHECK_THROWS_WITH(repeated.fill_(1.0), Contains("fill_"));
  CHECK_THROWS_WITH(ddp::uniform_(repeated, 0.0f, 1.0f, gen), Contains("uniform_"));
  CHECK(row.to_vector<float>() == std::vector<float>(256, 0.0f));  // nothing was written
  // A size-1 dimension with stride 0 repeats nothing, and an expanded source is fine.
  Tensor single = ddp::zeros({1}).expand({1, 1});
  single.add_(ddp::ones({1, 1}));
  CHECK(single.item<float>() == 1.0f);
  Tensor dense = ddp::zeros({256, 256});
  dense.add_(ddp::ones({1, 256}).expand({256, 256}));
  CHECK(dense.to_vector<float>() == std::vector<float>(256 * 256, 1.0f));
}
