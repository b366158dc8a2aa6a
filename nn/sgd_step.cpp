// SGD::step, the update of every parameter (see sgd.hpp for the formulas). This file holds
// exactly the function of exercise 04.1: the exercise build links the participant's copy
// in its place (tutorial/EXERCISES.md, Note [How an exercise replaces the reference]).
#include "autograd/grad_mode.hpp"
#include "nn/sgd.hpp"
#include "tensor/memory.hpp"

namespace ddp::nn {

void SGD::step() {
  NoGradGuard no_grad;
  const SGDOptions& o = options_;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    Tensor& p = parameters_[i].data();
    const Tensor& grad = parameters_[i].grad();
    if (!grad.defined()) continue;
    // d = g + wd * p, in a fresh tensor: the gradient itself is left as backward made it
    // (DDP and gradient clipping read it).
    Tensor d = grad.clone();
    if (o.weight_decay != 0.0) d.add_(p, static_cast<float>(o.weight_decay));
    if (o.momentum != 0.0) {
      Tensor& b = momentum_buffers_[i];
      if (!b.defined()) {
        const memory::Scope state(memory::Category::OptimizerState);  // chapter 09's accounting
        b = d.clone();
      } else {
        b.mul_(static_cast<float>(o.momentum)).add_(d, static_cast<float>(1.0 - o.dampening));
      }
      if (o.nesterov) {
        d.add_(b, static_cast<float>(o.momentum));
      } else {
        d = b;
      }
    }
    p.add_(d, static_cast<float>(-o.lr));
  }
}

}  // namespace ddp::nn
