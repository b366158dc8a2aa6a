// Storage (see storage.hpp): memory comes from, and goes back to, the device's backend.
#include "tensor/storage.hpp"

#include "tensor/backend.hpp"

namespace ddp {

Storage::Storage(std::size_t nbytes, Device device)
    : backend_(&backend_for(device)), nbytes_(nbytes), device_(device) {
  data_ = backend_->allocate(nbytes);
}

Storage::~Storage() { backend_->deallocate(data_, nbytes_); }

}  // namespace ddp
