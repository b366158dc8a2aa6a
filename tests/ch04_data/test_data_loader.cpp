// Chapter 04, DataLoader: each epoch covers every index exactly once, in the sampler's
// order; the batch count with and without drop_last; prefetching changes nothing but
// the timing; destroying a loader mid-epoch returns promptly (the ctest TIMEOUT turns a
// hang into a failure); an exception in the worker reaches the caller.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <vector>

#include "data/data_loader.hpp"
#include "tests/ch04_data/idx_files.hpp"

using Catch::Contains;

namespace {

// n images of 2 x 3; every pixel of image i is i mod 256 and its label i mod 10, so a
// batch says which images it holds.
ddp::MnistDataset numbered(std::int64_t n) {
  ch04::Bytes pixels(static_cast<std::size_t>(n) * 6);
  ch04::Bytes labels(static_cast<std::size_t>(n));
  for (std::size_t k = 0; k < pixels.size(); ++k) pixels[k] = static_cast<std::uint8_t>(k / 6);
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::uint8_t>(i % 10);
  return ddp::MnistDataset({{n, 2, 3}, pixels}, {{n}, labels}, "numbered", "numbered");
}

// Which image each row of a batch came from, read back from its first pixel.
std::vector<std::int64_t> rows_of(const ddp::Batch& batch) {
  const std::vector<float> x = batch.images.to_vector<float>();
  std::vector<std::int64_t> rows;
  for (std::size_t k = 0; k < x.size(); k += 6) {
    rows.push_back(std::lround((x[k] * ddp::MnistDataset::kStd + ddp::MnistDataset::kMean) * 255));
  }
  return rows;
}

// Every batch of one epoch, concatenated; and the batch sizes.
std::vector<std::int64_t> one_epoch(ddp::DataLoader& loader, std::vector<std::int64_t>* sizes) {
  std::vector<std::int64_t> seen;
  for (ddp::Batch& batch : loader) {
    const std::vector<std::int64_t> rows = rows_of(batch);
    const std::vector<std::int64_t> labels = batch.labels.to_vector<std::int64_t>();
    for (std::size_t r = 0; r < rows.size(); ++r) CHECK(labels[r] == rows[r] % 10);
    seen.insert(seen.end(), rows.begin(), rows.end());
    if (sizes != nullptr) sizes->push_back(static_cast<std::int64_t>(rows.size()));
  }
  return seen;
}

// A sampler that hands out what it is told: an index past the end fails in the worker.
class ListSampler final : public ddp::Sampler {
 public:
  explicit ListSampler(std::vector<std::int64_t> list) : list_(std::move(list)) {}
  std::vector<std::int64_t> indices() const override { return list_; }
  void set_epoch(std::int64_t) override {}
  std::int64_t size() const override { return static_cast<std::int64_t>(list_.size()); }

 private:
  std::vector<std::int64_t> list_;
};

}  // namespace

TEST_CASE("DataLoader covers every index exactly once per epoch, in the sampler's order",
          "[ch04][loader]") {
  const ddp::MnistDataset data = numbered(103);
  ddp::RandomSampler sampler(103, /*seed=*/1);
  for (bool prefetch : {false, true}) {
    INFO("prefetch " << prefetch);
    ddp::DataLoader loader(data, sampler, 10, /*drop_last=*/false, ddp::Device::cpu(), prefetch);
    for (std::int64_t epoch = 0; epoch < 3; ++epoch) {
      sampler.set_epoch(epoch);
      std::vector<std::int64_t> sizes;
      const std::vector<std::int64_t> seen = one_epoch(loader, &sizes);
      CHECK(seen == sampler.indices());
      std::vector<std::int64_t> sorted = seen;
      std::sort(sorted.begin(), sorted.end());
      for (std::int64_t i = 0; i < 103; ++i) CHECK(sorted[static_cast<std::size_t>(i)] == i);
      CHECK(sizes == std::vector<std::int64_t>{10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 3});
    }
  }
}

TEST_CASE("DataLoader batch count with and without drop_last", "[ch04][loader]") {
  const ddp::MnistDataset data = numbered(103);
  ddp::SequentialSampler sampler(103);
  ddp::DataLoader keep(data, sampler, 10, /*drop_last=*/false, ddp::Device::cpu());
  ddp::DataLoader drop(data, sampler, 10, /*drop_last=*/true, ddp::Device::cpu());
  CHECK(keep.num_batches() == 11);
  CHECK(drop.num_batches() == 10);
  std::vector<std::int64_t> sizes;
  const std::vector<std::int64_t> seen = one_epoch(drop, &sizes);
  CHECK(sizes == std::vector<std::int64_t>(10, 10));
  CHECK(seen.size() == 100);
  CHECK(seen.back() == 99);  // the last 3 were dropped

  ddp::DataLoader exact(data, sampler, 103, /*drop_last=*/true, ddp::Device::cpu());
  CHECK(exact.num_batches() == 1);
  ddp::DataLoader too_big(data, sampler, 200, /*drop_last=*/true, ddp::Device::cpu());
  CHECK(too_big.num_batches() == 0);
  CHECK(one_epoch(too_big, nullptr).empty());
  // (n + b - 1) / b would overflow here and count no batch at all.
  const std::int64_t huge = std::numeric_limits<std::int64_t>::max();
  CHECK(ddp::DataLoader(data, sampler, huge, false, ddp::Device::cpu()).num_batches() == 1);
  CHECK(ddp::DataLoader(data, sampler, huge, true, ddp::Device::cpu()).num_batches() == 0);
  CHECK_THAT(
      ch04::error_of([&] { ddp::DataLoader zero(data, sampler, 0, false, ddp::Device::cpu()); }),
      Contains("batch_size must be >= 1, got 0"));
}

TEST_CASE("Prefetching gives the same batches as assembling on demand", "[ch04][loader]") {
  const ddp::MnistDataset data = numbered(50);
  ddp::RandomSampler sampler(50, /*seed=*/3);
  sampler.set_epoch(5);
  ddp::DataLoader eager(data, sampler, 7, false, ddp::Device::cpu(), /*prefetch=*/true);
  ddp::DataLoader lazy(data, sampler, 7, false, ddp::Device::cpu(), /*prefetch=*/false);
  eager.start_epoch();
  lazy.start_epoch();
  std::int64_t count = 0;
  while (true) {
    std::optional<ddp::Batch> a = eager.next();
    std::optional<ddp::Batch> b = lazy.next();
    REQUIRE(a.has_value() == b.has_value());
    if (!a) break;
    CHECK(a->images.to_vector<float>() == b->images.to_vector<float>());
    CHECK(a->labels.to_vector<std::int64_t>() == b->labels.to_vector<std::int64_t>());
    ++count;
  }
  CHECK(count == eager.num_batches());
  CHECK_FALSE(eager.next().has_value());  // stays over until the next epoch starts
}

TEST_CASE("Destroying a DataLoader mid-epoch stops its worker promptly", "[ch04][loader]") {
  // The worker is blocked on a full queue when the loader goes; without the stop request
  // the join would wait forever (the ctest TIMEOUT would fail the test).
  const ddp::MnistDataset data = numbered(1000);
  ddp::SequentialSampler sampler(1000);
  const auto start = std::chrono::steady_clock::now();
  for (int round = 0; round < 20; ++round) {
    ddp::DataLoader loader(data, sampler, 4, false, ddp::Device::cpu());
    loader.start_epoch();
    REQUIRE(loader.next().has_value());
    if (round % 2 == 1) loader.start_epoch();  // abandoning an epoch stops the worker too
  }
  {
    ddp::DataLoader never_read(data, sampler, 4, false, ddp::Device::cpu());
    never_read.start_epoch();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(seconds < 5.0);
}

TEST_CASE("An exception in the worker is rethrown by next() in the caller", "[ch04][loader]") {
  const ddp::MnistDataset data = numbered(10);
  ListSampler sampler({0, 1, 2, 3, 4, 5, 99, 7});  // 99 is past the end
  for (bool prefetch : {true, false}) {
    INFO("prefetch " << prefetch);
    ddp::DataLoader loader(data, sampler, 3, false, ddp::Device::cpu(), prefetch);
    loader.start_epoch();
    CHECK(loader.next().has_value());  // 0, 1, 2
    CHECK(loader.next().has_value());  // 3, 4, 5
    CHECK_THAT(ch04::error_of([&] { loader.next(); }),
               Contains("MnistDataset: index 99 is out of range for 10 images"));
    CHECK_FALSE(loader.next().has_value());  // the epoch ended with the error
    loader.start_epoch();                    // and the next one starts afresh
    CHECK(loader.next().has_value());
  }
}

TEST_CASE("A start_epoch() that fails leaves no half-started epoch behind", "[ch04][loader]") {
  // A sampler whose indices() disagrees with its size() from the second epoch on.
  class Shrinking final : public ddp::Sampler {
   public:
    std::vector<std::int64_t> indices() const override {
      return epoch_ == 0 ? std::vector<std::int64_t>{0, 1, 2, 3, 4, 5}
                         : std::vector<std::int64_t>{0, 1};
    }
    void set_epoch(std::int64_t epoch) override { epoch_ = epoch; }
    std::int64_t size() const override { return 6; }

   private:
    std::int64_t epoch_ = 0;
  };
  const ddp::MnistDataset data = numbered(6);
  for (bool prefetch : {true, false}) {
    INFO("prefetch " << prefetch);
    Shrinking sampler;
    ddp::DataLoader loader(data, sampler, 2, false, ddp::Device::cpu(), prefetch);
    loader.start_epoch();
    CHECK(loader.next().has_value());  // the old epoch, one batch of three taken
    sampler.set_epoch(1);
    CHECK_THAT(ch04::error_of([&] { loader.start_epoch(); }),
               Contains("indices() returned 2 positions but its size() says 6"));
    // Before the fix: with prefetch, next() waited forever for a worker that was gone;
    // without, it read the old epoch's batch 1 out of the new two-element order.
    CHECK_THAT(ch04::error_of([&] { loader.next(); }), Contains("call start_epoch() first"));
  }
}

TEST_CASE("next() before start_epoch() says what to do", "[ch04][loader]") {
  const ddp::MnistDataset data = numbered(4);
  ddp::SequentialSampler sampler(4);
  ddp::DataLoader loader(data, sampler, 2, false, ddp::Device::cpu());
  CHECK_THAT(ch04::error_of([&] { loader.next(); }), Contains("call start_epoch() first"));
}
