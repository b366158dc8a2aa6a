// DistributedSampler and ShardSampler (see distributed_sampler.hpp). Chapter 06.
#include "data/distributed_sampler.hpp"

#include "base/error.hpp"

namespace ddp {

namespace {

void check_shard(const char* who, std::int64_t dataset_size, int world_size, int rank) {
  DDP_CHECK(world_size >= 1, who, ": world_size must be >= 1, got ", world_size);
  DDP_CHECK(rank >= 0 && rank < world_size, who, ": rank ", rank, " is outside the world [0, ",
            world_size, ")");
  DDP_CHECK(dataset_size >= world_size, who, ": the dataset has ", dataset_size,
            " samples, fewer than the ", world_size,
            " ranks\nhint: use fewer ranks, or a larger dataset");
}

}  // namespace

DistributedSampler::DistributedSampler(std::int64_t dataset_size, int world_size, int rank,
                                       bool shuffle, std::uint64_t seed, bool drop_last)
    : dataset_size_(dataset_size),
      world_size_(world_size),
      rank_(rank),
      shuffle_(shuffle),
      seed_(seed),
      drop_last_(drop_last) {
  check_shard("DistributedSampler", dataset_size, world_size, rank);
  const std::int64_t w = world_size;
  num_samples_ = drop_last ? dataset_size / w : (dataset_size + w - 1) / w;
}

void DistributedSampler::set_epoch(std::int64_t epoch) {
  DDP_CHECK(epoch >= 0, "DistributedSampler::set_epoch: epoch must be >= 0, got ", epoch);
  epoch_ = epoch;
}

// DistributedSampler::indices, the three rules: in distributed_sampler_indices.cpp
// (exercise 06.1).

ShardSampler::ShardSampler(std::int64_t dataset_size, int world_size, int rank)
    : dataset_size_(dataset_size), world_size_(world_size), rank_(rank) {
  check_shard("ShardSampler", dataset_size, world_size, rank);
}

std::int64_t ShardSampler::size() const {
  return (dataset_size_ - rank_ + world_size_ - 1) / world_size_;
}

std::vector<std::int64_t> ShardSampler::indices() const {
  std::vector<std::int64_t> mine;
  mine.reserve(static_cast<std::size_t>(size()));
  for (std::int64_t i = rank_; i < dataset_size_; i += world_size_) mine.push_back(i);
  return mine;
}

}  // namespace ddp
