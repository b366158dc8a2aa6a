// DistributedSampler and ShardSampler: each rank's share of an epoch. Chapter 06.
//
// Data parallelism starts here: every rank trains on a different slice of the data, and
// together the ranks visit the dataset once per epoch. DistributedSampler follows
// PyTorch's rules exactly (torch.utils.data.DistributedSampler):
//   1. the epoch's order: randperm(n) with a Generator seeded by seed + epoch (the same
//      on every rank, since every rank computes it from the same two numbers), or
//      0..n-1 without shuffle;
//   2. without drop_last the list is padded by repeating its head until its length is
//      a multiple of the world size, so every rank gets ceil(n / world) samples; with
//      drop_last its tail is cut instead, and every rank gets floor(n / world);
//   3. rank r takes positions r, r + world, r + 2*world, ... of that list.
// Equal counts matter because every rank must run the same number of steps: a rank with
// one batch fewer would leave the others waiting in an all-reduce it never joins
// (chapter 08's join is for inputs that are uneven on purpose). ShardSampler is for evaluation: no
// padding, every position exactly once across the ranks, so sums over ranks are sums over the set.
#pragma once

#include <cstdint>
#include <vector>

#include "data/sampler.hpp"

namespace ddp {

class DistributedSampler final : public Sampler {
 public:
  // Throws ddp::Error naming the value at fault: world_size < 1, a rank outside
  // [0, world_size), or a dataset smaller than the world (some rank would have nothing
  // of its own: every sample it trained on would be another rank's).
  DistributedSampler(std::int64_t dataset_size, int world_size, int rank, bool shuffle = true,
                     std::uint64_t seed = 0, bool drop_last = false);

  // This rank's positions for the current epoch: size() of them.
  std::vector<std::int64_t> indices() const override;
  void set_epoch(std::int64_t epoch) override;
  // Samples per rank: ceil(n / world), or floor(n / world) with drop_last.
  std::int64_t size() const override { return num_samples_; }
  // Samples per epoch over all ranks: size() * world (n plus the padding, or n - the cut).
  std::int64_t total_size() const { return num_samples_ * world_size_; }
  std::int64_t epoch() const { return epoch_; }

 private:
  std::int64_t dataset_size_;
  int world_size_;
  int rank_;
  bool shuffle_;
  std::uint64_t seed_;
  bool drop_last_;
  std::int64_t num_samples_;
  std::int64_t epoch_ = 0;
};

class ShardSampler final : public Sampler {
 public:
  // Rank r of world_size visits r, r + world, r + 2*world, ... < n, in order: the first
  // n % world ranks get one position more than the others. Same checks as above.
  ShardSampler(std::int64_t dataset_size, int world_size, int rank);
  std::vector<std::int64_t> indices() const override;
  void set_epoch(std::int64_t) override {}  // the order never changes
  std::int64_t size() const override;

 private:
  std::int64_t dataset_size_;
  int world_size_;
  int rank_;
};

}  // namespace ddp
