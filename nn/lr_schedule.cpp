// Learning-rate schedules (see lr_schedule.hpp).
#include "nn/lr_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <utility>

#include "base/error.hpp"

namespace ddp::nn {

namespace {

void check_step(std::int64_t t, const char* schedule) {
  DDP_CHECK(t >= 0, schedule, ": step ", t, " is negative");
}

}  // namespace

LrSchedule constant_lr(double lr) {
  DDP_CHECK(lr >= 0.0, "constant_lr: invalid learning rate ", lr);
  return [lr](std::int64_t t) {
    check_step(t, "constant_lr");
    return lr;
  };
}

LrSchedule step_decay(double base_lr, std::int64_t step_size, double gamma) {
  DDP_CHECK(base_lr >= 0.0 && step_size > 0 && gamma > 0.0, "step_decay(base_lr ", base_lr,
            ", step_size ", step_size, ", gamma ", gamma,
            "): needs base_lr >= 0, step_size > 0, gamma > 0");
  return [=](std::int64_t t) {
    check_step(t, "step_decay");
    return base_lr * std::pow(gamma, static_cast<double>(t / step_size));
  };
}

LrSchedule cosine_annealing(double base_lr, std::int64_t t_max, double min_lr) {
  DDP_CHECK(base_lr >= min_lr && min_lr >= 0.0 && t_max > 0, "cosine_annealing(base_lr ",
            base_lr, ", t_max ", t_max, ", min_lr ", min_lr,
            "): needs base_lr >= min_lr >= 0 and t_max > 0");
  return [=](std::int64_t t) {
    check_step(t, "cosine_annealing");
    const double progress = static_cast<double>(std::min(t, t_max)) / static_cast<double>(t_max);
    return min_lr + (base_lr - min_lr) * (1.0 + std::cos(std::numbers::pi * progress)) / 2.0;
  };
}

LrSchedule linear_warmup(std::int64_t warmup_steps, double start_factor, LrSchedule after) {
  DDP_CHECK(warmup_steps > 0 && start_factor >= 0.0 && start_factor <= 1.0,
            "linear_warmup(warmup_steps ", warmup_steps, ", start_factor ", start_factor,
            "): needs warmup_steps > 0 and 0 <= start_factor <= 1");
  DDP_CHECK(after != nullptr, "linear_warmup: the schedule to follow is empty");
  return [warmup_steps, start_factor, next = std::move(after)](std::int64_t t) {
    check_step(t, "linear_warmup");
    if (t >= warmup_steps) return next(t - warmup_steps);
    const double fraction = static_cast<double>(t) / static_cast<double>(warmup_steps);
    return next(0) * (start_factor + (1.0 - start_factor) * fraction);
  };
}

}  // namespace ddp::nn
