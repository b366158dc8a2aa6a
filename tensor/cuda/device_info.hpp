// What the program can ask about CUDA on every build, with or without it: is it built,
// how many GPUs can be used, what the caching allocator has done. Chapter 02.
// Implemented by tensor/cuda/backend.cu, or by tensor/no_cuda.cpp when CUDA is not built.
#pragma once

#include <cstddef>
#include <string>

#include "tensor/cuda/caching_allocator.hpp"

namespace ddp::cuda {

bool is_built();                // compiled with the CUDA backend
int device_count() noexcept;    // usable GPUs; 0 when none, no driver, or not built
bool is_available();            // device_count() > 0
std::string device_name(int index);  // "NVIDIA H100 80GB HBM3"; throws when absent
// The GPU's identity, as nvidia-smi -L writes it: "GPU-5d2c3e4f-..." (a MIG instance gets
// "GPU-" here where nvidia-smi writes "MIG-"). The same GPU has the same UUID in every
// process, whatever CUDA_VISIBLE_DEVICES numbers it: two ranks that both say cuda:0 may
// hold different GPUs (srun --gpus-per-task=1), or the same one.
// Throws when absent.
std::string device_uuid(int index);

// The caching allocator of GPU `index` (chapter 02): counters, and giving cached
// blocks back to the driver.
AllocatorStats allocator_stats(int index);
void empty_cache(int index);

// Makes GPU `index` the calling thread's device for good (cudaSetDevice), as
// torch.cuda.set_device does. A thread's first DeviceGuard does the same by itself
// (runtime.hpp); this is for a thread whose first CUDA call is not on a device, such as
// allocating page-locked memory, which would otherwise make a context on GPU 0.
void use_device(int index);

// Page-locked ("pinned") host memory: cudaHostAlloc / cudaFreeHost. Only callable when
// is_available(); use it through ddp::empty_pinned() (tensor.hpp), which caches it.
void* pinned_allocate(std::size_t nbytes);  // nullptr when out of memory
void pinned_free(void* ptr) noexcept;

}  // namespace ddp::cuda
