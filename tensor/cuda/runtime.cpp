// CUDA runtime wrappers (see runtime.hpp): error messages, streams, events, the device
// guard. Chapter 02. Compiled by the host compiler: no kernels here.
#include "tensor/cuda/runtime.hpp"

#include <cublas_v2.h>

#include <string>
#include <utility>

#include "base/error.hpp"

namespace ddp::cuda {

// ---- Errors ----------------------------------------------------------------------------

namespace detail {
namespace {

// A fix for the errors a participant meets first, or "" when there is no general one.
const char* hint_for(cudaError_t status) {
  switch (status) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
      return "no usable GPU: check that nvidia-smi lists one, that the driver is at least"
             " as new as the CUDA toolkit, and CUDA_VISIBLE_DEVICES";
    case cudaErrorInvalidDevice:
      return "the device index is not below ddp::cuda::device_count()";
    case cudaErrorMemoryAllocation:
      return "the GPU is out of memory: use a smaller batch, or see nvidia-smi for other"
             " processes on this GPU";
    case cudaErrorNoKernelImageForDevice:
      return "this GPU's architecture is not in the build: reconfigure with"
             " -DCMAKE_CUDA_ARCHITECTURES=<compute capability, e.g. 86>";
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
      return "a kernel read or wrote outside its memory; the error may belong to an earlier"
             " launch (launches are asynchronous): rerun with CUDA_LAUNCH_BLOCKING=1 to see"
             " which, or under compute-sanitizer";
    default:
      return "";
  }
}

}  // namespace

void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) [[likely]]
    return;
  // Most errors are also remembered as the thread's "last error"; clear it so that the
  // next cudaGetLastError() after a kernel launch reports that launch, not this call.
  // (Sticky errors, such as an illegal address, cannot be cleared: the context is lost.)
  cudaGetLastError();
  std::string message =
      ddp::detail::concat("CUDA call `", call, "` failed: ", cudaGetErrorName(status), " (",
                          cudaGetErrorString(status), ")");
  if (const char* hint = hint_for(status); *hint != '\0') {
    message += "\nhint: ";
    message += hint;
  }
  ddp::detail::throw_error(file, line, nullptr, message);
}

void check_cublas(int status, const char* call, const char* file, int line) {
  const auto cublas_status = static_cast<cublasStatus_t>(status);
  if (cublas_status == CUBLAS_STATUS_SUCCESS) [[likely]]
    return;
  std::string message =
      ddp::detail::concat("cuBLAS call `", call, "` failed: ", cublasGetStatusName(cublas_status),
                          " (", cublasGetStatusString(cublas_status), ")");
  if (cublas_status == CUBLAS_STATUS_INVALID_VALUE) {
    message +=
        "\nhint: a size or leading dimension is invalid (each must be at least the"
        " number of rows of the matrix as cuBLAS sees it, column-major)";
  }
  ddp::detail::throw_error(file, line, nullptr, message);
}

}  // namespace detail

// ---- Streams ---------------------------------------------------------------------------

Stream::Stream() : device_(current_device()) {
  DDP_CHECK_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

Stream::~Stream() {
  // Destroying a stream with work still queued is allowed: the work completes first.
  // Errors are ignored (a destructor must not throw; at exit the runtime may be gone).
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

Stream::Stream(Stream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)), device_(other.device_) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    stream_ = std::exchange(other.stream_, nullptr);
    device_ = other.device_;
  }
  return *this;
}

void Stream::synchronize() const { DDP_CHECK_CUDA(cudaStreamSynchronize(stream_)); }

// ---- Events ----------------------------------------------------------------------------

Event::Event(bool enable_timing) {
  DDP_CHECK_CUDA(
      cudaEventCreateWithFlags(&event_, enable_timing ? cudaEventDefault : cudaEventDisableTiming));
}

Event::~Event() {
  if (event_ != nullptr) cudaEventDestroy(event_);
}

Event::Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (event_ != nullptr) cudaEventDestroy(event_);
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

void Event::record(const Stream& stream) { DDP_CHECK_CUDA(cudaEventRecord(event_, stream.get())); }

void Event::wait(const Stream& stream) const {
  DDP_CHECK_CUDA(cudaStreamWaitEvent(stream.get(), event_, 0));
}

void Event::synchronize() const { DDP_CHECK_CUDA(cudaEventSynchronize(event_)); }

bool Event::query() const {
  const cudaError_t status = cudaEventQuery(event_);
  if (status == cudaErrorNotReady) {
    cudaGetLastError();  // "not ready" is an answer, not an error to carry forward
    return false;
  }
  detail::check_cuda(status, "cudaEventQuery(event_)", __FILE__, __LINE__);
  return true;
}

float Event::elapsed_ms(const Event& start, const Event& end) {
  end.synchronize();
  float ms = 0.0f;
  DDP_CHECK_CUDA(cudaEventElapsedTime(&ms, start.event_, end.event_));
  return ms;
}

// ---- The current device ----------------------------------------------------------------

int current_device() {
  int index = 0;
  DDP_CHECK_CUDA(cudaGetDevice(&index));
  return index;
}

namespace {
thread_local bool device_chosen = false;  // has this thread asked for a device yet?
}  // namespace

DeviceGuard::DeviceGuard(int index) : previous_(current_device()) {
  if (index != previous_) {
    DDP_CHECK_CUDA(cudaSetDevice(index));
    changed_ = device_chosen;  // the first device a thread asks for stays (see the header)
  }
  device_chosen = true;
}

DeviceGuard::~DeviceGuard() {
  if (changed_) cudaSetDevice(previous_);  // errors ignored: destructors do not throw
}

void use_device(int index) {
  DDP_CHECK_CUDA(cudaSetDevice(index));
  device_chosen = true;
}

// ---- Page-locked host memory -----------------------------------------------------------
// The GPU's copy engines read and write page-locked memory directly; pageable memory is
// first copied through a driver bounce buffer. cudaHostAllocPortable: usable from every
// device of the process, not just the current one.
void* pinned_allocate(std::size_t nbytes) {
  void* ptr = nullptr;
  if (cudaHostAlloc(&ptr, nbytes, cudaHostAllocPortable) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky error: the caller reports it
    return nullptr;
  }
  return ptr;
}

void pinned_free(void* ptr) noexcept {
  if (ptr != nullptr) (void)cudaFreeHost(ptr);  // at exit the runtime may be gone: ignore
}

}  // namespace ddp::cuda
