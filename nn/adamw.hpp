// AdamW: Adam with decoupled weight decay, exactly in PyTorch's form. Chapter 09.
//
// For each parameter p with gradient g, one step() does (torch.optim.AdamW, amsgrad off):
//     t = t + 1                                      (a step count per parameter)
//     p = p * (1 - lr * weight_decay)                (decoupled: the decay never enters m, v)
//     m = beta1 * m + (1 - beta1) * g                (first moment, "exp_avg")
//     v = beta2 * v + (1 - beta2) * g * g            (second moment, "exp_avg_sq")
//     p = p - (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// The two divisions by (1 - beta^t) are the bias correction: m and v start at zero, so
// early on they underestimate the gradient's moments. Adam's state is two fp32 tensors
// per parameter: K = 8 bytes per parameter in the ZeRO paper's accounting (SGD with
// momentum: K = 4), which is what chapter 09 shards. A parameter with no gradient
// (undefined) is skipped: its moments and step count are left alone. No parameter groups,
// no amsgrad, no maximize.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "autograd/variable.hpp"
#include "nn/optimizer.hpp"
#include "nn/state_dict.hpp"

namespace ddp::nn {

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;  // PyTorch's default for AdamW (Adam's is 0)
};

class AdamW final : public Optimizer {
 public:
  AdamW(std::vector<Variable> parameters, AdamWOptions options);
  std::string name() const override { return "adamw"; }

  // One update of every parameter that has a gradient (the formulas above), in place on
  // the parameters' own devices; no graph is recorded. The gradient is left as it was.
  void step() override;
  // Sets every parameter's gradient back to undefined.
  void zero_grad() override;

  double lr() const override { return options_.lr; }
  void set_lr(double lr) override;  // what a learning-rate schedule calls before each step
  const AdamWOptions& options() const { return options_; }
  const std::vector<Variable>& parameters() const override { return parameters_; }

  // ---- State, for checkpoints and the memory accounting ---------------------------------
  // exp_avg()[i], exp_avg_sq()[i] and steps()[i] belong to parameters()[i]; the moments
  // are undefined and the count 0 until that parameter's first step.
  const std::vector<Tensor>& exp_avg() const { return exp_avg_; }
  const std::vector<Tensor>& exp_avg_sq() const { return exp_avg_sq_; }
  const std::vector<std::int64_t>& steps() const { return steps_; }
  // The defined state as "exp_avg.<i>", "exp_avg_sq.<i>" (sharing storage with the
  // optimizer) and "step.<i>" (a one-element int64 tensor), i = the parameter's index.
  StateDict state_dict() const override;
  // Replaces the state with copies of `state`'s (moved to each parameter's device). All
  // or nothing: names, dtypes and shapes are checked first, and a parameter's three
  // entries come together or not at all; `source` names where `state` came from.
  void load_state_dict(const StateDict& state,
                       std::string_view source = "a state_dict") override;

 private:
  std::vector<Variable> parameters_;
  AdamWOptions options_;
  std::vector<Tensor> exp_avg_;
  std::vector<Tensor> exp_avg_sq_;
  std::vector<std::int64_t> steps_;
};

}  // namespace ddp::nn
