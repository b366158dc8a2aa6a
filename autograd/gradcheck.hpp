// gradcheck(): compares the gradients that backward() computes with central finite
// differences of the forward. Chapter 03; the tests of every differentiable op use it.
//
// It is a test tool: each checked element costs two forward passes, so it is meant for
// inputs of a few hundred elements. It checks first derivatives of float32 functions
// only; see Note [Finite differences in float32] (gradcheck.cpp) for its tolerances.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "autograd/variable.hpp"

namespace ddp {

// The function under test: Variables (leaves made from the inputs) -> one Variable.
// Anything that is not differentiated (labels, running statistics, hyper-parameters)
// is captured by the closure.
using GradcheckFn = std::function<Variable(const std::vector<Variable>&)>;

struct GradcheckOptions {
  double eps = 1e-3;   // the finite-difference step, before rounding to float32
  double atol = 1e-3;  // an element passes when |analytic - numeric| <= atol + rtol*|numeric|
  double rtol = 1e-2;
  std::uint64_t seed = 20240;  // for the projection tensor R
  // Which inputs to differentiate; empty means all of them.
  std::vector<bool> wrt;
};

struct GradcheckResult {
  bool ok = true;
  std::int64_t checked = 0;  // elements compared, over all inputs
  // The worst element: the largest |analytic - numeric| / (atol + rtol*|numeric|).
  // `ratio` above 1 is a failure.
  std::size_t input = 0;     // which input
  std::int64_t index = 0;    // its row-major (flat) index in that input
  double analytic = 0.0;
  double numeric = 0.0;
  double ratio = 0.0;
  // "gradcheck passed/FAILED: worst element input 1 [17]: analytic ..., numeric ...".
  std::string summary() const;
};

// Runs f once with graph recording to get the analytic gradient of
//     loss = sum(f(inputs) * R),   R ~ N(0, 1), fixed by options.seed,
// then perturbs every element of every checked input by +-eps to get the numeric one.
// `inputs` are float32 tensors on any one device; they are copied, never modified.
GradcheckResult gradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options = {});

}  // namespace ddp
