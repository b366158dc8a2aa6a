// CachingAllocator (see caching_allocator.hpp): size classes, free lists, and the one
// retry after an out-of-memory. Chapter 02. Plain C++ with no CUDA header, so it is
// compiled in every build and tested without a GPU (tests/ch02/test_allocator.cpp).
// It does not split or merge blocks: a request is served only by a free block of
// exactly its size class. That wastes some memory, and keeps the policy readable.
#include "tensor/cuda/caching_allocator.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <limits>
#include <sstream>
#include <string>
#include <utility>

#include "tensor/error.hpp"

namespace ddp {
namespace {

constexpr std::size_t kSmallQuantum = 512;                   // small classes: multiples of this
constexpr std::size_t kSmallLimit = std::size_t{1} << 20;    // 1 MiB: largest small class
constexpr std::size_t kLargeQuantum = std::size_t{2} << 20;  // large classes: multiples of 2 MiB

std::size_t round_up(std::size_t n, std::size_t quantum) {
  return (n + quantum - 1) / quantum * quantum;
}

// "1.50 MiB (1572864 bytes)": readable, and exact for whoever compares with nvidia-smi.
std::string format_bytes(std::size_t n) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(n);
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  std::ostringstream os;
  if (unit == 0) {
    os << n << " bytes";
  } else {
    os << std::fixed << std::setprecision(2) << value << ' ' << units[unit] << " (" << n
       << " bytes)";
  }
  return os.str();
}

}  // namespace

// ---- Construction ----------------------------------------------------------------------

CachingAllocator::CachingAllocator(std::unique_ptr<RawMemory> raw) : raw_(std::move(raw)) {
  DDP_CHECK(raw_ != nullptr, "CachingAllocator needs a RawMemory to allocate from");
}

// ---- Size classes ----------------------------------------------------------------------

// Note [Size classes]
// A training step asks for the same sizes every iteration, but not only those: a last
// batch that is smaller, a sequence one token longer. Rounding to classes lets a block
// of 1000 bytes serve a later request of 900. Small classes are fine (512 bytes: the
// alignment cudaMalloc gives anyway), large ones coarse (2 MiB), because a few large
// blocks (activations, gradient buckets) hold most of the memory and being able to
// reuse them matters more than the up to 2 MiB each one wastes.
//
//     request        class
//     1 .. 512       512
//     513            1024
//     1 MiB          1 MiB          (the largest small class)
//     1 MiB + 1      2 MiB
//     5 MiB          6 MiB
std::size_t CachingAllocator::round_size(std::size_t nbytes) {
  if (nbytes <= kSmallLimit) return round_up(std::max<std::size_t>(nbytes, 1), kSmallQuantum);
  DDP_CHECK(nbytes <= std::numeric_limits<std::size_t>::max() - kLargeQuantum, "cannot allocate ",
            nbytes, " bytes: the size does not fit in a size class");
  return round_up(nbytes, kLargeQuantum);
}

// ---- Allocation ------------------------------------------------------------------------

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

// ---- Giving memory back ----------------------------------------------------------------

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
}

void CachingAllocator::release_cached_locked() noexcept {
  for (auto& [size, blocks] : free_blocks_) {
    for (void* ptr : blocks) {
      raw_->free(ptr);
      ++stats_.device_frees;
      stats_.bytes_cached -= size;
    }
  }
  free_blocks_.clear();
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
}

}  // namespace ddp
