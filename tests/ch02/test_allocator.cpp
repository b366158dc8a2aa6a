// Chapter 02: the CachingAllocator's policy (tensor/cuda/caching_allocator.hpp), tested
// without a GPU. A counting fake stands in for cudaMalloc/cudaFree, so every claim of
// the chapter is checked as a number: which size classes exist, that a freed block is
// reused, that a training loop in its steady state reaches the device zero times, and
// what happens when the device is full.
#include <catch2/catch.hpp>

#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "tensor/cuda/caching_allocator.hpp"
#include "base/error.hpp"

namespace {

using ddp::AllocatorStats;
using ddp::CachingAllocator;

constexpr std::size_t kKiB = 1024, kMiB = 1024 * 1024;

// What the fake device saw. Owned by the test, so it outlives the allocator.
struct Ledger {
  std::size_t capacity = SIZE_MAX;  // allocations beyond this return nullptr (OOM)
  std::size_t used = 0;
  std::uint64_t allocs = 0;  // calls to allocate, successful or not
  std::uint64_t frees = 0;
  std::vector<std::size_t> sizes;  // the size of every allocate call, in order
  std::map<void*, std::size_t> live;
};

// Hands out distinct fake addresses (never dereferenced) and books everything.
class FakeMemory final : public CachingAllocator::RawMemory {
 public:
  explicit FakeMemory(Ledger& ledger) : ledger_(ledger) {}

  void* allocate(std::size_t nbytes) override {
    ++ledger_.allocs;
    ledger_.sizes.push_back(nbytes);
    if (ledger_.used + nbytes > ledger_.capacity) return nullptr;
    void* ptr = reinterpret_cast<void*>(next_);
    next_ += nbytes;
    ledger_.used += nbytes;
    ledger_.live.emplace(ptr, nbytes);
    return ptr;
  }

  void free(void* ptr) noexcept override {
    ++ledger_.frees;
    auto it = ledger_.live.find(ptr);
    if (it == ledger_.live.end()) {
      ledger_.frees += 1000000;  // a free of something not live: fails every count check
      return;
    }
    ledger_.used -= it->second;
    ledger_.live.erase(it);
  }

  std::string name() const override { return "fake memory"; }

 private:
  Ledger& ledger_;
  std::uintptr_t next_ = 0x100000;
};

std::unique_ptr<FakeMemory> fake(Ledger& ledger) { return std::make_unique<FakeMemory>(ledger); }

}  // namespace

TEST_CASE("round_size: multiples of 512 bytes up to 1 MiB, then of 2 MiB",
          "[ch02][allocator][ex02.1]") {
  CHECK(CachingAllocator::round_size(0) == 512);
  CHECK(CachingAllocator::round_size(1) == 512);
  CHECK(CachingAllocator::round_size(512) == 512);
  CHECK(CachingAllocator::round_size(513) == 1024);
  CHECK(CachingAllocator::round_size(4000) == 4096);
  CHECK(CachingAllocator::round_size(kMiB - 1) == kMiB);
  CHECK(CachingAllocator::round_size(kMiB) == kMiB);
  CHECK(CachingAllocator::round_size(kMiB + 1) == 2 * kMiB);
  CHECK(CachingAllocator::round_size(2 * kMiB) == 2 * kMiB);
  CHECK(CachingAllocator::round_size(2 * kMiB + 1) == 4 * kMiB);
  CHECK(CachingAllocator::round_size(5 * kMiB) == 6 * kMiB);
  for (std::size_t n : {1ul, 100ul, 511ul, 777ul, 1000000ul, 3000000ul, 123456789ul}) {
    const std::size_t size = CachingAllocator::round_size(n);
    CAPTURE(n, size);
    CHECK(size >= n);
    CHECK(size % 512 == 0);
    CHECK(size - n < (n <= kMiB ? 512 : 2 * kMiB));  // the smallest class that fits
  }
  CHECK_THROWS_WITH(CachingAllocator::round_size(SIZE_MAX),
                    Catch::Contains(std::to_string(SIZE_MAX) + " bytes"));
}

TEST_CASE("the device is asked for the rounded size", "[ch02][allocator][ex02.2]") {
  Ledger ledger;
  CachingAllocator allocator(fake(ledger));
  void* a = allocator.allocate(1000);
  void* b = allocator.allocate(3 * kMiB);
  CHECK(ledger.sizes == std::vector<std::size_t>{1024, 4 * kMiB});
  allocator.deallocate(a);
  allocator.deallocate(b);
}

TEST_CASE("zero bytes and null pointers never reach the device", "[ch02][allocator][ex02.2]") {
  Ledger ledger;
  CachingAllocator allocator(fake(ledger));
  CHECK(allocator.allocate(0) == nullptr);
  allocator.deallocate(nullptr);
  CHECK(ledger.allocs == 0);
  CHECK(ledger.frees == 0);
  CHECK(allocator.stats().requests == 0);
}

TEST_CASE("a freed block is reused for any request of its size class",
          "[ch02][allocator][ex02.2]") {
  Ledger ledger;
  CachingAllocator allocator(fake(ledger));
  void* a = allocator.allocate(1000);  // class 1024
  allocator.deallocate(a);
  CHECK(ledger.frees == 0);  // kept, not given back

  void* b = allocator.allocate(600);  // also class 1024: the same block
  CHECK(b == a);
  CHECK(ledger.allocs == 1);

  void* c = allocator.allocate(2000);  // class 2048: a new block
  CHECK(c != a);
  CHECK(ledger.allocs == 2);

  void* d = allocator.allocate(1024);  // class 1024 again, but `a` is in use as b
  CHECK(d != b);
  CHECK(ledger.allocs == 3);

  const AllocatorStats s = allocator.stats();
  CHECK(s.requests == 4);
  CHECK(s.cache_hits == 1);
  CHECK(s.device_allocs == 3);
  for (void* p : {b, c, d}) allocator.deallocate(p);
}

TEST_CASE("a training loop in its steady state makes no device allocations",
          "[ch02][allocator][ex02.2]") {
  Ledger ledger;
  CachingAllocator allocator(fake(ledger));
  // One "step": activations of a few sizes allocated in forward order, some freed early,
  // the rest in backward (reverse) order; a temporary in the middle.
  auto step = [&allocator] {
    std::vector<void*> live;
    for (std::size_t n : {128 * 784 * 4ul, 128 * 64 * 4ul, 5 * kMiB, 40ul, 128 * 10 * 4ul}) {
      live.push_back(allocator.allocate(n));
    }
    void* tmp = allocator.allocate(3000);
    allocator.deallocate(tmp);
    while (!live.empty()) {
      allocator.deallocate(live.back());
      live.pop_back();
    }
  };
  step();  // the first step fills the cache
  const std::uint64_t allocs_after_warmup = ledger.allocs;
  const AllocatorStats warm = allocator.stats();
  for (int i = 0; i < 100; ++i) step();
  const AllocatorStats s = allocator.stats();

  CHECK(ledger.allocs == allocs_after_warmup);  // zero new cudaMalloc calls
  CHECK(ledger.frees == 0);                     // and zero cudaFree calls
  CHECK(s.device_allocs == warm.device_allocs);
  CHECK(s.requests == warm.requests + 100 * 6);
  CHECK(s.cache_hits == warm.cache_hits + 100 * 6);
  CHECK(s.bytes_in_use == 0);
  CHECK(s.bytes_cached == ledger.used);
}

TEST_CASE("stats count bytes in use, cached, and the peak", "[ch02][allocator][ex02.2]") {
  Ledger ledger;
  CachingAllocator allocator(fake(ledger));
  void* a = allocator.allocate(1000);      // 1 KiB
  void* b = allocator.allocate(3 * kMiB);  // 4 MiB
  AllocatorStats s = allocator.stats();
  CHECK(s.bytes_in_use == 1 * kKiB + 4 * kMiB);
  CHECK(s.bytes_cached == 0);
  CHECK(s.peak_bytes_in_use == 1 * kKiB + 4 * kMiB);

  allocator.deallocate(b);
  s = allocator.stats();
  CHECK(s.bytes_in_use == 1 * kKiB);
  CHECK(s.bytes_cached == 4 * kMiB);
  CHECK(s.peak_bytes_in_use == 1 * kKiB + 4 * kMiB);  // the peak stays

  allocator.deallocate(a);
  s = allocator.stats();
  CHECK(s.bytes_in_use == 0);
  CHECK(s.bytes_cached == 1 * kKiB + 4 * kMiB);
  CHECK(s.device_allocs == 2);
  CHECK(s.device_frees == 0);
  CHECK(s.requests == 2);
  CHECK(s.cache_hits == 0);
}

TEST_CASE("empty_cache gives cached blocks back and keeps the ones in use",
          "[ch02][allocator][ex02.2]") {
  Ledger ledger;
  CachingAllocator allocator(fake(ledger));
  void* kept = allocator.allocate(10 * kKiB);
  void* a = allocator.allocate(100);
  void* b = allocator.allocate(3 * kMiB);
  allocator.deallocate(a);
  allocator.deallocate(b);

  allocator.empty_cache();
  const AllocatorStats s = allocator.stats();
  CHECK(ledger.frees == 2);
  CHECK(s.device_frees == 2);
  CHECK(s.bytes_cached == 0);
  CHECK(s.bytes_in_use == 10 * kKiB);
  CHECK(ledger.live.size() == 1);
  CHECK(ledger.live.count(kept) == 1);

  // The next request of a freed class goes to the device again.
  void* c = allocator.allocate(100);
  CHECK(ledger.allocs == 4);
  allocator.deallocate(c);
  allocator.deallocate(kept);
}

TEST_CASE("out of memory: the cache is emptied and the allocation retried once",
          "[ch02][allocator][ex02.2]") {
  Ledger ledger;
  ledger.capacity = 8 * kMiB;
  CachingAllocator allocator(fake(ledger));
  void* big = allocator.allocate(5 * kMiB);  // class 6 MiB
  allocator.deallocate(big);                 // cached: the device is 6/8 full

  void* other = allocator.allocate(3 * kMiB);  // class 4 MiB: fails, empty cache, retry
  CHECK(other != nullptr);
  CHECK(ledger.allocs == 3);  // 6 MiB, the failed 4 MiB, the retried 4 MiB
  CHECK(ledger.frees == 1);   // the cached 6 MiB block went back
  const AllocatorStats s = allocator.stats();
  CHECK(s.device_allocs == 3);
  CHECK(s.device_frees == 1);
  CHECK(s.bytes_cached == 0);
  CHECK(s.bytes_in_use == 4 * kMiB);
  allocator.deallocate(other);
}

TEST_CASE("out of memory after the retry throws ddp::Error with the sizes and a hint",
          "[ch02][allocator][ex02.2]") {
  Ledger ledger;
  ledger.capacity = 8 * kMiB;
  CachingAllocator allocator(fake(ledger));
  void* in_use = allocator.allocate(5 * kMiB);  // 6 MiB in use
  void* small = allocator.allocate(1000);
  allocator.deallocate(small);  // 1 KiB cached

  std::string message;
  try {
    allocator.allocate(3 * kMiB);  // needs 4 MiB, only 2 MiB left even after emptying
  } catch (const ddp::Error& e) {
    message = e.what();
  }
  CAPTURE(message);
  CHECK_THAT(message, Catch::Contains("out of fake memory"));  // RawMemory::name
  CHECK_THAT(message, Catch::Contains("3.00 MiB (3145728 bytes)"));  // requested
  CHECK_THAT(message, Catch::Contains("4.00 MiB"));                  // its size class
  CHECK_THAT(message, Catch::Contains("6.00 MiB (6291456 bytes) in use"));
  CHECK_THAT(message, Catch::Contains("1.00 KiB (1024 bytes) cached"));
  CHECK_THAT(message, Catch::Contains("hint:"));
  CHECK_THAT(message, Catch::Contains("free_lists.cpp"));  // where it was thrown
  CHECK(ledger.allocs == 4);  // 6 MiB, 1 KiB, and the request tried twice

  // The failure left the books straight and the allocator usable.
  AllocatorStats s = allocator.stats();
  CHECK(s.bytes_in_use == 6 * kMiB);
  CHECK(s.bytes_cached == 0);
  void* fits = allocator.allocate(kMiB);
  CHECK(fits != nullptr);
  allocator.deallocate(fits);
  allocator.deallocate(in_use);
}

TEST_CASE("the destructor returns cached blocks, not the ones still in use",
          "[ch02][allocator][ex02.2]") {
  Ledger ledger;
  void* in_use = nullptr;
  {
    CachingAllocator allocator(fake(ledger));
    in_use = allocator.allocate(100);
    allocator.deallocate(allocator.allocate(5000));
    allocator.deallocate(allocator.allocate(3 * kMiB));
  }
  CHECK(ledger.frees == 2);
  CHECK(ledger.live.size() == 1);
  CHECK(ledger.live.count(in_use) == 1);
}

TEST_CASE("allocate and deallocate are thread-safe", "[ch02][allocator][ex02.2]") {
  Ledger ledger;
  CachingAllocator allocator(fake(ledger));
  // An exception must not escape a thread (that ends the program): each worker keeps
  // its own, and the test rethrows it once both are joined.
  std::exception_ptr errors[2];
  auto worker = [&allocator, &errors](int id, std::size_t base) {
    try {
      for (int i = 0; i < 2000; ++i) {
        void* a = allocator.allocate(base + static_cast<std::size_t>(i % 7) * 512);
        void* b = allocator.allocate(2 * kMiB + base);
        allocator.deallocate(a);
        allocator.deallocate(b);
      }
    } catch (...) {
      errors[id] = std::current_exception();
    }
  };
  std::thread t1(worker, 0, 100), t2(worker, 1, 3000);
  t1.join();
  t2.join();
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  const AllocatorStats s = allocator.stats();
  CHECK(s.requests == 2 * 2000 * 2);
  CHECK(s.bytes_in_use == 0);
  CHECK(s.bytes_cached == ledger.used);
  CHECK(s.device_allocs == ledger.allocs);
  CHECK(s.cache_hits + s.device_allocs == s.requests);
}
