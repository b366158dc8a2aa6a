// Chapter 06: DistributedSampler and ShardSampler against PyTorch's rules, written out
// by hand for small cases (checked with torch.utils.data.DistributedSampler, torch 1.13:
// list(DistributedSampler(range(10), num_replicas=W, rank=r, shuffle=False,
// drop_last=D))), and the properties that make data parallelism correct: the shards of
// an epoch cover the dataset, do not overlap, and are equally long.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "data/distributed_sampler.hpp"
#include "data/sampler.hpp"
#include "base/error.hpp"

using ddp::DistributedSampler;
using ddp::ShardSampler;
using Indices = std::vector<std::int64_t>;

namespace {

std::vector<Indices> shards(std::int64_t n, int world, bool shuffle, bool drop_last,
                            std::uint64_t seed = 0, std::int64_t epoch = 0) {
  std::vector<Indices> out;
  for (int r = 0; r < world; ++r) {
    DistributedSampler s(n, world, r, shuffle, seed, drop_last);
    s.set_epoch(epoch);
    out.push_back(s.indices());
  }
  return out;
}

}  // namespace

TEST_CASE("DistributedSampler: N = 10 without shuffle, PyTorch's pad and drop rules",
          "[sampler][ex06.1]") {
  // Without drop_last the list 0..9 is padded with its head to a multiple of the world
  // (0..9, 0, 1 for both W = 3 and W = 4), and rank r takes every W-th from r.
  CHECK(shards(10, 3, false, false) ==
        std::vector<Indices>{{0, 3, 6, 9}, {1, 4, 7, 0}, {2, 5, 8, 1}});
  CHECK(shards(10, 4, false, false) ==
        std::vector<Indices>{{0, 4, 8}, {1, 5, 9}, {2, 6, 0}, {3, 7, 1}});
  // With drop_last the tail is cut to a multiple of the world instead (0..8, 0..7).
  CHECK(shards(10, 3, false, true) == std::vector<Indices>{{0, 3, 6}, {1, 4, 7}, {2, 5, 8}});
  CHECK(shards(10, 4, false, true) == std::vector<Indices>{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  // The counts: ceil(N / W) and floor(N / W), total = count * W.
  CHECK(DistributedSampler(10, 3, 0, false, 0, false).size() == 4);
  CHECK(DistributedSampler(10, 3, 0, false, 0, false).total_size() == 12);
  CHECK(DistributedSampler(10, 4, 2, false, 0, true).size() == 2);
  CHECK(DistributedSampler(10, 4, 2, false, 0, true).total_size() == 8);
}

TEST_CASE("DistributedSampler: shuffled shards cover the epoch once, equally, disjointly",
          "[sampler][ex06.1]") {
  for (const std::int64_t n : {10, 11, 8000}) {
    for (const int world : {1, 2, 3, 4, 7}) {
      for (const bool drop_last : {false, true}) {
        CAPTURE(n, world, drop_last);
        const auto all = shards(n, world, true, drop_last, /*seed=*/5, /*epoch=*/2);
        std::map<std::int64_t, int> seen;
        for (const Indices& shard : all) {
          CHECK(shard.size() == all[0].size());  // equal counts
          for (std::int64_t i : shard) ++seen[i];
        }
        const std::int64_t per_rank = drop_last ? n / world : (n + world - 1) / world;
        CHECK(static_cast<std::int64_t>(all[0].size()) == per_rank);
        // Every index is in range. Without drop_last each of the n appears, and exactly
        // total - n of them twice (the padding); with it nothing appears twice.
        std::int64_t twice = 0;
        for (const auto& [index, count] : seen) {
          CHECK((index >= 0 && index < n));
          CHECK(count <= 2);
          twice += count - 1;
        }
        if (drop_last) {
          CHECK(static_cast<std::int64_t>(seen.size()) == per_rank * world);
          CHECK(twice == 0);
        } else {
          CHECK(static_cast<std::int64_t>(seen.size()) == n);
          CHECK(twice == per_rank * world - n);
        }
      }
    }
  }
}

TEST_CASE("DistributedSampler: the shards interleave RandomSampler's order of the epoch",
          "[sampler][ex06.1]") {
  // The permutation is the one RandomSampler(n, seed) draws for the epoch, the same on
  // every rank: position k of it goes to rank k % W. This is what lets W ranks with
  // batch b see, step by step, the images that one process with batch W * b sees.
  ddp::RandomSampler single(12, 9);
  single.set_epoch(3);
  const Indices order = single.indices();
  const auto all = shards(12, 4, true, false, 9, 3);
  for (int r = 0; r < 4; ++r) {
    for (std::size_t j = 0; j < all[r].size(); ++j) CHECK(all[r][j] == order[4 * j + r]);
  }
}

TEST_CASE("DistributedSampler: set_epoch changes the order, no set_epoch repeats it",
          "[sampler][ex06.1]") {
  DistributedSampler s(100, 2, 1, true, 0, false);
  const Indices first = s.indices();
  CHECK(s.indices() == first);  // no set_epoch: the same order again, as in PyTorch
  s.set_epoch(1);
  const Indices second = s.indices();
  CHECK(second != first);
  s.set_epoch(0);
  CHECK(s.indices() == first);  // a function of (seed, epoch) alone
  CHECK(DistributedSampler(100, 2, 1, true, /*seed=*/1, false).indices() != first);
}

namespace {

// torch.utils.data.DistributedSampler.__iter__ (torch 1.13), line by line, on the order of
// the epoch: num_samples from PyTorch's own formula, padding by list repetition.
Indices pytorch_iter(const Indices& order, int world, int rank, bool drop_last) {
  const auto n = static_cast<std::int64_t>(order.size());
  const std::int64_t num_samples =
      drop_last && n % world != 0 ? static_cast<std::int64_t>(std::ceil(double(n - world) / world))
                                  : static_cast<std::int64_t>(std::ceil(double(n) / world));
  const std::int64_t total_size = num_samples * world;
  Indices indices = order;
  if (!drop_last) {
    const std::int64_t padding_size = total_size - n;
    Indices repeated;  // (indices * ceil(padding_size / len(indices)))[:padding_size]
    while (static_cast<std::int64_t>(repeated.size()) < padding_size) {
      repeated.insert(repeated.end(), indices.begin(), indices.end());
    }
    indices.insert(indices.end(), repeated.begin(), repeated.begin() + padding_size);
  } else {
    indices.resize(static_cast<std::size_t>(total_size));  // indices[:total_size]
  }
  Indices mine;  // indices[rank:total_size:num_replicas]
  for (std::int64_t i = rank; i < total_size; i += world) mine.push_back(indices[i]);
  return mine;
}

}  // namespace

TEST_CASE("DistributedSampler: every shape of epoch, against PyTorch's __iter__ line by line",
          "[sampler][ex06.1]") {
  for (std::int64_t n = 1; n <= 30; ++n) {
    for (int world = 1; world <= std::min<std::int64_t>(n, 8); ++world) {
      for (const bool shuffle : {false, true}) {
        for (const bool drop_last : {false, true}) {
          ddp::RandomSampler random(n, 3);
          random.set_epoch(n % 4);
          const Indices order = shuffle ? random.indices() : ddp::SequentialSampler(n).indices();
          for (int rank = 0; rank < world; ++rank) {
            CAPTURE(n, world, rank, shuffle, drop_last);
            DistributedSampler s(n, world, rank, shuffle, /*seed=*/3, drop_last);
            s.set_epoch(n % 4);
            const Indices want = pytorch_iter(order, world, rank, drop_last);
            REQUIRE(s.indices() == want);
            CHECK(s.size() == static_cast<std::int64_t>(want.size()));
          }
        }
      }
    }
  }
}

TEST_CASE("ShardSampler: every test image exactly once across the ranks, no padding", "[sampler]") {
  for (const int world : {1, 2, 3, 4}) {
    std::multiset<std::int64_t> seen;
    std::int64_t total = 0;
    for (int r = 0; r < world; ++r) {
      ShardSampler s(10, world, r);
      const Indices mine = s.indices();
      CHECK(static_cast<std::int64_t>(mine.size()) == s.size());
      total += s.size();
      seen.insert(mine.begin(), mine.end());
    }
    CHECK(total == 10);
    CHECK(seen == std::multiset<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  }
  CHECK(ShardSampler(10, 4, 1).indices() == Indices{1, 5, 9});
  CHECK(ShardSampler(10, 4, 3).indices() == Indices{3, 7});
}

TEST_CASE("DistributedSampler: bad values are named", "[sampler]") {
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(DistributedSampler(3, 4, 0), Contains("3 samples, fewer than the 4 ranks"));
  CHECK_THROWS_WITH(DistributedSampler(10, 4, 4), Contains("rank 4 is outside the world [0, 4)"));
  CHECK_THROWS_WITH(DistributedSampler(10, 4, -1), Contains("rank -1"));
  CHECK_THROWS_WITH(DistributedSampler(10, 0, 0), Contains("world_size must be >= 1, got 0"));
  CHECK_THROWS_WITH(ShardSampler(2, 3, 0), Contains("2 samples, fewer than the 3 ranks"));
  DistributedSampler s(10, 2, 0);
  CHECK_THROWS_WITH(s.set_epoch(-1), Contains("epoch must be >= 0, got -1"));
}
