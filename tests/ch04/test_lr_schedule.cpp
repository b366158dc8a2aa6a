// Chapter 04, learning-rate schedules against their closed forms: step decay (StepLR),
// cosine annealing (CosineAnnealingLR, held at the bottom after t_max), linear warm-up
// (LinearLR) and warm-up followed by cosine (SequentialLR of the two).
#include <catch2/catch.hpp>

#include <cmath>
#include <numbers>

#include "nn/lr_schedule.hpp"

using Catch::Contains;
namespace nn = ddp::nn;

TEST_CASE("step_decay multiplies by gamma every step_size steps", "[nn][lr]") {
  const nn::LrSchedule lr = nn::step_decay(0.1, 30, 0.1);
  CHECK(lr(0) == Approx(0.1));
  CHECK(lr(29) == Approx(0.1));
  CHECK(lr(30) == Approx(0.01));
  CHECK(lr(59) == Approx(0.01));
  CHECK(lr(60) == Approx(0.001));
  for (std::int64_t t = 0; t < 200; t += 7) {
    CHECK(lr(t) == Approx(0.1 * std::pow(0.1, static_cast<double>(t / 30))));
  }
  CHECK(nn::constant_lr(0.3)(12345) == 0.3);
}

TEST_CASE("cosine_annealing: half a cosine from base_lr down to min_lr", "[nn][lr]") {
  const double base = 0.2, low = 0.002;
  const std::int64_t t_max = 100;
  const nn::LrSchedule lr = nn::cosine_annealing(base, t_max, low);
  CHECK(lr(0) == Approx(base));
  CHECK(lr(50) == Approx((base + low) / 2));
  CHECK(lr(100) == Approx(low));
  CHECK(lr(250) == Approx(low));  // held at the bottom
  for (std::int64_t t = 0; t <= t_max; ++t) {
    const double closed =
        low + (base - low) * (1 + std::cos(std::numbers::pi * static_cast<double>(t) / 100.0)) / 2;
    CHECK(lr(t) == Approx(closed));
    if (t > 0) CHECK(lr(t) <= lr(t - 1));
  }
}

TEST_CASE("linear_warmup then cosine: a ramp, then the cosine from its own start",
          "[nn][lr]") {
  const double base = 0.4;
  const nn::LrSchedule lr = nn::linear_warmup(10, 0.1, nn::cosine_annealing(base, 90));
  CHECK(lr(0) == Approx(0.04));          // start_factor * base
  CHECK(lr(5) == Approx(0.04 + 0.36 / 2));
  for (std::int64_t t = 0; t < 10; ++t) {
    CHECK(lr(t) == Approx(base * (0.1 + 0.9 * static_cast<double>(t) / 10.0)));
  }
  CHECK(lr(10) == Approx(base));         // the cosine's t = 0
  CHECK(lr(55) == Approx(base / 2));     // the cosine's t = 45 = t_max / 2
  CHECK(lr(100) == Approx(0.0).margin(1e-12));
  // Warm-up in front of a step decay works the same way.
  const nn::LrSchedule stepped = nn::linear_warmup(5, 0.0, nn::step_decay(1.0, 10, 0.5));
  CHECK(stepped(0) == 0.0);
  CHECK(stepped(15) == Approx(0.5));
}

TEST_CASE("schedules reject bad arguments and negative steps", "[nn][lr]") {
  CHECK_THROWS_WITH(nn::step_decay(0.1, 0, 0.1), Contains("step_size > 0"));
  CHECK_THROWS_WITH(nn::cosine_annealing(0.1, 10, 0.5), Contains("base_lr >= min_lr"));
  CHECK_THROWS_WITH(nn::linear_warmup(10, 1.5, nn::constant_lr(0.1)), Contains("start_factor"));
  CHECK_THROWS_WITH(nn::cosine_annealing(0.1, 10)(-1), Contains("negative"));
}
