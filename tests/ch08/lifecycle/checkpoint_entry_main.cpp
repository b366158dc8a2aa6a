// ch08_checkpoint_entry: prints one entry of a DDPSTATE file, for the lifecycle scripts.
// Chapter 08.
//
//   ch08_checkpoint_entry run.ckpt progress.images_seen         -> 80 80 0 0
//   ch08_checkpoint_entry run.ckpt progress.loss_sum_bits double -> the int64s as doubles
//
// int64 entries print as integers (or, with `double`, as the doubles whose bits they
// hold: ddp-train stores its loss sums that way); float32 entries with 9 digits. Exit 1
// with the reader's message for a bad file or a missing entry.
#include <bit>
#include <cstdio>
#include <string>

#include "nn/state_dict.hpp"

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: ch08_checkpoint_entry FILE NAME [double]\n");
    return 2;
  }
  try {
    const std::string name = argv[2];
    const bool as_double = argc == 4 && std::string(argv[3]) == "double";
    for (const auto& [key, tensor] : ddp::nn::read_state_dict(argv[1])) {
      if (key != name) continue;
      std::string line;
      if (tensor.dtype() == ddp::DType::Int64) {
        for (std::int64_t v : tensor.to_vector<std::int64_t>()) {
          char text[40];
          if (as_double) {
            std::snprintf(text, sizeof text, "%.17g", std::bit_cast<double>(v));
          } else {
            std::snprintf(text, sizeof text, "%lld", static_cast<long long>(v));
          }
          if (!line.empty()) line += ' ';
          line += text;
        }
      } else {
        for (float v : tensor.to_vector<float>()) {
          char text[40];
          std::snprintf(text, sizeof text, "%.9g", static_cast<double>(v));
          if (!line.empty()) line += ' ';
          line += text;
        }
      }
      std::printf("%s\n", line.c_str());
      return 0;
    }
    std::fprintf(stderr, "ch08_checkpoint_entry: %s has no entry '%s'\n", argv[1], argv[2]);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ch08_checkpoint_entry: %s\n", e.what());
    return 1;
  }
}
