// DistributedSampler and ShardSampler (see distributed_sampler.hpp). Chapter 06.
#include "data/distributed_sampler.hpp"

#include "tensor/error.hpp"

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

std::vector<std::int64_t> DistributedSampler::indices() const {
  // 1. The epoch's order: one process's, the same on every rank (a function of seed and
  //    epoch alone, see RandomSampler).
  std::vector<std::int64_t> order;
  if (shuffle_) {
    RandomSampler all(dataset_size_, seed_);
    all.set_epoch(epoch_);
    order = all.indices();
  } else {
    order = SequentialSampler(dataset_size_).indices();
  }
  // 2. Pad by repeating the head (cycling through it when the padding is longer than the
  //    list, which needs n < world: refused above, so one pass always suffices), or cut.
  const auto total = static_cast<std::size_t>(total_size());
  for (std::size_t i = 0; order.size() < total; ++i) order.push_back(order[i]);
  order.resize(total);
  // 3. Every world_size-th position, starting at this rank's.
  std::vector<std::int64_t> mine;
  mine.reserve(static_cast<std::size_t>(num_samples_));
  for (std::size_t i = static_cast<std::size_t>(rank_); i < total;
       i += static_cast<std::size_t>(world_size_)) {
    mine.push_back(order[i]);
  }
  return mine;
}

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
