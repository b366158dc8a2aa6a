// DistributedSampler::indices (see distributed_sampler.hpp). This file holds exactly the
// function of exercise 06.1: the exercise build links the participant's copy in its place
// (tutorial/EXERCISES.md, Note [How an exercise replaces the reference]).
#include "data/distributed_sampler.hpp"

namespace ddp {

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
  //    list, which needs n < world: the constructor refuses it, so one pass suffices), or cut.
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

}  // namespace ddp
