// CachingAllocator::allocate and deallocate: the free lists (see caching_allocator.hpp).
// This file holds exactly the functions of exercise 02.2: the exercise build links the
// participant's copy in its place (tutorial/EXERCISES.md, Note [How an exercise replaces
// the reference]).
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "tensor/cuda/caching_allocator.hpp"
#include "base/error.hpp"

namespace ddp {

void* CachingAllocator::allocate(std::size_t nbytes) {
  if (nbytes == 0) return nullptr;
  const std::size_t size = round_size(nbytes);
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.requests;

  void* ptr = nullptr;
  auto it = free_blocks_.find(size);
  if (it != free_blocks_.end() && !it->second.empty()) {
    // The common case in a training loop: a block of this class was freed earlier.
    // It may still be read by a kernel queued on the compute stream; the kernel that
    // will write it is queued behind that one (see the header), so no wait is needed.
    ptr = it->second.back();
    it->second.pop_back();
    stats_.bytes_cached -= size;
    ++stats_.cache_hits;
  } else {
    ++stats_.device_allocs;
    ptr = raw_->allocate(size);
    if (ptr == nullptr) {
      // Out of memory, but cached blocks of OTHER classes may be what fills the
      // device: give them all back and try once more before failing.
      const std::size_t cached = stats_.bytes_cached;
      release_cached_locked();
      ++stats_.device_allocs;
      ptr = raw_->allocate(size);
      if (ptr == nullptr) {
        DDP_FAIL("out of ", raw_->name(), ": tried to allocate ", format_bytes(nbytes),
                 " (size class ", format_bytes(size), ") with ", format_bytes(stats_.bytes_in_use),
                 " in use by tensors and ", format_bytes(cached),
                 " cached (already given back for one retry)\nhint: use a smaller batch or",
                 " model, drop tensors you no longer need (a view keeps its whole storage",
                 " alive), or look for other processes that hold this memory (nvidia-smi for",
                 " a GPU, top for the host)");
      }
    }
  }

  block_sizes_.emplace(ptr, size);
  stats_.bytes_in_use += size;
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  return ptr;
}

void CachingAllocator::deallocate(void* ptr) noexcept {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = block_sizes_.find(ptr);
  if (it == block_sizes_.end()) {
    // A pointer this allocator never handed out, or one freed twice. Continuing would
    // hand the same block to two tensors later, so stop here, loudly (no throw: this
    // runs in destructors).
    std::fprintf(stderr,
                 "ddp::CachingAllocator::deallocate: %p was not allocated here "
                 "or was already freed\n",
                 ptr);
    std::abort();
  }
  const std::size_t size = it->second;
  block_sizes_.erase(it);
  stats_.bytes_in_use -= size;
  // Keeping a vector per class can allocate host memory (push_back); if that fails we
  // cannot cache the block, so it goes straight back to the device.
  try {
    free_blocks_[size].push_back(ptr);
    stats_.bytes_cached += size;
  } catch (...) {
    raw_->free(ptr);
    ++stats_.device_frees;
  }
}

}  // namespace ddp
