// CachingAllocator (see caching_allocator.hpp): construction, statistics and giving memory
// back. The size classes are in size_classes.cpp, the free lists (allocate, deallocate,
// the one retry after an out-of-memory) in free_lists.cpp. Chapter 02. Plain C++ with no CUDA header, so it is
// compiled in every build and tested without a GPU (tests/ch02/test_allocator.cpp).
// It does not split or merge blocks: a request is served only by a free block of
// exactly its size class. That wastes some memory, and keeps the policy readable.
#include "tensor/cuda/caching_allocator.hpp"

#include <iomanip>
#include <sstream>
#include <string>
#include <utility>

#include "base/error.hpp"

namespace ddp {

// ---- Construction ----------------------------------------------------------------------

CachingAllocator::CachingAllocator(std::unique_ptr<RawMemory> raw) : raw_(std::move(raw)) {
  DDP_CHECK(raw_ != nullptr, "CachingAllocator needs a RawMemory to allocate from");
}

// "1.50 MiB (1572864 bytes)": readable, and exact for whoever compares with nvidia-smi.
std::string CachingAllocator::format_bytes(std::size_t n) {
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
