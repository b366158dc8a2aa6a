// Progress output (see progress.hpp).
#include "tools/ddp_train/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace ddp::train {

ProgressStyle progress_style(std::string_view mode) {
  if (mode == "bar") return ProgressStyle::Bar;
  if (mode == "lines") return ProgressStyle::Lines;
  if (mode == "none") return ProgressStyle::None;
  const bool under_mpi = std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr ||
                         std::getenv("PMIX_RANK") != nullptr || std::getenv("PMI_SIZE") != nullptr;
  return isatty(STDOUT_FILENO) == 1 && !under_mpi ? ProgressStyle::Bar : ProgressStyle::Lines;
}

Progress::Progress(std::int64_t epoch, std::int64_t epochs, std::int64_t steps, ProgressStyle style,
                   std::int64_t first_step, std::int64_t first_images)
    : epoch_(epoch),
      epochs_(epochs),
      steps_(steps),
      style_(style),
      first_step_(first_step),
      first_images_(first_images),
      report_every_(std::max<std::int64_t>(1, steps / 5)),
      // the first multiple of report_every_ after the steps already done
      next_plain_report_((first_step / report_every_ + 1) * report_every_) {}

void Progress::update(std::int64_t step, std::int64_t images, double running_loss) {
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate =
      seconds > 0 ? static_cast<double>(images - first_images_) / seconds : 0.0;
  const std::int64_t done_here = step - first_step_;
  const double eta = done_here > 0 ? seconds / static_cast<double>(done_here) *
                                         static_cast<double>(steps_ - step)
                                   : 0.0;
  if (style_ == ProgressStyle::Bar) {
    constexpr int kWidth = 30;
    const int filled = steps_ > 0 ? static_cast<int>(kWidth * step / steps_) : kWidth;
    std::printf("\repoch %lld/%lld [%.*s%*s] %lld/%lld  %.0f img/s  ETA %.0fs  loss %.4f ",
                static_cast<long long>(epoch_), static_cast<long long>(epochs_), filled,
                "##############################", kWidth - filled, "", static_cast<long long>(step),
                static_cast<long long>(steps_), rate, eta, running_loss);
    std::fflush(stdout);
  } else if (style_ == ProgressStyle::Lines && (step >= next_plain_report_ || step == steps_)) {
    std::printf("epoch %lld/%lld step %lld/%lld loss %.4f %.0f img/s\n",
                static_cast<long long>(epoch_), static_cast<long long>(epochs_),
                static_cast<long long>(step), static_cast<long long>(steps_), running_loss, rate);
    std::fflush(stdout);
    next_plain_report_ += report_every_;
  }
}

void Progress::finish() {
  if (style_ == ProgressStyle::Bar) std::printf("\r%*s\r", 100, "");
}

}  // namespace ddp::train
