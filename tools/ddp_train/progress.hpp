// Progress output of ddp-train. Chapter 04.
//
// --progress bar: one line redrawn in place with carriage returns (a bar, images/s, ETA,
// running loss), for a person watching a terminal. --progress lines: a plain line every
// ~20% of the epoch, for a log, where redrawn lines would pile up as carriage returns.
// --progress none: neither (the epoch summaries are printed all the same). --progress
// auto (the default) picks one: see progress_style. Only rank 0 reports, for the job.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

namespace ddp::train {

enum class ProgressStyle { Bar, Lines, None };

// The style for --progress `mode` (auto, bar, lines or none; options.cpp has checked it).
// auto: Bar when stdout is a terminal and no MPI launcher started this process, else
// Lines. mpirun gives every rank a pseudo-terminal whatever its own stdout is (a SLURM
// log, a pipe), so isatty says "terminal" for output that ends up in a file; the
// launcher is recognised by the variables it sets for its ranks: OMPI_COMM_WORLD_SIZE
// (Open MPI), PMIX_RANK (any PMIx launcher: Open MPI 5, srun --mpi=pmix), PMI_SIZE
// (MPICH's and Intel MPI's mpiexec).
ProgressStyle progress_style(std::string_view mode);

class Progress {
 public:
  // A run resumed in the middle of an epoch starts at `first_step` (steps done before),
  // with `first_images` of the epoch seen: rate and ETA count only what this run does.
  Progress(std::int64_t epoch, std::int64_t epochs, std::int64_t steps, ProgressStyle style,
           std::int64_t first_step = 0, std::int64_t first_images = 0);
  // After step `step` (1-based) of the epoch; `images` seen so far in this epoch.
  void update(std::int64_t step, std::int64_t images, double running_loss);
  void finish();  // Bar: clears the redrawn line

 private:
  std::int64_t epoch_, epochs_, steps_;
  ProgressStyle style_;
  std::int64_t first_step_, first_images_;
  std::int64_t report_every_;       // plain lines: every ~20% of the epoch
  std::int64_t next_plain_report_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace ddp::train
