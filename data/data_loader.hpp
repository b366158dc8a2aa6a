// DataLoader: cuts a sampler's order into batches, one batch ahead of the caller.
// Chapter 04.
//
//   RandomSampler sampler(train.size(), /*seed=*/0);
//   DataLoader loader(train, sampler, 128, /*drop_last=*/false, Device::cuda());
//   for (std::int64_t epoch = 0; epoch < 10; ++epoch) {
//     sampler.set_epoch(epoch);                 // a new order, as in PyTorch
//     for (Batch& batch : loader) train_step(batch.images, batch.labels);
//   }
//
// With prefetch (the default) a worker thread assembles the next host batches (index,
// convert, normalise) while the caller computes; a bounded queue holds at most
// kPrefetchDepth of them. The copy to the device stays on the caller's thread, which
// owns the device. Not PyTorch's multi-process workers: one thread, no pinned memory.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <iterator>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>
#include <vector>

#include "data/mnist.hpp"
#include "data/sampler.hpp"
#include "tensor/device.hpp"

namespace ddp {

class DataLoader {
 public:
  // Batches ready ahead of the caller: 2 lets the worker finish one while the caller
  // takes the other, and bounds the memory (2 x 128 x 784 floats = 0.8 MB for MNIST).
  static constexpr std::size_t kPrefetchDepth = 2;

  // `dataset` and `sampler` must outlive the loader. The last batch of an epoch is
  // smaller when batch_size does not divide sampler.size(), or dropped with drop_last.
  DataLoader(const MnistDataset& dataset, Sampler& sampler, std::int64_t batch_size, bool drop_last,
             Device device, bool prefetch = true);
  // Stops the worker and joins it, also in the middle of an epoch. Never throws.
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Batches per epoch (for progress bars): ceil(n / batch_size), or floor with drop_last.
  std::int64_t num_batches() const;
  std::int64_t batch_size() const { return batch_size_; }

  // Starts an epoch: takes the sampler's order as it is now (so call set_epoch first)
  // and, with prefetch, starts the worker. An epoch still running is abandoned.
  void start_epoch();
  // The next batch of the epoch, on the device; std::nullopt when the epoch is over.
  // An exception thrown while assembling the batch (in the worker) is rethrown here.
  std::optional<Batch> next();

  // Range-for support: begin() calls start_epoch(), each step calls next().
  class Iterator {
   public:
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    explicit Iterator(DataLoader* loader) : loader_(loader), batch_(loader->next()) {}
    Batch& operator*() { return *batch_; }
    Iterator& operator++() {
      batch_ = loader_->next();
      return *this;
    }
    void operator++(int) { ++*this; }
    bool operator==(std::default_sentinel_t) const { return !batch_.has_value(); }

   private:
    DataLoader* loader_;
    std::optional<Batch> batch_;
  };
  Iterator begin() {
    start_epoch();
    return Iterator(this);
  }
  std::default_sentinel_t end() const { return {}; }

 private:
  // What the worker hands over: a host batch, or the exception that stopped it.
  struct Slot {
    Batch batch;
    std::exception_ptr error;
  };

  std::int64_t batches_in(std::int64_t n) const;
  Batch assemble(std::int64_t b) const;  // host batch number b of this epoch
  void produce(std::stop_token stop);    // the worker's loop
  Batch take_prefetched();               // waits for the worker's next slot
  void stop_worker() noexcept;

  const MnistDataset& dataset_;
  Sampler& sampler_;
  std::int64_t batch_size_;
  bool drop_last_;
  Device device_;
  bool prefetch_;

  std::vector<std::int64_t> order_;  // this epoch's positions; fixed while the worker runs
  std::int64_t epoch_batches_ = 0;   // batches in this epoch
  std::int64_t next_batch_ = 0;      // batches handed to the caller so far
  bool started_ = false;

  std::mutex mutex_;
  std::condition_variable_any cv_;  // _any: its wait() also wakes on the stop token
  std::deque<Slot> ready_;          // at most kPrefetchDepth, guarded by mutex_
  // Declared last, so destroyed first: it must not outlive what it uses above.
  std::jthread worker_;
};

}  // namespace ddp
