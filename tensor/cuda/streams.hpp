// The streams of a GPU as code outside tensor/ may use them: the communication backends of
// dist/ order their own work after the compute stream, and the compute stream after theirs,
// with events. Chapter 05 (nccl) and chapter 07 (staging off the compute stream). Every
// build compiles against this header (it names no CUDA type: Event is only declared); in a
// build without CUDA the functions throw "not built", and no tensor is ever on a GPU there.
// It does not hand out the streams themselves: kernels are tensor/'s business.
//
// Note [The streams of a GPU]
// Each GPU has two streams of ddp.cpp's own (tensor/cuda/backend.cu):
//   - the compute stream: every kernel, cuBLAS call and Tensor::copy_ on that GPU, in the
//     order the host queued them (and the order the caching allocator reuses memory in);
//   - the copy stream: copies between the GPU and page-locked host memory made for a
//     communication backend (tcp, mpi), so that they do not queue behind the compute
//     stream. In chapter 07 the host queues a bucket's all-reduce from inside backward and
//     then keeps queuing the rest of backward: a staging copy on the compute stream would
//     wait for all of it, and communication would never overlap computation.
// A second stream sees the compute stream's results only through an event (recorded on
// the compute stream, waited for by the other stream, on the GPU), and a tensor it reads
// or writes must stay alive until it is done with it (tensor/cuda/caching_allocator.hpp).
#pragma once

#include <memory>

namespace ddp {
class Tensor;
}

namespace ddp::cuda {

class Event;  // tensor/cuda/runtime.hpp: a CUDA event, in a CUDA build

// A new event, recorded at the current end of GPU `device`'s compute stream: it is reached
// once every kernel the host has queued there so far has run. The host does not wait.
// Shared, so that a collective's task (a std::function, copied) can carry it to the
// communication thread.
std::shared_ptr<Event> record_on_compute_stream(int device);

// Kernels queued on GPU `device`'s compute stream after this call start only once `event`
// (recorded on any stream of that GPU) is reached. The GPU waits, not the host.
void compute_stream_wait(const Event& event, int device);

// dst.copy_(src), where one of the two is on a GPU and the other in host memory (page-locked,
// from empty_pinned, for the copy to be asynchronous), both contiguous with the same dtype
// and element count. Queued on that GPU's copy stream, behind `after` (when not null: an
// event from record_on_compute_stream, say), and then the calling thread waits for the copy
// stream, never for the compute stream. Whatever the calling thread's current device.
void copy_on_copy_stream(const Tensor& src, const Tensor& dst, const Event* after);

}  // namespace ddp::cuda
