// Storage (see storage.hpp): memory comes from, and goes back to, the device's backend.
#include "tensor/storage.hpp"

#include "base/error.hpp"
#include "tensor/backend.hpp"
#include "tensor/cuda/caching_allocator.hpp"
#include "tensor/cuda/device_info.hpp"

namespace ddp {
namespace {

// cudaHostAlloc behind the CachingAllocator policy of chapter 02: a process group
// stages the same sizes every step, so after the first step nothing is pinned anew.
class PinnedMemory final : public CachingAllocator::RawMemory {
 public:
  void* allocate(std::size_t nbytes) override { return cuda::pinned_allocate(nbytes); }
  void free(void* ptr) noexcept override { cuda::pinned_free(ptr); }
  std::string name() const override { return "page-locked host memory"; }
};

CachingAllocator& pinned_cache() {
  static CachingAllocator cache{std::make_unique<PinnedMemory>()};
  return cache;
}

}  // namespace

Storage::Storage(std::size_t nbytes, Device device)
    : backend_(&backend_for(device)), nbytes_(nbytes), device_(device),
      category_(memory::current()) {
  memory::on_allocate(category_, nbytes_);  // throws past the budget: nothing to undo
  try {
    data_ = backend_->allocate(nbytes);
  } catch (...) {
    memory::on_free(category_, nbytes_);
    throw;
  }
}

Storage::Storage(std::size_t nbytes, CachingAllocator& pinned)
    : pinned_(&pinned), nbytes_(nbytes), device_(Device::cpu()),
      category_(memory::Category::Communication) {
  memory::on_allocate(category_, nbytes_);
  try {
    data_ = pinned_->allocate(nbytes);
  } catch (...) {
    memory::on_free(category_, nbytes_);
    throw;
  }
}

std::shared_ptr<Storage> Storage::pinned_host(std::size_t nbytes) {
  if (!cuda::is_available()) {
    const memory::Scope staging(memory::Category::Communication);
    return std::make_shared<Storage>(nbytes, Device::cpu());
  }
  return std::shared_ptr<Storage>(new Storage(nbytes, pinned_cache()));
}

Storage::~Storage() {
  if (released_) return;  // given back already (release)
  if (pinned_ != nullptr) {
    pinned_->deallocate(data_);
  } else {
    backend_->deallocate(data_, nbytes_);
  }
  memory::on_free(category_, nbytes_);
}

void Storage::release() {
  if (released_) return;
  DDP_CHECK(pinned_ == nullptr, "Storage::release: page-locked staging memory is not released");
  backend_->deallocate(data_, nbytes_);
  memory::on_free(category_, nbytes_);
  data_ = nullptr;
  released_ = true;
}

void Storage::restore() {
  if (!released_) return;
  memory::on_allocate(category_, nbytes_);  // the budget applies again
  try {
    data_ = backend_->allocate(nbytes_);
  } catch (...) {
    memory::on_free(category_, nbytes_);
    throw;
  }
  released_ = false;
}

void Storage::set_category(memory::Category category) {
  if (!released_) memory::on_retag(category_, category, nbytes_);  // released: no bytes held
  category_ = category;
}

}  // namespace ddp
