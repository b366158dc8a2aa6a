// ddp-train's command line: the flags, their defaults (the recipe of
// shared/anchors/ref_model.py) and their parsing. Chapter 04.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ddp::train {

struct TrainOptions {
  std::string data;             // folder of the MNIST IDX files; empty = bundled/$MNIST_DIR
  std::int64_t epochs = 5;
  std::int64_t max_steps = 0;   // stop after this many optimizer steps in all; 0 = no limit
  std::int64_t batch_size = 128;
  double lr = 0.1;
  double momentum = 0.9;
  double weight_decay = 5e-4;
  std::uint64_t seed = 0;
  std::string device = "auto";  // cpu | cuda | cuda:N | auto
  int threads = 0;              // CPU threads; 0 = OpenMP's default
  std::string metrics;          // CSV file, one row per epoch; empty = none
  std::string save;             // checkpoint written after every epoch (and at the end)
  std::string resume;           // checkpoint to continue from
  bool help = false;
};

// Parses argv. Throws ddp::Error with a one-line message naming the flag and what it
// expects ("--batch-size expects a positive integer, got 'abc'").
TrainOptions parse_options(int argc, const char* const* argv);

std::string usage();

}  // namespace ddp::train
