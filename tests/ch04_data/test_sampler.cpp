// Chapter 04, samplers: SequentialSampler is 0..n-1 every epoch; RandomSampler gives a
// permutation, a different one each epoch, and the same one for the same (seed, epoch)
// whatever happened before (PyTorch DistributedSampler's seed + epoch rule).
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <vector>

#include "data/sampler.hpp"
#include "tensor/random.hpp"

namespace {

bool is_permutation_of_n(std::vector<std::int64_t> v, std::int64_t n) {
  if (static_cast<std::int64_t>(v.size()) != n) return false;
  std::sort(v.begin(), v.end());
  for (std::int64_t i = 0; i < n; ++i) {
    if (v[static_cast<std::size_t>(i)] != i) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("SequentialSampler visits 0..n-1 in order, every epoch", "[ch04][sampler]") {
  ddp::SequentialSampler s(5);
  CHECK(s.size() == 5);
  CHECK(s.indices() == std::vector<std::int64_t>{0, 1, 2, 3, 4});
  s.set_epoch(7);
  CHECK(s.indices() == std::vector<std::int64_t>{0, 1, 2, 3, 4});
  CHECK(ddp::SequentialSampler(0).indices().empty());
}

TEST_CASE("RandomSampler gives a permutation that changes with the epoch", "[ch04][sampler]") {
  ddp::RandomSampler s(1000, /*seed=*/42);
  CHECK(s.size() == 1000);
  const std::vector<std::int64_t> epoch0 = s.indices();
  CHECK(is_permutation_of_n(epoch0, 1000));
  CHECK(s.indices() == epoch0);  // asking twice changes nothing
  std::vector<std::int64_t> identity(1000);
  std::iota(identity.begin(), identity.end(), 0);
  CHECK(epoch0 != identity);

  s.set_epoch(1);
  const std::vector<std::int64_t> epoch1 = s.indices();
  CHECK(is_permutation_of_n(epoch1, 1000));
  CHECK(epoch1 != epoch0);
  s.set_epoch(0);
  CHECK(s.indices() == epoch0);  // back to epoch 0: the same order again
}

TEST_CASE("RandomSampler's order is randperm with Generator(seed + epoch)", "[ch04][sampler]") {
  ddp::RandomSampler a(257, /*seed=*/7);
  ddp::RandomSampler b(257, /*seed=*/7);
  ddp::RandomSampler other(257, /*seed=*/8);
  a.set_epoch(3);
  b.set_epoch(3);
  CHECK(a.indices() == b.indices());
  CHECK(a.indices() != other.indices());
  // The rule itself: seed 7, epoch 3 -> Generator(10); hence also seed 8, epoch 2.
  ddp::Generator gen(10);
  CHECK(a.indices() == ddp::randperm(257, gen).to_vector<std::int64_t>());
  other.set_epoch(2);
  CHECK(other.indices() == a.indices());
}
