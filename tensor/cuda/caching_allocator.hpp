// CachingAllocator: keeps freed blocks for reuse, so that a training loop in its steady
// state asks the system for no memory at all. Chapter 02, for GPU memory; the same class
// also caches host memory (the CPU backend, Note [Caching host memory] in
// tensor/cpu/backend.cpp) and page-locked host memory (empty_pinned, tensor/storage.cpp).
//
// Why: cudaMalloc and cudaFree are slow (cudaFree synchronises the whole device), fresh
// host pages cost page faults, and a training step allocates and frees the same sizes
// every iteration. Sizes are rounded up to a few classes and freed blocks are kept in a
// free list per class; a request is served from the list when it can be, from RawMemory
// otherwise.
//
// The policy is plain C++ over a RawMemory interface, so the same class is tested on a
// machine without a GPU (with a counting fake) and used on a GPU (with cudaMalloc).
// GPU blocks are stream-ordered on the one compute stream of their device: a block freed
// by the host may still be read by a queued kernel, and the next kernel that reuses it
// is queued behind that one on the same stream, so reuse is safe without waiting.
// So a block used by ANOTHER stream (a staging copy on the copy stream, a collective on
// NCCL's stream) must not come back here before that stream is done with it: whoever
// queued the work keeps the tensor alive until the host has waited for that stream (the
// staging copies, tensor/cuda/streams.hpp), or until the compute stream has been made to
// wait for it on the GPU (the nccl Work, dist/process_group_nccl.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace ddp {

struct AllocatorStats {
  std::uint64_t device_allocs = 0;   // calls that reached RawMemory::allocate
  std::uint64_t device_frees = 0;    // calls that reached RawMemory::free
  std::uint64_t cache_hits = 0;      // requests served from the cache
  std::uint64_t requests = 0;        // all allocate() calls
  std::size_t bytes_in_use = 0;      // handed out and not yet returned (rounded sizes)
  std::size_t bytes_cached = 0;      // held in free lists
  std::size_t peak_bytes_in_use = 0;
};

class CachingAllocator {
 public:
  // Where the memory really comes from: cudaMalloc/cudaFree on a GPU, aligned_alloc or
  // cudaHostAlloc on the host, a counting fake in tests.
  class RawMemory {
   public:
    virtual ~RawMemory() = default;
    virtual void* allocate(std::size_t nbytes) = 0;  // nullptr when out of memory
    virtual void free(void* ptr) noexcept = 0;
    // What it hands out, for the out-of-memory message: "GPU 0 memory", "host memory".
    virtual std::string name() const = 0;
  };

  explicit CachingAllocator(std::unique_ptr<RawMemory> raw);
  ~CachingAllocator();  // returns every cached block (in-use blocks are the owners' job)
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // Thread-safe. Throws ddp::Error (with the sizes involved) when even after emptying
  // the cache RawMemory has no memory left. nbytes == 0 returns nullptr.
  void* allocate(std::size_t nbytes);
  void deallocate(void* ptr) noexcept;
  // Gives every cached (free) block back to RawMemory.
  void empty_cache();
  AllocatorStats stats() const;

  // The size class a request is served from: multiples of 512 bytes up to 1 MiB, then
  // multiples of 2 MiB (large blocks are few; coarse classes keep them reusable).
  static std::size_t round_size(std::size_t nbytes);

 private:
  void release_cached_locked() noexcept;
  // "1.50 MiB (1572864 bytes)", for the out-of-memory message.
  static std::string format_bytes(std::size_t n);

  std::unique_ptr<RawMemory> raw_;
  mutable std::mutex mutex_;
  std::unordered_map<std::size_t, std::vector<void*>> free_blocks_;  // size class -> blocks
  std::unordered_map<void*, std::size_t> block_sizes_;              // live block -> class
  AllocatorStats stats_;
};

}  // namespace ddp
