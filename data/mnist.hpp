// MnistDataset: the MNIST digits in memory, and batches assembled from them. Chapter 04.
//
// Holds the images and labels as the files give them (uint8; a 28x28 image is 784
// bytes), so 60,000 images take 47 MB instead of 188 MB as floats. A batch is converted
// when it is asked for, exactly as the PyTorch anchor does (shared/anchors/mnist.py):
//   x = (pixel / 255 - 0.1307) / 0.3081   float32, (B, 1, H, W)
//   y = label                              int64, (B)
// It does not shuffle or prefetch: sampler.hpp and data_loader.hpp do.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "data/idx_reader.hpp"
#include "tensor/device.hpp"
#include "tensor/tensor.hpp"

namespace ddp {

enum class MnistSplit { Train, Test };

// One batch: images (B, 1, H, W) float32 and labels (B) int64, on one device.
struct Batch {
  Tensor images;
  Tensor labels;
};

// The copy of 8,000 + 2,000 real MNIST digits in data/mnist-10k/ of the source tree.
std::string bundled_mnist_folder();
// $MNIST_DIR when set (as for shared/anchors/mnist.py), otherwise bundled_mnist_folder().
std::string default_mnist_folder();

class MnistDataset {
 public:
  // The normalisation of the PyTorch MNIST examples: the training set's mean and
  // standard deviation of pixel / 255.
  static constexpr float kMean = 0.1307f;
  static constexpr float kStd = 0.3081f;

  // Loads {train,t10k}-images-idx3-ubyte and -labels-idx1-ubyte from `folder`, each
  // as .gz when present, raw otherwise. Throws ddp::Error naming what is missing or wrong.
  explicit MnistDataset(MnistSplit split, const std::string& folder = default_mnist_folder());
  // From arrays already read (tests, other digit sets). `images` must be (N, H, W),
  // `labels` (N) with values 0..9; the names go into error messages.
  MnistDataset(IdxArray images, IdxArray labels, const std::string& images_name,
               const std::string& labels_name);

  std::int64_t size() const { return size_; }
  std::int64_t height() const { return height_; }
  std::int64_t width() const { return width_; }
  // Image i: H * W bytes, row-major. Label i: 0..9.
  std::span<const std::uint8_t> image(std::int64_t i) const;
  std::uint8_t label(std::int64_t i) const;
  const std::vector<std::uint8_t>& labels() const { return labels_; }

  // indices: (B) positions in 0..size()-1 -> images (B, 1, H, W), labels (B), on `device`.
  Batch get_batch(std::span<const std::int64_t> indices, Device device = Device::cpu()) const;
  // The same on the CPU. Touches nothing but this (const) dataset, so the DataLoader's
  // worker thread calls it while the caller computes; the copy to a GPU happens later.
  Batch get_host_batch(std::span<const std::int64_t> indices) const;

 private:
  void check_index(std::int64_t i) const;

  std::int64_t size_ = 0;
  std::int64_t height_ = 0;
  std::int64_t width_ = 0;
  std::vector<std::uint8_t> images_;  // size_ * height_ * width_ bytes
  std::vector<std::uint8_t> labels_;  // size_ bytes
};

}  // namespace ddp
