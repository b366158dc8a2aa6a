// Samplers: the order in which an epoch visits a dataset. Chapter 04.
//
// A Sampler hands out the dataset positions of one epoch; the DataLoader cuts them into
// batches. SequentialSampler is 0, 1, ..., n-1 every epoch (evaluation). RandomSampler
// is a fresh permutation per epoch, drawn from a Generator seeded with seed + epoch, the
// rule of PyTorch's DistributedSampler: the same seed gives the same order on every
// process and in every rerun. Chapter 06's DistributedSampler implements this same
// interface and gives each rank its share. Nothing here touches the data.
#pragma once

#include <cstdint>
#include <vector>

namespace ddp {

class Sampler {
 public:
  virtual ~Sampler() = default;
  // The positions the current epoch visits, in order.
  virtual std::vector<std::int64_t> indices() const = 0;
  // Selects the epoch (0, 1, ...). Call it before each epoch, as in PyTorch: a sampler
  // that shuffles gives the same order every epoch otherwise.
  virtual void set_epoch(std::int64_t epoch) = 0;
  // How many positions indices() returns.
  virtual std::int64_t size() const = 0;
};

class SequentialSampler final : public Sampler {
 public:
  explicit SequentialSampler(std::int64_t n);
  std::vector<std::int64_t> indices() const override;
  void set_epoch(std::int64_t) override {}  // the order never changes
  std::int64_t size() const override { return n_; }

 private:
  std::int64_t n_;
};

class RandomSampler final : public Sampler {
 public:
  RandomSampler(std::int64_t n, std::uint64_t seed);
  // A permutation of 0..n-1: randperm(n) with Generator(seed + epoch). Unlike PyTorch's
  // RandomSampler (a fresh seed every pass), the order changes only with set_epoch().
  std::vector<std::int64_t> indices() const override;
  void set_epoch(std::int64_t epoch) override;
  std::int64_t size() const override { return n_; }
  std::int64_t epoch() const { return epoch_; }

 private:
  std::int64_t n_;
  std::uint64_t seed_;
  std::int64_t epoch_ = 0;
};

}  // namespace ddp
