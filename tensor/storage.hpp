// Storage: one owned block of memory on one device, shared by every tensor that views
// it (through std::shared_ptr). Chapter 01; chapter 02 adds the CUDA caching allocator
// behind it. Move-only by construction: the block is freed exactly once, by ~Storage.
#pragma once

#include <cstddef>

#include "tensor/device.hpp"

namespace ddp {

class Backend;

class Storage {
 public:
  // Allocates `nbytes` on `device` through that device's backend (see backend.hpp).
  // The memory is uninitialised.
  Storage(std::size_t nbytes, Device device);
  ~Storage();

  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  std::size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

 private:
  Backend* backend_;
  void* data_ = nullptr;
  std::size_t nbytes_;
  Device device_;
};

}  // namespace ddp
