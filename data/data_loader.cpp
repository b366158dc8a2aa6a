// DataLoader (see data_loader.hpp): the epoch's batches, and the worker that assembles
// them ahead of the caller. Chapter 04.
//
// The handshake, with one mutex and one condition variable:
//   worker: assemble batch b (no lock held) -> wait until the queue has room -> push
//   caller: wait until the queue holds something -> pop -> copy to the device
// Both notify after changing the queue. Stopping (a new epoch, the destructor) is a
// stop request on the jthread: its waits return early, and the worker exits.
#include "data/data_loader.hpp"

#include <algorithm>
#include <utility>

#include "base/error.hpp"

namespace ddp {

// ---- Construction ------------------------------------------------------------------------
DataLoader::DataLoader(const MnistDataset& dataset, Sampler& sampler, std::int64_t batch_size,
                       bool drop_last, Device device, bool prefetch)
    : dataset_(dataset),
      sampler_(sampler),
      batch_size_(batch_size),
      drop_last_(drop_last),
      device_(device),
      prefetch_(prefetch) {
  DDP_CHECK(batch_size > 0, "DataLoader: batch_size must be >= 1, got ", batch_size);
}

std::int64_t DataLoader::batches_in(std::int64_t n) const {
  // (n + b - 1) / b would overflow for a batch size near 2^63.
  return n / batch_size_ + (!drop_last_ && n % batch_size_ != 0 ? 1 : 0);
}

std::int64_t DataLoader::num_batches() const { return batches_in(sampler_.size()); }

// ---- One epoch -----------------------------------------------------------------------------
void DataLoader::start_epoch() {
  stop_worker();  // the worker reads order_: it must be gone before order_ changes
  // Not started until everything below has worked: an exception here must not leave the
  // old epoch's batch count over the new order, nor a consumer waiting for no worker.
  started_ = false;
  epoch_batches_ = next_batch_ = 0;
  std::vector<std::int64_t> order = sampler_.indices();
  DDP_CHECK(static_cast<std::int64_t>(order.size()) == sampler_.size(), "DataLoader: the ",
            "sampler's indices() returned ", order.size(), " positions but its size() says ",
            sampler_.size());
  order_ = std::move(order);
  epoch_batches_ = batches_in(static_cast<std::int64_t>(order_.size()));  // produce() reads it
  if (prefetch_ && epoch_batches_ > 0) {
    worker_ = std::jthread([this](std::stop_token stop) { produce(std::move(stop)); });
  }
  started_ = true;
}

Batch DataLoader::assemble(std::int64_t b) const {
  // Batch b covers order_[b * batch_size, min((b + 1) * batch_size, n)).
  const auto first = static_cast<std::size_t>(b * batch_size_);
  const std::size_t count = std::min(static_cast<std::size_t>(batch_size_), order_.size() - first);
  return dataset_.get_host_batch(std::span(order_).subspan(first, count));
}

void DataLoader::produce(std::stop_token stop) {
  for (std::int64_t b = 0; b < epoch_batches_; ++b) {
    Slot slot;
    try {
      slot.batch = assemble(b);  // the slow part, done without the lock
    } catch (...) {
      // Caught here because an exception leaving a thread's function ends the program;
      // the caller rethrows it from next(), where it can be handled.
      slot.error = std::current_exception();
    }
    const bool failed = slot.error != nullptr;
    {
      std::unique_lock lock(mutex_);
      // false when a stop was requested while waiting for room: nobody wants the batch.
      if (!cv_.wait(lock, stop, [&] { return ready_.size() < kPrefetchDepth; })) return;
      ready_.push_back(std::move(slot));
    }
    cv_.notify_all();
    if (failed) return;
  }
}

Batch DataLoader::take_prefetched() {
  Slot slot;
  {
    std::unique_lock lock(mutex_);
    // No timeout: the worker is a thread of this process that always delivers, a batch
    // or the exception that stopped it, for every batch up to the one the caller waits on.
    cv_.wait(lock, [&] { return !ready_.empty(); });
    slot = std::move(ready_.front());
    ready_.pop_front();
  }
  cv_.notify_all();  // there is room again
  if (slot.error) std::rethrow_exception(slot.error);
  return std::move(slot.batch);
}

std::optional<Batch> DataLoader::next() {
  DDP_CHECK(started_, "DataLoader::next: no epoch started; call start_epoch() first, or ",
            "iterate with `for (Batch& batch : loader)`");
  if (next_batch_ >= epoch_batches_) return std::nullopt;
  Batch host;
  try {
    host = prefetch_ ? take_prefetched() : assemble(next_batch_);
  } catch (...) {
    next_batch_ = epoch_batches_;  // the epoch ends with the error, with or without prefetch
    stop_worker();
    throw;
  }
  ++next_batch_;
  // On the caller's thread: the device (its CUDA context and stream) belongs to it.
  return Batch{host.images.to(device_), host.labels.to(device_)};
}

// ---- Teardown ------------------------------------------------------------------------------
void DataLoader::stop_worker() noexcept {
  if (worker_.joinable()) {
    worker_.request_stop();  // wakes the worker's wait on cv_ (condition_variable_any)
    worker_.join();
  }
  std::lock_guard lock(mutex_);
  ready_.clear();
}

DataLoader::~DataLoader() { stop_worker(); }

}  // namespace ddp
