// Trainer: the single-process training loop of chapter 04 -- data, model, optimizer,
// evaluation, metrics and checkpoints. ddp-train's main() only parses flags and calls it.
//
// One epoch = for every batch of the shuffled training set:
//     zero_grad -> forward -> cross_entropy -> backward -> SGD step
// then an evaluation pass over the test set in eval mode (BatchNorm's running stats).
//
// Checkpoints (--save / --resume) hold everything that decides the rest of the run:
// the model's parameters and buffers, SGD's momentum buffers, and where the run is
// (epoch, step within it, the loss summed so far). The order of the batches is a pure
// function of (seed, epoch) -- see RandomSampler -- so a resumed run skips the batches
// already done and continues to the same numbers as an uninterrupted one.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>

#include "data/data_loader.hpp"
#include "data/mnist.hpp"
#include "data/sampler.hpp"
#include "nn/resnet_mnist.hpp"
#include "nn/sgd.hpp"
#include "tools/ddp_train/options.hpp"

namespace ddp::train {

struct EpochResult {
  std::int64_t epoch = 0;        // 1-based
  double train_loss = 0.0;       // mean over the epoch's training images
  double test_loss = 0.0;
  double test_accuracy = 0.0;    // percent
  std::int64_t test_correct = 0;
  std::int64_t test_total = 0;   // test images (2,000 bundled, 10,000 in full MNIST)
  double train_seconds = 0.0;    // the training loop alone, evaluation excluded
  double images_per_second = 0.0;
};

struct Evaluation {
  double loss = 0.0;
  std::int64_t correct = 0;
  std::int64_t total = 0;
};

class Trainer {
 public:
  explicit Trainer(TrainOptions options);

  // Runs the remaining epochs (or until --max-steps); prints progress and one summary
  // line per epoch; returns the last epoch's result. Resumed from a run that had already
  // finished, it trains nothing and returns the evaluation of the loaded model.
  EpochResult run();

  Evaluation evaluate();
  Device device() const { return device_; }

 private:
  // Trains until the end of the current epoch or the step budget; false if stopped early.
  bool train_epoch(EpochResult& result);
  bool steps_used_up() const;  // --max-steps given and reached
  void evaluate_into(EpochResult& result);
  void save_checkpoint(const std::string& path) const;
  void load_checkpoint(const std::string& path);
  void write_metrics(const EpochResult& r);

  TrainOptions options_;
  Device device_;
  MnistDataset train_set_;
  MnistDataset test_set_;
  RandomSampler sampler_;
  Generator init_generator_;
  std::shared_ptr<nn::ResNetMnist> model_;
  std::unique_ptr<nn::SGD> optimizer_;
  std::unique_ptr<DataLoader> loader_;
  std::ofstream metrics_;

  // Where the run is; what a checkpoint records besides the tensors.
  std::int64_t epoch_ = 0;          // 0-based epoch in progress
  std::int64_t step_in_epoch_ = 0;  // batches of it already trained
  std::int64_t global_step_ = 0;
  double loss_sum_ = 0.0;           // sum of loss * batch size over this epoch so far
  std::int64_t images_seen_ = 0;    // training images of this epoch so far
};

// "auto" -> the first GPU when one is usable, else the CPU.
Device resolve_device(const std::string& name);

}  // namespace ddp::train
