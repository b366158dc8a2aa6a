// Elementwise ops on Variables, forward and backward side by side. Chapter 03.
//
// Broadcasting in the forward pass means one input element fed many output elements,
// so its gradient is the SUM of theirs: every backward here ends with sum_to(g, shape).
#include "autograd/function.hpp"
#include "autograd/functions.hpp"
#include "autograd/fused_cpu.hpp"
#include "tensor/ops.hpp"

namespace ddp {

namespace {

// ---- a + b, a - b ---------------------------------------------------------------------
struct AddBackward final : Node {
  Shape a_shape, b_shape;
  double b_sign = 1.0;  // -1 for subtraction
  std::vector<Tensor> backward(const Tensor& g) override {
    Tensor ga, gb;
    if (needs_input_grad(0)) ga = sum_to(g, a_shape);
    if (needs_input_grad(1)) gb = b_sign > 0 ? sum_to(g, b_shape) : ddp::neg(sum_to(g, b_shape));
    return {ga, gb};
  }
  const char* name() const override { return b_sign > 0 ? "AddBackward" : "SubBackward"; }
};

Variable add_or_sub(const Variable& a, const Variable& b, double b_sign) {
  Tensor out = b_sign > 0 ? ddp::add(a.data(), b.data()) : ddp::sub(a.data(), b.data());
  return make_result(std::move(out), {a, b}, [&] {
    auto node = std::make_shared<AddBackward>();
    node->a_shape = a.shape();
    node->b_shape = b.shape();
    node->b_sign = b_sign;
    return node;
  });
}

// ---- a * b: d/da = g * b, d/db = g * a -------------------------------------------------
struct MulBackward final : Node {
  Tensor a, b;
  std::vector<Tensor> backward(const Tensor& g) override {
    Tensor ga, gb;
    if (needs_input_grad(0)) ga = sum_to(ddp::mul(g, b), a.shape());
    if (needs_input_grad(1)) gb = sum_to(ddp::mul(g, a), b.shape());
    return {ga, gb};
  }
  const char* name() const override { return "MulBackward"; }
  void release_saved() override { a = b = Tensor(); }
};

// ---- a / b: d/da = g / b, d/db = -g * a / b^2 ------------------------------------------
struct DivBackward final : Node {
  Tensor a, b;
  std::vector<Tensor> backward(const Tensor& g) override {
    Tensor ga, gb;
    if (needs_input_grad(0)) ga = sum_to(ddp::div(g, b), a.shape());
    if (needs_input_grad(1))
      gb = sum_to(ddp::neg(ddp::div(ddp::mul(g, a), ddp::square(b))), b.shape());
    return {ga, gb};
  }
  const char* name() const override { return "DivBackward"; }
  void release_saved() override { a = b = Tensor(); }
};

// ---- x * s, x + s ---------------------------------------------------------------------
struct ScaleBackward final : Node {
  double scale = 1.0;
  std::vector<Tensor> backward(const Tensor& g) override {
    return {scale == 1.0 ? g : ddp::mul(g, scale)};
  }
  const char* name() const override { return "ScaleBackward"; }
};

// ---- relu: the gradient passes where the output is positive ----------------------------
struct ReluBackward final : Node {
  Tensor out;
  std::vector<Tensor> backward(const Tensor& g) override {
    return {ddp::mul(g, ddp::binary(BinaryOp::Gt, out, 0.0))};
  }
  const char* name() const override { return "ReluBackward"; }
  void release_saved() override { out = Tensor(); }
};

// ---- exp: d/dx = g * exp(x) = g * out; log: d/dx = g / x -------------------------------
struct ExpBackward final : Node {
  Tensor out;
  std::vector<Tensor> backward(const Tensor& g) override { return {ddp::mul(g, out)}; }
  const char* name() const override { return "ExpBackward"; }
  void release_saved() override { out = Tensor(); }
};

struct LogBackward final : Node {
  Tensor x;
  std::vector<Tensor> backward(const Tensor& g) override { return {ddp::div(g, x)}; }
  const char* name() const override { return "LogBackward"; }
  void release_saved() override { x = Tensor(); }
};

}  // namespace

Variable add(const Variable& a, const Variable& b) { return add_or_sub(a, b, 1.0); }
Variable sub(const Variable& a, const Variable& b) { return add_or_sub(a, b, -1.0); }

Variable mul(const Variable& a, const Variable& b) {
  return make_result(ddp::mul(a.data(), b.data()), {a, b}, [&] {
    auto node = std::make_shared<MulBackward>();
    node->a = a.data();
    node->b = b.data();
    return node;
  });
}

Variable div(const Variable& a, const Variable& b) {
  return make_result(ddp::div(a.data(), b.data()), {a, b}, [&] {
    auto node = std::make_shared<DivBackward>();
    node->a = a.data();
    node->b = b.data();
    return node;
  });
}

Variable mul(const Variable& a, double scalar) {
  return make_result(ddp::mul(a.data(), scalar), {a}, [&] {
    auto node = std::make_shared<ScaleBackward>();
    node->scale = scalar;
    return node;
  });
}

Variable add(const Variable& a, double scalar) {
  return make_result(ddp::add(a.data(), scalar), {a},
                     [] { return std::make_shared<ScaleBackward>(); });
}

Variable neg(const Variable& x) { return mul(x, -1.0); }

Variable relu_composed(const Variable& x) {
  Tensor out = ddp::relu(x.data());
  return make_result(out, {x}, [&] {
    auto node = std::make_shared<ReluBackward>();
    node->out = out;
    return node;
  });
}

// Note [Fused CPU paths] (conv.cpp) explains the choice.
Variable relu(const Variable& x) {
  return fused_cpu_applies(x.data()) ? relu_cpu(x) : relu_composed(x);
}

Variable exp(const Variable& x) {
  Tensor out = ddp::exp(x.data());
  return make_result(out, {x}, [&] {
    auto node = std::make_shared<ExpBackward>();
    node->out = out;
    return node;
  });
}

Variable log(const Variable& x) {
  return make_result(ddp::log(x.data()), {x}, [&] {
    auto node = std::make_shared<LogBackward>();
    node->x = x.data();
    return node;
  });
}

Variable operator+(const Variable& a, const Variable& b) { return add(a, b); }
Variable operator-(const Variable& a, const Variable& b) { return sub(a, b); }
Variable operator*(const Variable& a, const Variable& b) { return mul(a, b); }
Variable operator*(const Variable& a, double scalar) { return mul(a, scalar); }

}  // namespace ddp
