// ShardLayout (see shard_layout.hpp): the arithmetic of a padded, evenly sharded buffer.
// This file holds exactly the functions of exercise 09.1: the exercise build links the
// participant's copy in its place (tutorial/EXERCISES.md).
#include "dist/parallel/shard_layout.hpp"

#include <algorithm>

#include "base/error.hpp"

namespace ddp {

ShardLayout make_shard_layout(std::int64_t numel, int world) {
  DDP_CHECK(numel >= 0, "make_shard_layout: numel must be >= 0, got ", numel);
  DDP_CHECK(world >= 1, "make_shard_layout: world must be >= 1, got ", world);
  return ShardLayout{.numel = numel, .world = world, .shard_numel = (numel + world - 1) / world};
}

std::int64_t ShardLayout::real_end(int rank) const {
  return std::max(begin(rank), std::min(end(rank), numel));
}

}  // namespace ddp
