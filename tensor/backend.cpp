// backend_for(): from a Device to the Backend that owns its memory (see backend.hpp).
#include "tensor/backend.hpp"

namespace ddp {

Backend& backend_for(Device device) {
  return device.is_cpu() ? cpu_backend() : cuda_backend(device.index);
}

}  // namespace ddp
