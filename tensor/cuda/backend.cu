// CudaBackend: the Backend (backend.hpp) of one GPU. Chapter 02.
//
// It owns what every tensor on that GPU shares: a caching allocator over cudaMalloc,
// one compute stream on which every kernel and cuBLAS call is queued, a cuBLAS handle
// bound to that stream, and a copy stream for communication's staging copies (Note [The
// streams of a GPU], tensor/cuda/streams.hpp). The kernels themselves live in elementwise.cu,
// reduce.cu, matmul.cu and random.cu (declared in kernels.hpp); this file only forwards to them.
// Also here: ddp::cuda_backend(index) and the queries of tensor/cuda/device_info.hpp.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "tensor/backend.hpp"
#include "tensor/cuda/architectures.hpp"
#include "tensor/cuda/caching_allocator.hpp"
#include "tensor/cuda/device_info.hpp"
#include "tensor/cuda/kernels.hpp"
#include "tensor/cuda/runtime.hpp"
#include "base/error.hpp"
#include "tensor/tensor.hpp"

namespace ddp {
namespace {

// ---- Types -----------------------------------------------------------------------------

// cudaMalloc/cudaFree on one GPU, behind the CachingAllocator's RawMemory interface.
class CudaRawMemory final : public CachingAllocator::RawMemory {
 public:
  explicit CudaRawMemory(int index) : index_(index) {}

  void* allocate(std::size_t nbytes) override {
    cuda::DeviceGuard guard(index_);  // cudaMalloc allocates on the current device
    void* ptr = nullptr;
    const cudaError_t status = cudaMalloc(&ptr, nbytes);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // not sticky: clear it, the allocator will retry or report
      return nullptr;
    }
    DDP_CHECK_CUDA(status);
    return ptr;
  }
  std::string name() const override { return "GPU " + std::to_string(index_) + " memory"; }

  void free(void* ptr) noexcept override {
    // A kernel queued earlier may still read this block, so the device must be idle
    // first. cudaFree waits for it in practice; the explicit wait says so, and costs
    // nothing more once the device is idle. This is why freeing is slow, and why the
    // cache exists. Errors are ignored: this runs from destructors, and at process
    // exit the runtime may already be shutting down.
    int previous = 0;
    const bool switch_device = cudaGetDevice(&previous) == cudaSuccess && previous != index_;
    if (switch_device) cudaSetDevice(index_);
    cudaDeviceSynchronize();
    cudaFree(ptr);
    if (switch_device) cudaSetDevice(previous);
    cudaGetLastError();
  }

 private:
  int index_;
};

// Owns a cuBLAS handle: cuBLAS keeps its workspace and settings here.
class CublasHandle {
 public:
  CublasHandle() { DDP_CHECK_CUBLAS(cublasCreate(&handle_)); }
  ~CublasHandle() {
    if (handle_ != nullptr) cublasDestroy(handle_);
  }
  CublasHandle(CublasHandle&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  CublasHandle& operator=(CublasHandle&&) = delete;
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;

  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

class CudaBackend final : public Backend {
 public:
  // ---- Construction --------------------------------------------------------------------
  // Called with GPU `index` current (cuda_backend_impl sets it): a stream and a cuBLAS
  // handle belong to the device that is current when they are created.
  explicit CudaBackend(int index)
      : index_(index), allocator_(std::make_unique<CudaRawMemory>(index)) {
    DDP_CHECK_CUBLAS(cublasSetStream(cublas_.get(), stream_.get()));
    // Plain FP32 arithmetic: no TF32 tensor cores, so results stay within float
    // rounding of the CPU's (chapter 02's tests compare the two at 1e-4).
    DDP_CHECK_CUBLAS(cublasSetMathMode(cublas_.get(), CUBLAS_DEFAULT_MATH));
  }

  Device device() const override { return Device::cuda(index_); }
  cudaStream_t stream() const { return stream_.get(); }
  cudaStream_t copy_stream() const { return copy_stream_.get(); }
  CachingAllocator& allocator() { return allocator_; }

  // ---- Memory --------------------------------------------------------------------------
  void* allocate(std::size_t nbytes) override { return allocator_.allocate(nbytes); }
  void deallocate(void* ptr, std::size_t) noexcept override { allocator_.deallocate(ptr); }

  // Both copies are queued on the compute stream, behind the kernels that produce or
  // consume the tensor, and then the host waits for the stream: copy_to_host's caller
  // reads the bytes as soon as we return, and copy_from_host's caller may overwrite or
  // free its buffer (ordinary pageable memory, which the GPU copies from in stages).
  void copy_from_host(const void* host, const Tensor& dst) override {
    const std::size_t nbytes = byte_size(dst);
    if (nbytes == 0) return;
    cuda::DeviceGuard guard(index_);
    DDP_CHECK_CUDA(
        cudaMemcpyAsync(dst.raw_data(), host, nbytes, cudaMemcpyHostToDevice, stream_.get()));
    stream_.synchronize();  // the host waits: see above
  }

  void copy_to_host(const Tensor& src, void* host) override {
    const std::size_t nbytes = byte_size(src);
    if (nbytes == 0) return;
    cuda::DeviceGuard guard(index_);
    DDP_CHECK_CUDA(
        cudaMemcpyAsync(host, src.raw_data(), nbytes, cudaMemcpyDeviceToHost, stream_.get()));
    stream_.synchronize();  // the host waits: the caller reads `host` next
  }

  // Every stream of this GPU, not just ours: later chapters add a communication stream.
  void synchronize() override {
    cuda::DeviceGuard guard(index_);
    DDP_CHECK_CUDA(cudaDeviceSynchronize());
  }

  // ---- Kernels: forwarded to kernels.hpp, on this GPU and its compute stream ----------
  void fill(const Tensor& out, double value) override {
    cuda::DeviceGuard guard(index_);
    cuda::fill(stream(), out, value);
  }
  void arange(const Tensor& out, double start, double step) override {
    cuda::DeviceGuard guard(index_);
    cuda::arange(stream(), out, start, step);
  }
  void copy(const Tensor& src, const Tensor& out) override {
    cuda::DeviceGuard guard(index_);
    cuda::copy(stream(), src, out);
  }
  void unary(UnaryOp op, const Tensor& x, const Tensor& out) override {
    cuda::DeviceGuard guard(index_);
    cuda::unary(stream(), op, x, out);
  }
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) override {
    cuda::DeviceGuard guard(index_);
    cuda::binary(stream(), op, a, b, out);
  }
  void binary_scalar(BinaryOp op, const Tensor& a, double scalar, const Tensor& out) override {
    cuda::DeviceGuard guard(index_);
    cuda::binary_scalar(stream(), op, a, scalar, out);
  }
  void reduce(Reduction op, const Tensor& x, std::int64_t outer, std::int64_t n, std::int64_t inner,
              const Tensor& out) override {
    cuda::DeviceGuard guard(index_);
    cuda::reduce(stream(), op, x, outer, n, inner, out);
  }
  void matmul(const Tensor& a, const Tensor& b, const Tensor& out) override {
    cuda::DeviceGuard guard(index_);
    cuda::matmul_cublas(cublas_.get(), a, b, out);
  }
  void random(const RandomSpec& spec, const Tensor& out) override {
    cuda::DeviceGuard guard(index_);
    cuda::random(stream(), spec, out);
  }

 private:
  static std::size_t byte_size(const Tensor& t) {
    return static_cast<std::size_t>(t.numel()) * element_size(t.dtype());
  }

  // Members are built in this order and destroyed in the reverse one: the allocator
  // gives its cached blocks back while the streams still exist.
  int index_;
  cuda::Stream stream_;       // the compute stream: every kernel on this GPU
  cuda::Stream copy_stream_;  // staging copies for communication (tensor/cuda/streams.hpp)
  CublasHandle cublas_;
  CachingAllocator allocator_;
};

// ---- The per-device table --------------------------------------------------------------

// Note [One CUDA context per device]
// The CUDA driver gives a process one "primary context" per GPU: one address space, in
// which every pointer from cudaMalloc on that GPU is valid. ddp.cpp mirrors it with one
// CudaBackend per GPU per process, created on first use, for the same reason: a block
// must go back to the allocator that handed it out, and the allocator's reuse without
// waiting is only safe because every kernel on that GPU is queued on ONE stream (see
// caching_allocator.hpp). Two backends for cuda:0 would be two allocators and two
// streams, and a block freed by one could be reused by the other while still in use.
// Tensors find the backend from their Device alone (backend_for), so this one table is
// process-wide, as the CPU backend (tensor/cpu/backend.cpp) and the cache of page-locked
// host memory (tensor/storage.cpp) are for the same reason; it is guarded by a mutex
// because data-loading threads may create tensors.
//
// The table is never destroyed. Destroying it at exit would race with tensors held in
// other static objects (their Storage would free into a dead allocator) and with the
// CUDA runtime's own teardown; when the process ends the driver reclaims all of its
// device memory anyway. PyTorch's caching allocator makes the same choice.
struct BackendTable {
  std::mutex mutex;
  // One slot per GPU, sized once: the number of GPUs does not change while a process
  // runs (CUDA reads CUDA_VISIBLE_DEVICES when it starts).
  std::vector<std::unique_ptr<CudaBackend>> backends{
      static_cast<std::size_t>(cuda::device_count())};
};

// Every tensor allocation on a GPU comes through here (Storage -> backend_for), so the
// common case is short: a lock, a bounds check and a pointer.
CudaBackend& cuda_backend_impl(int index) {
  static BackendTable& table = *new BackendTable();
  std::lock_guard<std::mutex> lock(table.mutex);
  const int count = static_cast<int>(table.backends.size());
  DDP_CHECK(index >= 0 && index < count, "no CUDA device cuda:", index, " (",
            count == 0 ? std::string("no usable GPU was found")
                       : "found " + std::to_string(count) +
                             " GPU(s): cuda:0 to cuda:" + std::to_string(count - 1),
            ")\nhint: ",
            count == 0 ? "run on a machine with a GPU (nvidia-smi should list it), check "
                         "CUDA_VISIBLE_DEVICES, or use Device::cpu()"
                       : "pick an index below ddp::cuda::device_count()");
  std::unique_ptr<CudaBackend>& slot = table.backends[index];
  if (slot == nullptr) {
    // A GPU the build has no code for would fail at its first kernel, with "no kernel
    // image is available": say so now, with the fix (Note [Which GPUs a build runs on]).
    cudaDeviceProp props{};
    DDP_CHECK_CUDA(cudaGetDeviceProperties(&props, index));
    DDP_CHECK(cuda::build_runs_on(DDP_CUDA_ARCHITECTURES, props.major, props.minor),
              cuda::no_code_for_gpu(DDP_CUDA_ARCHITECTURES, index, props.name, props.major,
                                    props.minor));
    cuda::DeviceGuard guard(index);  // the backend's stream and handle belong to `index`
    slot = std::make_unique<CudaBackend>(index);
  }
  return *slot;
}

}  // namespace

Backend& cuda_backend(int index) { return cuda_backend_impl(index); }

// ---- device_info.hpp -------------------------------------------------------------------

namespace cuda {

bool is_built() { return true; }

int device_count() noexcept {
  int count = 0;
  // Without a driver or a GPU this fails (cudaErrorNoDevice, cudaErrorInsufficientDriver):
  // that means "zero GPUs", not an error. Clear the remembered error so that the next
  // launch check does not report it.
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

bool is_available() { return device_count() > 0; }

std::string device_name(int index) {
  const int count = device_count();
  DDP_CHECK(index >= 0 && index < count, "device_name(", index, "): there are ", count,
            " usable CUDA devices\nhint: check nvidia-smi and CUDA_VISIBLE_DEVICES");
  cudaDeviceProp prop{};
  DDP_CHECK_CUDA(cudaGetDeviceProperties(&prop, index));
  return prop.name;
}

std::string device_uuid(int index) {
  const int count = device_count();
  DDP_CHECK(index >= 0 && index < count, "device_uuid(", index, "): there are ", count,
            " usable CUDA devices\nhint: check nvidia-smi and CUDA_VISIBLE_DEVICES");
  cudaDeviceProp prop{};
  DDP_CHECK_CUDA(cudaGetDeviceProperties(&prop, index));
  std::array<unsigned char, 16> bytes{};
  static_assert(sizeof(prop.uuid.bytes) == bytes.size());
  std::memcpy(bytes.data(), prop.uuid.bytes, bytes.size());
  return gpu_uuid_text(bytes);
}

AllocatorStats allocator_stats(int index) { return cuda_backend_impl(index).allocator().stats(); }

// Blocks still read by queued kernels are safe to give back: CudaRawMemory::free waits
// for the device first.
void empty_cache(int index) { cuda_backend_impl(index).allocator().empty_cache(); }

cudaStream_t compute_stream(int index) { return cuda_backend_impl(index).stream(); }
cudaStream_t copy_stream(int index) { return cuda_backend_impl(index).copy_stream(); }

}  // namespace cuda
}  // namespace ddp
