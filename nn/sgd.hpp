// SGD: stochastic gradient descent with momentum, exactly in PyTorch's form. Chapter 04.
//
// For each parameter p with gradient g, one step() does (torch.optim.SGD):
//     g = g + weight_decay * p                       (L2 penalty, added to the gradient)
//     b = g                                          on the first step (no dampening)
//     b = momentum * b + (1 - dampening) * g         on later steps
//     g = g + momentum * b   if nesterov,  else  g = b      (only when momentum != 0)
//     p = p - lr * g
// This is NOT the textbook v = m v + lr g: the learning rate multiplies the buffer, so
// changing lr mid-run does not rescale the momentum already gathered. A parameter with
// no gradient (undefined) is skipped and its buffer left alone. No parameter groups.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "autograd/variable.hpp"
#include "nn/optimizer.hpp"
#include "nn/state_dict.hpp"

namespace ddp::nn {

struct SGDOptions {
  double lr = 0.01;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;  // needs momentum > 0 and dampening == 0 (as in PyTorch)
};

class SGD final : public Optimizer {
 public:
  SGD(std::vector<Variable> parameters, SGDOptions options);
  std::string name() const override { return "sgd"; }

  // One update of every parameter that has a gradient (the formulas above). The math is
  // done on the parameters' own devices, in place; no graph is recorded.
  void step() override;
  // Sets every parameter's gradient back to undefined.
  void zero_grad() override;

  double lr() const override { return options_.lr; }
  void set_lr(double lr) override;  // what a learning-rate schedule calls before each step
  const SGDOptions& options() const { return options_; }
  const std::vector<Variable>& parameters() const override { return parameters_; }

  // ---- State, for checkpoints ----------------------------------------------------------
  // momentum_buffers()[i] belongs to parameters()[i]; undefined until that parameter's
  // first step with momentum.
  const std::vector<Tensor>& momentum_buffers() const { return momentum_buffers_; }
  // The defined buffers as "momentum_buffer.<i>" (i = the parameter's index), sharing
  // storage with the optimizer; save them with save_state_dict.
  StateDict state_dict() const override;
  // Replaces the buffers with copies of `state`'s (moved to each parameter's device).
  // All or nothing: names, dtypes and shapes are checked first; `source` names where
  // `state` came from in the messages.
  void load_state_dict(const StateDict& state,
                       std::string_view source = "a state_dict") override;

 private:
  std::vector<Variable> parameters_;
  SGDOptions options_;
  std::vector<Tensor> momentum_buffers_;
};

}  // namespace ddp::nn
