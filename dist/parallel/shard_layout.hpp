// ShardLayout: which elements of a flat buffer each rank owns, when `numel` elements are
// split over `world` ranks. Chapter 09.
//
// The buffer is padded to a multiple of world, so that every shard has the same size
// S = ceil(numel / world) and a reduce-scatter or all-gather of it is one even collective:
//
//   numel = 10, world = 4:  S = 3, padded = 12
//   rank 0: [0, 3)   rank 1: [3, 6)   rank 2: [6, 9)   rank 3: [9, 12) = 9 real + 2 padding
//
// The padding (fewer than `world` elements, all on the last ranks) stays zero and no
// caller ever sees it: real_end() clips a shard to the real elements. A rank's shard may
// be all padding (numel = 5, world = 4: S = 2, rank 3 owns [6, 8), nothing real).
#pragma once

#include <cstdint>

namespace ddp {

struct ShardLayout {
  std::int64_t numel = 0;        // the real elements
  int world = 1;                 // how many shards
  std::int64_t shard_numel = 0;  // S, the same on every rank

  std::int64_t padded_numel() const { return shard_numel * world; }
  std::int64_t begin(int rank) const { return shard_numel * rank; }  // into the padded buffer
  std::int64_t end(int rank) const { return begin(rank) + shard_numel; }
  // The end of rank's real elements: end(rank) clipped to numel (never below begin(rank)).
  std::int64_t real_end(int rank) const;
  std::int64_t real_numel(int rank) const { return real_end(rank) - begin(rank); }
};

// numel >= 0 elements over world >= 1 ranks; ddp::Error otherwise.
ShardLayout make_shard_layout(std::int64_t numel, int world);

}  // namespace ddp
