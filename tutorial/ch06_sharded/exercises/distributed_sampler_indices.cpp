// Exercise 06.1: this rank's share of an epoch (tutorial/ch06_sharded/README.md#exercise-1).
// Your copy: tutorial/ch06_sharded/mine/distributed_sampler_indices.cpp (tools/exercise
// start 06.1). Write DistributedSampler::indices, following the three rules at the top of
// data/distributed_sampler.hpp; check it with tools/exercise check 06.1.
#include "data/distributed_sampler.hpp"

#include "base/error.hpp"

namespace ddp {

std::vector<std::int64_t> DistributedSampler::indices() const {
  DDP_FAIL("exercise 06.1 is not done yet: see tutorial/ch06_sharded/README.md#exercise-1");
}

}  // namespace ddp
