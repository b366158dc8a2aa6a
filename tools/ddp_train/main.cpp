// ddp-train: trains the ResNet-style network on MNIST. Chapter 04.
//
//   ddp-train                       # 5 epochs on the bundled data, best device present
//   ddp-train --epochs 1 --device cpu --threads 2 --metrics run.csv
//
// Flags and defaults: ddp-train --help (options.cpp). The loop itself: trainer.cpp.
// The last line of a successful run starts with "final:"; scripts check for it.
#include <chrono>
#include <cstdio>
#include <exception>

#include "tensor/error.hpp"
#include "tools/ddp_train/options.hpp"
#include "tools/ddp_train/trainer.hpp"

int main(int argc, char** argv) {
  using namespace ddp::train;
  TrainOptions options;
  try {
    options = parse_options(argc, argv);
  } catch (const ddp::Error& e) {
    const std::string message = e.what();
    std::fprintf(stderr, "ddp-train: %s\n", message.substr(0, message.find('\n')).c_str());
    return 2;
  }
  if (options.help) {
    std::fputs(usage().c_str(), stdout);
    return 0;
  }
  try {
    const auto start = std::chrono::steady_clock::now();
    Trainer trainer(options);
    std::printf(
        "ddp-train: device %s, batch %lld, lr %g, momentum %g, weight decay %g, seed %llu\n",
        trainer.device().str().c_str(), static_cast<long long>(options.batch_size), options.lr,
        options.momentum, options.weight_decay, static_cast<unsigned long long>(options.seed));
    const EpochResult last = trainer.run();
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("final: test accuracy %.2f%% (%lld/%lld after epoch %lld), wall time %.1f s\n",
                last.test_accuracy, static_cast<long long>(last.test_correct),
                static_cast<long long>(last.test_total), static_cast<long long>(last.epoch), wall);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp-train: error: %s\n", e.what());
    return 1;
  }
}
