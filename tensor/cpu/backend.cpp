// CpuBackend: the Backend of host memory (see tensor/backend.hpp). Chapter 01.
// Memory is 64-byte aligned (one cache line, and what AVX loads like best); the kernels
// are the functions of tensor/cpu/kernels.hpp.
//
// Note [Caching host memory]
// A training step allocates and frees the same large buffers every iteration (im2col
// columns, activations). glibc hands blocks above 128 KiB straight back to the kernel,
// so each step paid for fresh pages: page faults and zeroing were a third of the step.
// The CUDA backend's CachingAllocator (tensor/cuda/caching_allocator.hpp) is plain C++,
// so host memory goes through one too: after the first step, no new pages at all.
#include <cstdlib>
#include <cstring>
#include <new>

#include "tensor/cpu/kernels.hpp"
#include "tensor/cuda/caching_allocator.hpp"

namespace ddp {

namespace {

// Aligned host memory from the C library, what the caching allocator draws on.
class HostMemory final : public CachingAllocator::RawMemory {
 public:
  void* allocate(std::size_t nbytes) override {
    constexpr std::size_t kAlign = 64;
    return std::aligned_alloc(kAlign, (nbytes + kAlign - 1) / kAlign * kAlign);
  }
  void free(void* ptr) noexcept override { std::free(ptr); }
  std::string name() const override { return "host memory"; }
};

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::cpu(); }

  void* allocate(std::size_t nbytes) override {
    return nbytes == 0 ? nullptr : cache_.allocate(nbytes);
  }
  void deallocate(void* ptr, std::size_t) noexcept override {
    if (ptr != nullptr) cache_.deallocate(ptr);
  }

  void copy_from_host(const void* host, const Tensor& dst) override {
    std::memcpy(dst.raw_data(), host,
                static_cast<std::size_t>(dst.numel()) * element_size(dst.dtype()));
  }
  void copy_to_host(const Tensor& src, void* host) override {
    std::memcpy(host, src.raw_data(),
                static_cast<std::size_t>(src.numel()) * element_size(src.dtype()));
  }
  void synchronize() override {}  // CPU kernels finish before they return

  void fill(const Tensor& out, double value) override { cpu::fill(out, value); }
  void arange(const Tensor& out, double start, double step) override {
    cpu::arange(out, start, step);
  }
  void copy(const Tensor& src, const Tensor& out) override { cpu::copy(src, out); }
  void unary(UnaryOp op, const Tensor& x, const Tensor& out) override { cpu::unary(op, x, out); }
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) override {
    cpu::binary(op, a, b, out);
  }
  void binary_scalar(BinaryOp op, const Tensor& a, double scalar, const Tensor& out) override {
    cpu::binary_scalar(op, a, scalar, out);
  }
  void reduce(Reduction op, const Tensor& x, std::int64_t outer, std::int64_t n, std::int64_t inner,
              const Tensor& out) override {
    cpu::reduce(op, x, outer, n, inner, out);
  }
  void matmul(const Tensor& a, const Tensor& b, const Tensor& out) override {
    cpu::matmul(a, b, out);
  }
  void random(const RandomSpec& spec, const Tensor& out) override { cpu::random(spec, out); }

 private:
  CachingAllocator cache_{std::make_unique<HostMemory>()};
};

}  // namespace

Backend& cpu_backend() {
  // Created on first use and never destroyed: a tensor held by another static object
  // may be freed after static destruction would have run (the CUDA backend does the same).
  static CpuBackend* backend = new CpuBackend();
  return *backend;
}

}  // namespace ddp
