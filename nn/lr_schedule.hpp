// Learning-rate schedules: the learning rate as a pure function of the step. Chapter 04.
//
// A schedule is a function t -> lr, where t counts steps (or epochs: the caller decides
// which, and calls sgd.set_lr(schedule(t)) before each one). Being pure functions they
// can be tested against their closed forms, restarted from a checkpoint by knowing t
// alone, and composed: linear_warmup(500, 0.1, cosine_annealing(0.1, 9500)) warms up
// for 500 steps and then anneals, PyTorch's SequentialLR([LinearLR, CosineAnnealingLR]).
// PyTorch's schedulers are stateful objects; the values here are their closed forms.
#pragma once

#include <cstdint>
#include <functional>

namespace ddp::nn {

using LrSchedule = std::function<double(std::int64_t t)>;

// lr(t) = lr.
LrSchedule constant_lr(double lr);

// lr(t) = base_lr * gamma^floor(t / step_size)   (PyTorch StepLR).
LrSchedule step_decay(double base_lr, std::int64_t step_size, double gamma);

// lr(t) = min_lr + (base_lr - min_lr) * (1 + cos(pi * t / t_max)) / 2 for t <= t_max, and
// min_lr after (PyTorch's CosineAnnealingLR formula would climb back up; a run that
// goes on past t_max wants to stay at the bottom).
LrSchedule cosine_annealing(double base_lr, std::int64_t t_max, double min_lr = 0.0);

// For t < warmup_steps: after(0) * (start_factor + (1 - start_factor) * t / warmup_steps),
// a straight line from start_factor * after(0) up to after(0) (PyTorch LinearLR);
// from then on after(t - warmup_steps), so `after` starts at its own t = 0.
LrSchedule linear_warmup(std::int64_t warmup_steps, double start_factor, LrSchedule after);

}  // namespace ddp::nn
