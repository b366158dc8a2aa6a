// Chapter 02: every elementwise op of tensor/ops.hpp on the GPU against its CPU twin,
// for contiguous, transposed, strided, broadcast, size-0, size-1 and 0-d inputs, in
// float32 and (where defined) int64, out of place and in place.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/ops.hpp"
#include "tensor/random.hpp"
#include "tests/ch02/gpu_compare.hpp"

using namespace ddp;
using ddp::test::kElementwiseTol;
using ddp::test::kGpu;
using ddp::test::Layout;
using ddp::test::mismatch;

namespace {

// Views of a (4, 6, 5) base tensor, from the plain to the awkward.
std::vector<Layout> layouts() {
  return {
      {"contiguous", [](const Tensor& t) { return t; }},
      {"transposed", [](const Tensor& t) { return t.transpose(0, 2); }},
      {"permuted", [](const Tensor& t) { return t.transpose(0, 1).transpose(1, 2); }},
      {"stepped slice", [](const Tensor& t) { return t.slice(1, 1, 6, 2).slice(2, 0, 5, 3); }},
      {"narrowed", [](const Tensor& t) { return t.narrow(0, 1, 2).narrow(2, 1, 3); }},
      {"selected (2-D)", [](const Tensor& t) { return t.select(1, 3); }},
      {"size-1 dims", [](const Tensor& t) { return t.narrow(0, 2, 1).narrow(2, 4, 1); }},
      {"size 0", [](const Tensor& t) { return t.narrow(1, 2, 0); }},
      {"0-d", [](const Tensor& t) { return t.select(0, 1).select(0, 2).select(0, 3); }},
      {"one element",
       [](const Tensor& t) { return t.narrow(0, 3, 1).narrow(1, 5, 1).narrow(2, 0, 1); }},
  };
}

// Inputs on both devices: the same values, the GPU's copied from the CPU's.
struct Pair {
  Tensor cpu, gpu;
};

Pair make_pair(const Tensor& cpu_base, const Layout& layout) {
  return {layout.make(cpu_base), layout.make(cpu_base.to(kGpu))};
}

}  // namespace

TEST_CASE("unary ops on the GPU match the CPU for every layout", "[ch02][cuda][elementwise]") {
  Generator gen(1);
  // Positive inputs for log, sqrt and rsqrt; both signs for the rest.
  const Tensor positive = uniform({4, 6, 5}, 0.05f, 3.0f, gen);
  const Tensor any_sign = randn({4, 6, 5}, gen).mul_(2.0f);
  const std::vector<UnaryOp> ops = {UnaryOp::Neg,     UnaryOp::Exp,   UnaryOp::Log,  UnaryOp::Sqrt,
                                    UnaryOp::Rsqrt,   UnaryOp::Abs,   UnaryOp::Relu, UnaryOp::Tanh,
                                    UnaryOp::Sigmoid, UnaryOp::Square};
  for (UnaryOp op : ops) {
    const bool needs_positive = op == UnaryOp::Log || op == UnaryOp::Sqrt || op == UnaryOp::Rsqrt;
    for (const Layout& layout : layouts()) {
      CAPTURE(op_name(op), layout.name);
      const Pair x = make_pair(needs_positive ? positive : any_sign, layout);
      const Tensor got = unary(op, x.gpu);
      CHECK(got.device() == kGpu);
      CHECK(mismatch(got, unary(op, x.cpu), kElementwiseTol) == "");
    }
  }
  // The named functions are the same ops.
  const Pair x = make_pair(positive, layouts()[1]);
  CHECK(mismatch(neg(x.gpu), neg(x.cpu), kElementwiseTol) == "");
  CHECK(mismatch(exp(x.gpu), exp(x.cpu), kElementwiseTol) == "");
  CHECK(mismatch(log(x.gpu), log(x.cpu), kElementwiseTol) == "");
  CHECK(mismatch(sqrt(x.gpu), sqrt(x.cpu), kElementwiseTol) == "");
  CHECK(mismatch(rsqrt(x.gpu), rsqrt(x.cpu), kElementwiseTol) == "");
  CHECK(mismatch(abs(x.gpu), abs(x.cpu), kElementwiseTol) == "");
  CHECK(mismatch(relu(x.gpu), relu(x.cpu), kElementwiseTol) == "");
  CHECK(mismatch(tanh(x.gpu), tanh(x.cpu), kElementwiseTol) == "");
  CHECK(mismatch(sigmoid(x.gpu), sigmoid(x.cpu), kElementwiseTol) == "");
  CHECK(mismatch(square(x.gpu), square(x.cpu), kElementwiseTol) == "");
  CHECK(mismatch(-x.gpu, -x.cpu, kElementwiseTol) == "");
}

TEST_CASE("unary ops on a long contiguous tensor use every block of the grid",
          "[ch02][cuda][elementwise]") {
  // More elements than kMaxBlocks * kThreadsPerBlock (4096 * 256): threads loop.
  Generator gen(2);
  const Tensor x = randn({1 << 21}, gen);
  CHECK(mismatch(sigmoid(x.to(kGpu)), sigmoid(x), kElementwiseTol) == "");
  const Tensor x_gpu = x.to(kGpu);
  CHECK(mismatch(tanh(x_gpu.slice(0, 3, 1 << 21, 2)), tanh(x.slice(0, 3, 1 << 21, 2)),
                 kElementwiseTol) == "");
}

namespace {

const std::vector<BinaryOp> kFloatOps = {
    BinaryOp::Add,     BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Maximum,
    BinaryOp::Minimum, BinaryOp::Pow, BinaryOp::Eq,  BinaryOp::Ne,  BinaryOp::Lt,
    BinaryOp::Le,      BinaryOp::Gt,  BinaryOp::Ge};

// Inputs with some exact ties, so that eq/le/ge see both answers.
Tensor with_ties(const Tensor& x) {
  return div(mul(x, 4.0).to(DType::Int64).to(DType::Float32), 4.0);
}

}  // namespace

TEST_CASE("binary ops on the GPU match the CPU, with broadcasting", "[ch02][cuda][elementwise]") {
  Generator gen(3);
  struct Shapes {
    Shape a, b;
  };
  const std::vector<Shapes> cases = {
      {{4, 5}, {4, 5}},           // same shape
      {{4, 1, 5}, {3, 1}},        // both sides broadcast: (4, 3, 5)
      {{2, 3}, {}},               // 0-d right-hand side
      {{}, {3, 2}},               // 0-d left-hand side
      {{6}, {5, 1}},              // outer product shape
      {{0, 3}, {3}},              // size 0
      {{1, 1}, {1}},              // size 1
      {{2, 3, 4, 5}, {3, 1, 5}},  // 4-D
  };
  for (const Shapes& s : cases) {
    // a in (0.5, 2] keeps pow real; b spans both signs.
    const Tensor a = with_ties(uniform(s.a, 0.5f, 2.0f, gen));
    const Tensor b = with_ties(uniform(s.b, -2.0f, 2.0f, gen));
    for (BinaryOp op : kFloatOps) {
      CAPTURE(op_name(op), shape_str(s.a), shape_str(s.b));
      const Tensor got = binary(op, a.to(kGpu), b.to(kGpu));
      CHECK(got.device() == kGpu);
      CHECK(mismatch(got, binary(op, a, b), kElementwiseTol) == "");
    }
  }
}

TEST_CASE("binary ops on the GPU read transposed and expanded views", "[ch02][cuda][elementwise]") {
  Generator gen(4);
  const Tensor base_a = uniform({5, 7}, 0.5f, 2.0f, gen);
  const Tensor base_b = uniform({7, 5}, -1.0f, 1.0f, gen);
  const Tensor row = uniform({1, 7}, -1.0f, 1.0f, gen);
  for (BinaryOp op : kFloatOps) {
    CAPTURE(op_name(op));
    // a transposed (strides (1, 7)) with b contiguous; then a stride-0 expanded row.
    const Tensor a_cpu = base_a.t(), a_gpu = base_a.to(kGpu).t();
    CHECK(mismatch(binary(op, a_gpu, base_b.to(kGpu)), binary(op, a_cpu, base_b),
                   kElementwiseTol) == "");
    const Tensor e_cpu = row.expand({5, 7}), e_gpu = row.to(kGpu).expand({5, 7});
    CHECK(mismatch(binary(op, e_gpu, base_a.to(kGpu)), binary(op, e_cpu, base_a),
                   kElementwiseTol) == "");
    // A stepped slice on both sides.
    const Tensor s_cpu = base_b.slice(0, 0, 7, 2), s_gpu = base_b.to(kGpu).slice(0, 0, 7, 2);
    CHECK(mismatch(binary(op, s_gpu, s_gpu), binary(op, s_cpu, s_cpu), kElementwiseTol) == "");
  }
  // The operators are the same ops.
  const Tensor a = base_a.to(kGpu), b = base_b.to(kGpu).t();
  const Tensor bc = base_b.t();
  CHECK(mismatch(a + b, base_a + bc, kElementwiseTol) == "");
  CHECK(mismatch(a - b, base_a - bc, kElementwiseTol) == "");
  CHECK(mismatch(a * b, base_a * bc, kElementwiseTol) == "");
  CHECK(mismatch(a / b, base_a / bc, kElementwiseTol) == "");
  CHECK(mismatch(add(a, b), add(base_a, bc), kElementwiseTol) == "");
  CHECK(mismatch(sub(a, b), sub(base_a, bc), kElementwiseTol) == "");
  CHECK(mismatch(mul(a, b), mul(base_a, bc), kElementwiseTol) == "");
  CHECK(mismatch(div(a, b), div(base_a, bc), kElementwiseTol) == "");
  CHECK(mismatch(maximum(a, b), maximum(base_a, bc), kElementwiseTol) == "");
  CHECK(mismatch(minimum(a, b), minimum(base_a, bc), kElementwiseTol) == "");
  CHECK(mismatch(pow(a, b), pow(base_a, bc), kElementwiseTol) == "");
  CHECK(mismatch(eq(a, b), eq(base_a, bc), kElementwiseTol) == "");
  CHECK(mismatch(ne(a, b), ne(base_a, bc), kElementwiseTol) == "");
  CHECK(mismatch(lt(a, b), lt(base_a, bc), kElementwiseTol) == "");
  CHECK(mismatch(le(a, b), le(base_a, bc), kElementwiseTol) == "");
  CHECK(mismatch(gt(a, b), gt(base_a, bc), kElementwiseTol) == "");
  CHECK(mismatch(ge(a, b), ge(base_a, bc), kElementwiseTol) == "");
}

TEST_CASE("int64 binary ops on the GPU match the CPU", "[ch02][cuda][elementwise]") {
  std::vector<std::int64_t> va, vb;
  for (std::int64_t i = 0; i < 24; ++i) {
    va.push_back((i * 7) % 11 - 5);
    vb.push_back((i * 5) % 9 - 4);
  }
  const Tensor a = from_data(std::span<const std::int64_t>(va), {4, 6});
  const Tensor b = from_data(std::span<const std::int64_t>(vb), {4, 6}).narrow(0, 1, 1);
  for (BinaryOp op : kFloatOps) {
    if (!supports_int64(op)) {
      CHECK_THROWS_AS(binary(op, a.to(kGpu), b.to(kGpu)), Error);
      continue;
    }
    CAPTURE(op_name(op));
    const Tensor got = binary(op, a.to(kGpu), b.to(kGpu));
    CHECK(got.dtype() == (is_comparison(op) ? DType::Float32 : DType::Int64));
    CHECK(mismatch(got, binary(op, a, b), 0.0) == "");
    CHECK(mismatch(binary(op, a.to(kGpu).t(), 3.0), binary(op, a.t(), 3.0), 0.0) == "");
  }
}

TEST_CASE("binary ops with a scalar on the GPU match the CPU", "[ch02][cuda][elementwise]") {
  Generator gen(5);
  const Tensor base = uniform({3, 8}, 0.25f, 3.0f, gen);
  for (const Layout& layout :
       {Layout{"contiguous", [](const Tensor& t) { return t; }},
        Layout{"transposed", [](const Tensor& t) { return t.t(); }},
        Layout{"0-d", [](const Tensor& t) { return t.select(0, 1).select(0, 4); }},
        Layout{"size 0", [](const Tensor& t) { return t.narrow(0, 0, 0); }}}) {
    const Tensor c = layout.make(base), g = layout.make(base.to(kGpu));
    for (BinaryOp op : kFloatOps) {
      for (double s : {-1.5, 0.0, 1.0, 2.5}) {
        CAPTURE(layout.name, op_name(op), s);
        CHECK(mismatch(binary(op, g, s), binary(op, c, s), kElementwiseTol) == "");
      }
    }
    CHECK(mismatch(add(g, 1.5), add(c, 1.5), kElementwiseTol) == "");
    CHECK(mismatch(sub(g, 1.5), sub(c, 1.5), kElementwiseTol) == "");
    CHECK(mismatch(mul(g, 1.5), mul(c, 1.5), kElementwiseTol) == "");
    CHECK(mismatch(div(g, 1.5), div(c, 1.5), kElementwiseTol) == "");
    CHECK(mismatch(pow(g, 1.5), pow(c, 1.5), kElementwiseTol) == "");
    CHECK(mismatch(maximum(g, 1.5), maximum(c, 1.5), kElementwiseTol) == "");
    CHECK(mismatch(minimum(g, 1.5), minimum(c, 1.5), kElementwiseTol) == "");
    CHECK(mismatch(g + 2.0, c + 2.0, kElementwiseTol) == "");
    CHECK(mismatch(g - 2.0, c - 2.0, kElementwiseTol) == "");
    CHECK(mismatch(g * 2.0, c * 2.0, kElementwiseTol) == "");
    CHECK(mismatch(g / 2.0, c / 2.0, kElementwiseTol) == "");
    CHECK(mismatch(2.0 + g, 2.0 + c, kElementwiseTol) == "");
    CHECK(mismatch(2.0 - g, 2.0 - c, kElementwiseTol) == "");
    CHECK(mismatch(2.0 * g, 2.0 * c, kElementwiseTol) == "");
  }
}

TEST_CASE("in-place ops on the GPU match the CPU, also on views", "[ch02][cuda][elementwise]") {
  Generator gen(6);
  const Tensor base = uniform({6, 4}, 0.5f, 2.0f, gen);
  const Tensor other = uniform({4}, -1.0f, 1.0f, gen);
  for (const Layout& layout :
       {Layout{"contiguous", [](const Tensor& t) { return t; }},
        Layout{"stepped rows", [](const Tensor& t) { return t.slice(0, 1, 6, 2); }}}) {
    CAPTURE(layout.name);
    // Each side works on its own clone, then on a view of it (the update goes through).
    Tensor c_owner = base.clone(), g_owner = base.to(kGpu);
    Tensor c = layout.make(c_owner), g = layout.make(g_owner);
    const Tensor oc = other, og = other.to(kGpu);
    c.add_(oc);
    g.add_(og);
    c.add_(oc, 0.5f);
    g.add_(og, 0.5f);
    c.sub_(oc);
    g.sub_(og);
    c.mul_(oc);
    g.mul_(og);
    c.div_(add(oc, 3.0));
    g.div_(add(og, 3.0));
    c.add_(0.25f);
    g.add_(0.25f);
    c.mul_(-2.0f);
    g.mul_(-2.0f);
    binary_(BinaryOp::Maximum, c, -1.0);
    binary_(BinaryOp::Maximum, g, -1.0);
    binary_(BinaryOp::Minimum, c, oc);
    binary_(BinaryOp::Minimum, g, og);
    CHECK(mismatch(g, c, kElementwiseTol) == "");
    CHECK(mismatch(g_owner, c_owner, kElementwiseTol) == "");  // untouched rows untouched
  }
  // In place with the right-hand side overlapping the target differently (a.t()).
  Tensor sq_c = base.narrow(0, 0, 4).clone(), sq_g = sq_c.to(kGpu);
  sq_c.add_(sq_c.t());
  sq_g.add_(sq_g.t());
  CHECK(mismatch(sq_g, sq_c, kElementwiseTol) == "");
}
