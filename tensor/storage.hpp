// Storage: one owned block of memory on one device, shared by every tensor that views
// it (through std::shared_ptr). Chapter 01; chapter 02 adds the CUDA caching allocator
// behind it. Neither copied nor moved: the block is freed exactly once, by ~Storage or by
// release() (chapter 09), whichever comes first.
#pragma once

#include <cstddef>
#include <memory>

#include "tensor/device.hpp"
#include "tensor/memory.hpp"

namespace ddp {

class Backend;
class CachingAllocator;

class Storage {
 public:
  // Allocates `nbytes` on `device` through that device's backend (see backend.hpp).
  // The memory is uninitialised. Counted under this thread's memory::current() category
  // (chapter 09), or refused with the budget's error before anything is allocated.
  Storage(std::size_t nbytes, Device device);
  // Host memory the GPU copies to and from at full speed: page-locked when a GPU is
  // usable, from a cache of such blocks (pinning is slow); ordinary host memory when
  // none is, since then there is nothing to copy to. The staging buffers of the CPU
  // process groups (chapter 05) for CUDA tensors, counted as communication.
  static std::shared_ptr<Storage> pinned_host(std::size_t nbytes);
  ~Storage();

  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  std::size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  bool is_pinned() const { return pinned_ != nullptr; }
  // Chapter 09: gives the memory back while the Storage, and every tensor that views it,
  // lives on; restore() allocates it again (contents undefined: the caller refills it).
  // FSDP frees a unit's full parameters between uses this way while autograd still holds
  // views of them for backward (PyTorch resizes the storage to 0). A tensor of a released
  // storage refuses to hand out its data. Both are no-ops when already done.
  void release();
  void restore();
  bool is_released() const { return released_; }

  // What the bytes are for (memory.hpp); set_category moves them to another count.
  memory::Category category() const { return category_; }
  void set_category(memory::Category category);

 private:
  Storage(std::size_t nbytes, CachingAllocator& pinned);

  Backend* backend_ = nullptr;        // where the memory goes back to, or
  CachingAllocator* pinned_ = nullptr;  // the cache of page-locked blocks
  void* data_ = nullptr;
  std::size_t nbytes_;
  Device device_;
  memory::Category category_;
  bool released_ = false;
};

}  // namespace ddp
