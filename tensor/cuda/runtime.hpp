// The CUDA runtime, wrapped: check macros that turn an error code into a ddp::Error,
// and move-only owners for streams and events, plus a guard for the current device.
// Chapter 02. Only compiled when CUDA is built; it does not know about tensors.
//
// Note [Streams and where the host waits]
// A stream is a queue of work on one GPU: kernels, copies, event records. The host
// only *enqueues*; a kernel launch returns at once, long before the kernel has run.
// Work on one stream runs in order; work on different streams may overlap. The host
// waits for the GPU in exactly these places, and ddp.cpp uses each on purpose:
//   - cudaMemcpy to host memory (and cudaMemcpyAsync followed by a stream sync): the
//     host is about to read the bytes, so they must have arrived;
//   - Stream::synchronize (cudaStreamSynchronize): everything queued on that stream;
//   - Event::synchronize (cudaEventSynchronize): work queued before the record;
//   - cudaDeviceSynchronize, and cudaFree (which is why chapter 02 caches memory).
// Event::wait is NOT a host wait: it makes another stream wait on the GPU, which is how
// chapter 05 orders a communication stream after the compute stream.
#pragma once

#include <cuda_runtime_api.h>

namespace ddp::cuda {

namespace detail {
// Throw ddp::Error for a failed CUDA or cuBLAS call: names the call as written, the
// error (name and description), file:line, and a hint for the usual causes.
void check_cuda(cudaError_t status, const char* call, const char* file, int line);
void check_cublas(int status, const char* call, const char* file, int line);
}  // namespace detail

// ---- Streams ---------------------------------------------------------------------------

// Owns a cudaStream_t created on the current device. Non-blocking: it does not wait for
// (nor make wait) the legacy default stream, so a stray cudaMemcpy elsewhere in the
// process does not serialise with ddp.cpp's kernels.
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t get() const { return stream_; }  // nullptr once moved from
  int device() const { return device_; }
  // The host blocks until every operation queued on this stream has finished.
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
  int device_ = 0;
};

// ---- Events ----------------------------------------------------------------------------

// Owns a cudaEvent_t: a marker in a stream. record() places it; the GPU "reaches" it
// once everything queued before it on that stream has run.
class Event {
 public:
  // Timing costs a little on every record, so it is asked for explicitly.
  explicit Event(bool enable_timing = false);
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  cudaEvent_t get() const { return event_; }
  // Marks the current end of `stream`'s queue.
  void record(const Stream& stream);
  // Work queued on `stream` after this call starts only once this event is reached.
  // The host does not wait: the GPU does.
  void wait(const Stream& stream) const;
  // The host blocks until the event is reached.
  void synchronize() const;
  // True when the event has been reached (never blocks).
  bool query() const;
  // Milliseconds of GPU time between `start` and `end` (both recorded, both timing
  // events). Waits for `end`.
  static float elapsed_ms(const Event& start, const Event& end);

 private:
  cudaEvent_t event_ = nullptr;
};

// ---- The current device ----------------------------------------------------------------

// Makes `index` the current device (the one kernels launch on and cudaMalloc allocates
// on) for the guard's lifetime, then restores the previous one. Neither copied nor moved:
// it belongs to the scope that declares it.
//
// Except on a thread's first guard (or use_device): a thread starts on GPU 0 without
// having used it, and switching back to GPU 0 would, since CUDA 12, create a context
// there (~0.5 GiB) for every rank of a node whose GPU is another one. So the first
// device a thread asks for stays its device; later guards restore as usual.
class DeviceGuard {
 public:
  explicit DeviceGuard(int index);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

// cudaGetDevice, checked.
int current_device();

}  // namespace ddp::cuda

// DDP_CHECK_CUDA(cudaMalloc(&p, n)): throws ddp::Error unless the call returns cudaSuccess.
#define DDP_CHECK_CUDA(call) ::ddp::cuda::detail::check_cuda((call), #call, __FILE__, __LINE__)

// DDP_CHECK_CUBLAS(cublasSgemm(...)): the same for cuBLAS status codes. The status is
// passed as an int so that this header does not need cublas_v2.h.
#define DDP_CHECK_CUBLAS(call) \
  ::ddp::cuda::detail::check_cublas(static_cast<int>(call), #call, __FILE__, __LINE__)
