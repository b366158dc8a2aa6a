// nn::Optimizer: what every optimizer offers (torch.optim.Optimizer's core): step on the
// gradients, zero them, the learning rate a schedule sets, and the state a checkpoint
// keeps. SGD (chapter 04) and AdamW (chapter 09) implement it, so that chapter 09's
// ZeroRedundancyOptimizer can shard either one without knowing which.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "autograd/variable.hpp"
#include "nn/state_dict.hpp"

namespace ddp::nn {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;  // "sgd", "adamw": what --optimizer says
  // One update of every parameter that has a gradient, in place; no graph is recorded.
  virtual void step() = 0;
  // Sets every parameter's gradient back to undefined.
  virtual void zero_grad() = 0;
  virtual double lr() const = 0;
  virtual void set_lr(double lr) = 0;  // what a learning-rate schedule calls before a step
  virtual const std::vector<Variable>& parameters() const = 0;
  // The state for a checkpoint, named by each parameter's index; load_state_dict checks
  // it all first and replaces it all (or nothing). `source` names it in the messages.
  virtual StateDict state_dict() const = 0;
  virtual void load_state_dict(const StateDict& state, std::string_view source) = 0;
};

}  // namespace ddp::nn
