// Progress output of ddp-train. Chapter 04.
//
// On a terminal: one line redrawn in place (a bar, images/s, ETA, running loss). When
// stdout is a file or a pipe -- a SLURM log -- carriage returns would pile up, so it
// prints a plain line every ~20% of the epoch instead.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace ddp::train {

class Progress {
 public:
  // A run resumed in the middle of an epoch starts at `first_step` (steps done before),
  // with `first_images` of the epoch seen: rate and ETA count only what this run does.
  Progress(std::int64_t epoch, std::int64_t epochs, std::int64_t steps, bool terminal,
           std::int64_t first_step = 0, std::int64_t first_images = 0);
  // After step `step` (1-based) of the epoch; `images` seen so far in this epoch.
  void update(std::int64_t step, std::int64_t images, double running_loss);
  void finish();  // ends the redrawn line on a terminal

 private:
  std::int64_t epoch_, epochs_, steps_;
  bool terminal_;
  std::int64_t first_step_, first_images_;
  std::int64_t report_every_;       // plain lines: every ~20% of the epoch
  std::int64_t next_plain_report_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// stdout is a terminal a person watches: not a file or pipe, and not mpirun's per-rank
// pseudo-terminal, which ends up in a log.
bool stdout_is_terminal();

}  // namespace ddp::train
