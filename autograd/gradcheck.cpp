// gradcheck() (see gradcheck.hpp): analytic gradients from one backward pass, numeric
// ones from central differences, compared element by element. Chapter 03.
#include "autograd/gradcheck.hpp"

#include <cmath>
#include <sstream>

#include "autograd/grad_mode.hpp"
#include "tensor/ops.hpp"
#include "tensor/random.hpp"

namespace ddp {

// Note [Finite differences in float32]
// What is compared. f maps inputs to a tensor y; rather than the whole Jacobian we check
// the gradient of the scalar loss = sum(y * R) for a fixed random R ~ N(0, 1). One
// backward pass (grad_output = R) gives the analytic gradient of every input element;
// the numeric one is (loss(x + h e_k) - loss(x - h e_k)) / (2h) for each element k.
// A random R rather than all ones: many wrong gradients are invisible to sum(y). The
// outputs of batch norm always sum to N * bias, so d sum(y) / dx = 0 whatever the
// backward gets wrong about x; softmax rows always sum to 1, likewise.
//
// Why float32 needs care. The forward runs in float32: each output carries a rounding
// error of a few units of u = 6e-8 relative. A difference quotient divides those errors
// by 2h, so h must not be tiny; but its truncation error grows like h^2 * f''' / 6, and
// a large h steps over kinks (relu at 0, a change of maximum in a pooling window). Three
// things keep the noise down so that h = 1e-3 works for inputs of size ~1:
//   1. The projection sum(y * R) is accumulated in double on the host, so it adds no
//      rounding of its own, and outputs that the perturbed element does not reach are
//      computed bit-identically in both evaluations and cancel exactly. The noise is
//      then ~ u * |y| * sqrt(m) / h for the m outputs that do move: ~1e-4 * sqrt(m).
//   2. x +- h is rounded to float32 (x = 0.7 has ulp 6e-8: a 6e-5 relative error in the
//      step). We divide by the step actually taken, float(x + h) - float(x - h).
//   3. Tests keep inputs of size ~1 and away from kinks by more than h.
// The tolerance, |analytic - numeric| <= atol + rtol * |numeric| with atol = 1e-3 and
// rtol = 1e-2, sits above that noise (the op tests of tests/ch03 stay well below 1) and
// below the errors we look for: a gradient 5% off, or missing one term, fails on its
// worst element by a factor of a few at least. The planted-bug tests in
// tests/ch03/test_gradcheck.cpp check that this is so: a checker that cannot fail is no
// check.

namespace {

// sum_k y_k * r_k, in double, on the host.
double project(const Tensor& y, const std::vector<double>& r) {
  DDP_CHECK(y.dtype() == DType::Float32 && static_cast<std::size_t>(y.numel()) == r.size(),
            "gradcheck: f returned ", y.describe(), " on one call and ", r.size(),
            " elements on another");
  const std::vector<float> values = y.to_vector<float>();
  double acc = 0.0;
  for (std::size_t k = 0; k < values.size(); ++k) acc += static_cast<double>(values[k]) * r[k];
  return acc;
}

// Writes one element of a contiguous tensor, on whatever device it lives.
void set_element(const Tensor& flat, std::int64_t k, float value) {
  Tensor element = flat.narrow(0, k, 1);
  element.fill_(value);
}

}  // namespace

std::string GradcheckResult::summary() const {
  std::ostringstream os;
  os << "gradcheck " << (ok ? "passed" : "FAILED") << " (" << checked
     << " elements): worst is input " << input << " [flat index " << index
     << "]: analytic " << analytic << ", numeric " << numeric << ", error/allowed "
     << ratio;
  return os.str();
}

GradcheckResult gradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options) {
  DDP_CHECK(options.wrt.empty() || options.wrt.size() == inputs.size(), "gradcheck: wrt has ",
            options.wrt.size(), " entries for ", inputs.size(), " inputs");
  DDP_CHECK(options.eps > 0.0, "gradcheck: eps must be positive, got ", options.eps);
  std::vector<Variable> leaves;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    DDP_CHECK(inputs[i].dtype() == DType::Float32, "gradcheck: input ", i, " is ",
              inputs[i].describe(), "; only float32 inputs can be differentiated",
              "\nhint: capture int64 tensors (labels) in the function instead");
    const bool wrt = options.wrt.empty() || options.wrt[i];
    leaves.emplace_back(inputs[i].clone(), wrt);  // our own contiguous copy, perturbed below
  }

  // ---- Analytic: one forward with recording, one backward with grad_output = R -----
  const Variable y = f(leaves);
  DDP_CHECK(y.defined() && y.data().dtype() == DType::Float32,
            "gradcheck: f must return a float32 Variable");
  Generator gen(options.seed);
  const Tensor r = randn(y.shape(), gen, y.device());
  std::vector<double> r_host;
  for (float v : r.to_vector<float>()) r_host.push_back(v);
  if (y.requires_grad()) y.backward(r);  // otherwise no input reaches y: all gradients 0

  // ---- Numeric: central differences, element by element -----------------------------
  GradcheckResult result;
  NoGradGuard no_grad;
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    if (!leaves[i].requires_grad()) continue;
    const Tensor flat = leaves[i].data().view({-1});
    const std::vector<float> x = flat.to_vector<float>();
    const Tensor grad = leaves[i].grad();
    const std::vector<float> analytic =
        grad.defined() ? grad.to_vector<float>() : std::vector<float>(x.size(), 0.0f);
    for (std::size_t k = 0; k < x.size(); ++k) {
      const auto index = static_cast<std::int64_t>(k);
      const float up = static_cast<float>(x[k] + options.eps);
      const float down = static_cast<float>(x[k] - options.eps);
      set_element(flat, index, up);
      const double loss_up = project(f(leaves).data(), r_host);
      set_element(flat, index, down);
      const double loss_down = project(f(leaves).data(), r_host);
      set_element(flat, index, x[k]);
      // The step actually taken (Note [Finite differences in float32], point 2).
      const double numeric =
          (loss_up - loss_down) / (static_cast<double>(up) - static_cast<double>(down));
      const double error = std::abs(static_cast<double>(analytic[k]) - numeric);
      const double ratio = error / (options.atol + options.rtol * std::abs(numeric));
      ++result.checked;
      // A NaN (from a NaN gradient or loss) counts as the worst error of all.
      const bool worse = std::isnan(ratio) ? !std::isnan(result.ratio) : ratio > result.ratio;
      if (worse || result.checked == 1) {
        result.input = i;
        result.index = index;
        result.analytic = analytic[k];
        result.numeric = numeric;
        result.ratio = ratio;
      }
    }
  }
  result.ok = result.checked > 0 && result.ratio <= 1.0;
  return result;
}

}  // namespace ddp
