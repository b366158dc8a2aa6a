// The public face of a GPU's streams (see tensor/cuda/streams.hpp): events on the compute
// stream, and copies on the copy stream. Chapter 05/07. Compiled by the host compiler in a
// CUDA build; tensor/no_cuda.cpp answers "not built" otherwise.
#include "tensor/cuda/streams.hpp"

#include <cuda_runtime_api.h>

#include "tensor/cuda/kernels.hpp"  // compute_stream, copy_stream
#include "tensor/cuda/runtime.hpp"
#include "base/error.hpp"
#include "tensor/tensor.hpp"

namespace ddp::cuda {

std::shared_ptr<Event> record_on_compute_stream(int device) {
  DeviceGuard guard(device);  // an event belongs to the device current at its creation
  auto event = std::make_shared<Event>();
  DDP_CHECK_CUDA(cudaEventRecord(event->get(), compute_stream(device)));
  return event;
}

void compute_stream_wait(const Event& event, int device) {
  DeviceGuard guard(device);
  DDP_CHECK_CUDA(cudaStreamWaitEvent(compute_stream(device), event.get(), 0));
}

void copy_on_copy_stream(const Tensor& src, const Tensor& dst, const Event* after) {
  DDP_CHECK(src.is_cuda() != dst.is_cuda(), "copy_on_copy_stream: from ", src.describe(), " to ",
            dst.describe(), ": exactly one of the two must be on a GPU");
  DDP_CHECK(src.dtype() == dst.dtype() && src.numel() == dst.numel(), "copy_on_copy_stream: from ",
            src.describe(), " to ", dst.describe(), ": the dtype and the element count must match");
  DDP_CHECK(src.is_contiguous() && dst.is_contiguous(), "copy_on_copy_stream: from ",
            src.describe(), " to ", dst.describe(), ": both must be contiguous");
  const std::size_t nbytes = static_cast<std::size_t>(src.numel()) * element_size(src.dtype());
  if (nbytes == 0) return;
  const int device = src.is_cuda() ? src.device().index : dst.device().index;
  DeviceGuard guard(device);
  const cudaStream_t stream = copy_stream(device);
  // The GPU holds the copy back until the producer's kernels have run; the host does not wait.
  if (after != nullptr) DDP_CHECK_CUDA(cudaStreamWaitEvent(stream, after->get(), 0));
  DDP_CHECK_CUDA(
      cudaMemcpyAsync(dst.raw_data(), src.raw_data(), nbytes, cudaMemcpyDefault, stream));
  // The host waits for this stream only: the caller reads (or frees) host memory next.
  DDP_CHECK_CUDA(cudaStreamSynchronize(stream));
}

}  // namespace ddp::cuda
