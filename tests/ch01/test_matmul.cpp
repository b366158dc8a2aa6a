// Chapter 01, ops.hpp matmul: 2-D and batched products against a triple loop in double,
// with inputs as they come in training: contiguous, transposed views (a.t(), used
// without a copy), arbitrary strided layouts, an expanded (stride-0) batch, and sizes
// 0 and 1. Errors name both shapes.
#include <catch2/catch.hpp>

#include <cmath>
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

namespace {

// How an operand is laid out in memory.
enum class Form { Contiguous, Transposed, Strided, Stepped };

const char* form_name(Form f) {
  switch (f) {
    case Form::Contiguous:
      return "contiguous";
    case Form::Transposed:
      return "transposed view";
    case Form::Strided:
      return "strided";
    case Form::Stepped:
      return "slice with step 2";
  }
  return "?";
}

// A tensor with the (row-major) values of `x`, of x's shape, in form `form`. The last
// two dimensions are the matrix ones.
Tensor lay_out(std::mt19937& rng, const ref::Array& x, Form form) {
  const std::size_t nd = x.shape.size();
  switch (form) {
    case Form::Contiguous:
      return ref::make_contiguous(x);
    case Form::Transposed: {
      // Store the transpose contiguously, then transpose back with a view.
      std::vector<std::int64_t> dims(nd);
      for (std::size_t d = 0; d < nd; ++d) dims[d] = static_cast<std::int64_t>(d);
      std::swap(dims[nd - 1], dims[nd - 2]);
      const Tensor stored = ref::make_contiguous(ref::permute(x, dims));
      return stored.transpose(-1, -2);
    }
    case Form::Strided: {
      const ref::Layout layout = ref::random_layout(rng, x.shape);
      return ref::make_tensor(x, layout.strides, layout.offset);
    }
    case Form::Stepped: {
      // Every other column of a twice-as-wide matrix: no unit stride in that dimension.
      Shape wide = x.shape;
      wide[nd - 1] = 2 * wide[nd - 1];
      ref::Array w{wide, std::vector<double>(static_cast<std::size_t>(ref::count(wide)), 0.0)};
      ref::for_each_index(x.shape, [&](const std::vector<std::int64_t>& index) {
        std::vector<std::int64_t> at = index;
        at[nd - 1] *= 2;
        w.v[static_cast<std::size_t>(ref::ravel(at, wide))] =
            x.v[static_cast<std::size_t>(ref::ravel(index, x.shape))];
      });
      const Tensor stored = ref::make_contiguous(w);
      return stored.slice(-1, 0, wide[nd - 1], 2);
    }
  }
  return {};
}

// |a| @ |b|: the scale that a float32 product's rounding error is proportional to.
std::vector<double> magnitude(const ref::Array& a, const ref::Array& b) {
  const auto abs = [](double v) { return std::fabs(v); };
  return ref::matmul(ref::map(a, abs), ref::map(b, abs)).v;
}

constexpr ref::Tol kMatmulTol{1e-4, 1e-6};

std::int64_t pick_size(std::mt19937& rng) {
  const int k = std::uniform_int_distribution<int>(0, 9)(rng);
  if (k == 0) return 0;
  if (k <= 2) return 1;
  return std::uniform_int_distribution<std::int64_t>(2, 33)(rng);
}

}  // namespace

TEST_CASE("2-D matmul matches the double loop for every layout of both operands",
          "[ch01][ops][matmul]") {
  std::mt19937 rng(601);
  const Form forms[] = {Form::Contiguous, Form::Transposed, Form::Strided, Form::Stepped};
  for (Form fa : forms) {
    for (Form fb : forms) {
      for (int trial = 0; trial < 5; ++trial) {
        const std::int64_t m = pick_size(rng), k = pick_size(rng), n = pick_size(rng);
        const ref::Array a = ref::random_array(rng, {m, k}, -1, 1);
        const ref::Array b = ref::random_array(rng, {k, n}, -1, 1);
        const Tensor ta = lay_out(rng, a, fa), tb = lay_out(rng, b, fb);
        INFO("(" << m << ", " << k << ") @ (" << k << ", " << n << "), a " << form_name(fa)
                 << ", b " << form_name(fb));
        const Tensor c = ddp::matmul(ta, tb);
        CHECK(c.shape() == Shape{m, n});
        CHECK(c.dtype() == DType::Float32);
        CHECK(c.is_contiguous());
        CHECK(ref::mismatch(c, ref::matmul(a, b), kMatmulTol, magnitude(a, b)) == "");
        CHECK(ref::mismatch(ta, a, ref::kExact) == "");  // inputs are only read
        CHECK(ref::mismatch(tb, b, ref::kExact) == "");
      }
    }
  }
}

TEST_CASE("a larger matmul, beyond one cache block, matches the double loop",
          "[ch01][ops][matmul]") {
  std::mt19937 rng(602);
  const ref::Array a = ref::random_array(rng, {67, 130}, -1, 1);
  const ref::Array b = ref::random_array(rng, {130, 95}, -1, 1);
  const Tensor c = ddp::matmul(ref::make_contiguous(a), lay_out(rng, b, Form::Transposed));
  CHECK(ref::mismatch(c, ref::matmul(a, b), kMatmulTol, magnitude(a, b)) == "");
}

TEST_CASE("matmul of small whole-number matrices is exact", "[ch01][ops][matmul]") {
  const Tensor a = ddp::from_data(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = ddp::from_data(std::vector<float>{7, 8, 9, 10, 11, 12}, {3, 2});
  CHECK(ddp::matmul(a, b).to_vector<float>() == std::vector<float>{58, 64, 139, 154});
  // a @ a.t() reads the same storage twice, in two layouts.
  CHECK(ddp::matmul(a, a.t()).to_vector<float>() == std::vector<float>{14, 32, 32, 77});
  CHECK(ddp::matmul(a.t(), a).to_vector<float>() ==
        std::vector<float>{17, 22, 27, 22, 29, 36, 27, 36, 45});
  // K = 0: the empty sum is 0.
  CHECK(ddp::matmul(ddp::ones({2, 0}), ddp::ones({0, 3})).to_vector<float>() ==
        std::vector<float>(6, 0.0f));
  // A batch of 0 against a shared operand is an empty batch, not one of 1.
  CHECK(ddp::matmul(ddp::ones({0, 2, 3}), ddp::ones({3, 4})).shape() == ddp::Shape{0, 2, 4});
  CHECK(ddp::matmul(ddp::ones({1, 2, 3}), ddp::ones({0, 3, 4})).shape() == ddp::Shape{0, 2, 4});
}

TEST_CASE("batched matmul matches the loop, with transposed, permuted and expanded operands",
          "[ch01][ops][matmul]") {
  std::mt19937 rng(603);
  const Form forms[] = {Form::Contiguous, Form::Transposed, Form::Strided, Form::Stepped};
  for (int trial = 0; trial < 24; ++trial) {
    const std::int64_t batch = pick_size(rng), m = pick_size(rng), k = pick_size(rng),
                       n = pick_size(rng);
    const Form fa = forms[trial % 4], fb = forms[(trial / 4) % 4];
    const ref::Array a = ref::random_array(rng, {batch, m, k}, -1, 1);
    const ref::Array b = ref::random_array(rng, {batch, k, n}, -1, 1);
    const Tensor ta = lay_out(rng, a, fa), tb = lay_out(rng, b, fb);
    INFO("(" << batch << ", " << m << ", " << k << ") @ (" << batch << ", " << k << ", " << n
             << "), a " << form_name(fa) << ", b " << form_name(fb));
    const Tensor c = ddp::matmul(ta, tb);
    CHECK(c.shape() == Shape{batch, m, n});
    CHECK(c.is_contiguous());
    CHECK(ref::mismatch(c, ref::matmul(a, b), kMatmulTol, magnitude(a, b)) == "");
  }

  // The batch dimension stored in the middle: (M, B, K) permuted to (B, M, K).
  const ref::Array mbk = ref::random_array(rng, {5, 3, 4}, -1, 1);
  const Tensor a_perm = ref::make_contiguous(mbk).permute({1, 0, 2});
  const ref::Array a = ref::permute(mbk, {1, 0, 2});
  const ref::Array b = ref::random_array(rng, {3, 4, 6}, -1, 1);
  CHECK(ref::mismatch(ddp::matmul(a_perm, ref::make_contiguous(b)), ref::matmul(a, b), kMatmulTol,
                      magnitude(a, b)) == "");

  // One matrix shared by the whole batch: an expanded view, batch stride 0.
  const ref::Array w = ref::random_array(rng, {4, 6}, -1, 1);
  const Tensor shared = ref::make_contiguous(w).unsqueeze(0).expand({3, 4, 6});
  REQUIRE(shared.stride(0) == 0);
  const ref::Array w3 = ref::broadcast_to(w, {3, 4, 6});
  CHECK(ref::mismatch(ddp::matmul(ref::make_contiguous(a), shared), ref::matmul(a, w3), kMatmulTol,
                      magnitude(a, w3)) == "");
}

TEST_CASE("matmul refuses shapes that do not multiply, naming both",
          "[ch01][ops][matmul][errors]") {
  REQUIRE_THROWS_AS(ddp::matmul(ddp::zeros({2, 3}), ddp::zeros({4, 5})), ddp::Error);
  REQUIRE_THROWS_WITH(ddp::matmul(ddp::zeros({2, 3}), ddp::zeros({4, 5})),
                      Contains("(2, 3)") && Contains("(4, 5)"));
  REQUIRE_THROWS_WITH(ddp::matmul(ddp::zeros({2, 3, 4}), ddp::zeros({3, 4, 5})),
                      Contains("(2, 3, 4)") && Contains("(3, 4, 5)"));
  CHECK_THROWS_AS(ddp::matmul(ddp::zeros({3}), ddp::zeros({3})), ddp::Error);
  const Tensor labels = ddp::zeros({2, 2}, {DType::Int64});
  REQUIRE_THROWS_WITH(ddp::matmul(labels, labels), Contains("int64"));
}
