// Seeded random tensors that are identical on the CPU and on a GPU. Chapter 01.
//
// A Generator is a seed plus an offset into the Philox stream (philox.hpp). Each call
// that draws n numbers takes stream positions [offset, offset + n) and advances the
// offset, so the same seed and the same sequence of calls give the same tensors, on
// any device and with any number of threads. Pass the Generator explicitly: there is
// no hidden global one.
#pragma once

#include <cstdint>

#include "tensor/tensor.hpp"

namespace ddp {

class Generator {
 public:
  explicit Generator(std::uint64_t seed = 0) : seed_(seed) {}

  void manual_seed(std::uint64_t seed) {
    seed_ = seed;
    offset_ = 0;
  }
  std::uint64_t seed() const { return seed_; }
  std::uint64_t offset() const { return offset_; }
  // Reserves `count` stream positions; returns the first.
  std::uint64_t take(std::uint64_t count) {
    const std::uint64_t first = offset_;
    offset_ += count;
    return first;
  }

 private:
  std::uint64_t seed_;
  std::uint64_t offset_ = 0;
};

// Uniform on [low, high).
Tensor uniform(const Shape& shape, float low, float high, Generator& gen,
               Device device = Device::cpu());
Tensor rand(const Shape& shape, Generator& gen, Device device = Device::cpu());  // [0, 1)
// Normal with the given mean and standard deviation.
Tensor normal(const Shape& shape, float mean, float std, Generator& gen,
              Device device = Device::cpu());
Tensor randn(const Shape& shape, Generator& gen, Device device = Device::cpu());
// In place, for initialising parameters; `t` must be float32. A non-contiguous view is
// filled in row-major order of its elements.
Tensor& uniform_(Tensor& t, float low, float high, Generator& gen);
Tensor& normal_(Tensor& t, float mean, float std, Generator& gen);
// A random permutation of 0..n-1 (int64, on the CPU): Fisher-Yates driven by Philox.
Tensor randperm(std::int64_t n, Generator& gen);

}  // namespace ddp
