// SequentialSampler and RandomSampler (see sampler.hpp). Chapter 04.
#include "data/sampler.hpp"

#include <numeric>

#include "base/error.hpp"
#include "tensor/random.hpp"

namespace ddp {

SequentialSampler::SequentialSampler(std::int64_t n) : n_(n) {
  DDP_CHECK(n >= 0, "SequentialSampler: n must be >= 0, got ", n);
}

std::vector<std::int64_t> SequentialSampler::indices() const {
  std::vector<std::int64_t> order(static_cast<std::size_t>(n_));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  return order;
}

RandomSampler::RandomSampler(std::int64_t n, std::uint64_t seed) : n_(n), seed_(seed) {
  DDP_CHECK(n >= 0, "RandomSampler: n must be >= 0, got ", n);
}

void RandomSampler::set_epoch(std::int64_t epoch) {
  DDP_CHECK(epoch >= 0, "RandomSampler::set_epoch: epoch must be >= 0, got ", epoch);
  epoch_ = epoch;
}

std::vector<std::int64_t> RandomSampler::indices() const {
  // A new Generator every call, seeded from (seed, epoch) alone: the order depends on
  // nothing else (not on how often indices() was called, nor on other random draws),
  // which is what lets every rank of chapter 06 compute the same permutation.
  Generator gen(seed_ + static_cast<std::uint64_t>(epoch_));
  return randperm(n_, gen).to_vector<std::int64_t>();
}

}  // namespace ddp
