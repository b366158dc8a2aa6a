// Backend: the interface between the device-independent tensor code (tensor.cpp,
// ops.cpp, random.cpp) and the code that really touches memory on one device.
// Chapter 01 (CPU backend, tensor/cpu/) and chapter 02 (CUDA backend, tensor/cuda/).
//
// The callers do all checking, broadcasting and allocation; a backend receives tensors
// that are already on its device, of matching shapes, and fills `out`. This contract
// keeps every kernel short, and makes the CPU and CUDA versions of an op twins that a
// reader can lay side by side (tensor/cpu/elementwise.cpp vs tensor/cuda/elementwise.cu).
//
// Which backends exist is decided at build time: tensor/cuda/backend.cu when CUDA is
// built, tensor/no_cuda.cpp (which explains how to get it) otherwise.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/device.hpp"
#include "tensor/op_math.hpp"

namespace ddp {

class Tensor;

// What random() draws; `seed` and `offset` name a Philox stream position (philox.hpp):
// element i of `out` gets random words number offset + i.
struct RandomSpec {
  enum class Kind : std::uint8_t { Uniform, Normal } kind;
  std::uint64_t seed;
  std::uint64_t offset;
  float a;  // Uniform: low bound.  Normal: mean.
  float b;  // Uniform: high bound. Normal: standard deviation.
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;

  // ---- Memory ------------------------------------------------------------------------
  virtual void* allocate(std::size_t nbytes) = 0;
  virtual void deallocate(void* ptr, std::size_t nbytes) noexcept = 0;
  // Between host memory and a CONTIGUOUS tensor on this device. These wait until the
  // copy has finished (on a GPU: the host blocks here; see chapter 02).
  virtual void copy_from_host(const void* host, const Tensor& dst) = 0;
  virtual void copy_to_host(const Tensor& src, void* host) = 0;
  // Blocks the host until all work queued on this device has finished.
  virtual void synchronize() = 0;

  // ---- Kernels -----------------------------------------------------------------------
  virtual void fill(const Tensor& out, double value) = 0;
  // out: contiguous 1-D; out[i] = start + i * step.
  virtual void arange(const Tensor& out, double start, double step) = 0;
  // Same shape, any strides; converts between dtypes. `src` and `out` do not overlap.
  virtual void copy(const Tensor& src, const Tensor& out) = 0;
  // x and out: same shape, any strides (x may be out itself), float32.
  virtual void unary(UnaryOp op, const Tensor& x, const Tensor& out) = 0;
  // a, b, out: same shape (broadcast inputs arrive expanded, with stride-0 dimensions),
  // any strides; a may be out itself (in place). a and b have one dtype; out has a's
  // dtype, or float32 for comparisons.
  virtual void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) = 0;
  virtual void binary_scalar(BinaryOp op, const Tensor& a, double scalar, const Tensor& out) = 0;
  // x: contiguous, read as (outer, n, inner) with the reduced dimension in the middle;
  // out: contiguous (outer, inner). ArgMax writes int64, the others x's dtype. n >= 1.
  virtual void reduce(Reduction op, const Tensor& x, std::int64_t outer, std::int64_t n,
                      std::int64_t inner, const Tensor& out) = 0;
  // a: (B, M, K), b: (B, K, N), out: contiguous (B, M, N); float32. Each matrix of a and
  // b has unit stride in one of its two dimensions (row- or column-major); the batch
  // stride is free (0 when one matrix is shared by the whole batch).
  virtual void matmul(const Tensor& a, const Tensor& b, const Tensor& out) = 0;
  // out: contiguous float32, filled from the Philox stream described by `spec`.
  virtual void random(const RandomSpec& spec, const Tensor& out) = 0;
};

// The backend that owns memory on `device`. The CPU backend always exists; asking for
// a CUDA device throws ddp::Error when CUDA was not built or no such GPU is usable.
Backend& backend_for(Device device);
Backend& cpu_backend();
Backend& cuda_backend(int index);

}  // namespace ddp
