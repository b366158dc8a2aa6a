// Tensor: a view (shape, strides, offset, dtype) onto shared Storage. Chapter 01.
//
// Copying a Tensor copies the handle, not the data: `Tensor b = a;` makes b another
// name for a's elements (as in PyTorch). Views (reshape, permute, narrow, expand...)
// share the storage too; `clone()` and `contiguous()` on a non-contiguous view copy.
// The math lives in ops.hpp; random numbers in random.hpp. This class knows nothing of
// gradients: autograd/ (chapter 03) wraps it.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tensor/device.hpp"
#include "tensor/dtype.hpp"
#include "base/error.hpp"
#include "tensor/shape.hpp"
#include "tensor/storage.hpp"

namespace ddp {

struct TensorOptions {
  DType dtype = DType::Float32;
  Device device = Device::cpu();
};

class Tensor {
 public:
  Tensor() = default;  // an undefined tensor: defined() == false
  Tensor(std::shared_ptr<Storage> storage, Shape shape, Shape strides, std::int64_t offset,
         DType dtype);

  // ---- Metadata ----------------------------------------------------------------------
  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }  // in elements
  std::int64_t size(std::int64_t dim) const;          // dim may be negative
  std::int64_t stride(std::int64_t dim) const;
  std::int64_t offset() const { return offset_; }     // in elements, into the storage
  std::int64_t dim() const { return static_cast<std::int64_t>(shape_.size()); }
  std::int64_t numel() const { return ddp::numel(shape_); }
  DType dtype() const { return dtype_; }
  Device device() const;
  bool is_cuda() const { return device().is_cuda(); }
  // True when the elements are laid out row-major with no gaps (strides as
  // contiguous_strides(shape), ignoring dimensions of size 1).
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  // "float32 (2, 3) on cpu", for messages.
  std::string describe() const;
  bool is_pinned() const;  // in page-locked host memory (empty_pinned)

  // Pointer to element (0, 0, ..., 0): host memory on the CPU, device memory on a GPU.
  // data<T>() checks that T matches dtype().
  void* raw_data() const;
  template <typename T>
  T* data() const {
    DDP_CHECK(dtype_of<T>() == dtype_, "data<", dtype_name(dtype_of<T>()),
              ">() called on a ", describe(), " tensor");
    return static_cast<T*>(raw_data());
  }

  // ---- Views: share storage, no data moves ------------------------------------------
  Tensor view(Shape shape) const;       // needs a layout that allows it; one size may be -1
  Tensor reshape(Shape shape) const;    // a view when possible, otherwise a copy
  Tensor permute(const std::vector<std::int64_t>& dims) const;
  Tensor transpose(std::int64_t dim0, std::int64_t dim1) const;
  Tensor t() const;                     // 2-D transpose
  Tensor narrow(std::int64_t dim, std::int64_t start, std::int64_t length) const;
  Tensor slice(std::int64_t dim, std::int64_t start, std::int64_t end, std::int64_t step = 1) const;
  Tensor select(std::int64_t dim, std::int64_t index) const;  // drops `dim`
  Tensor expand(const Shape& shape) const;  // size-1 dims repeat with stride 0
  Tensor unsqueeze(std::int64_t dim) const;
  Tensor squeeze(std::int64_t dim) const;
  Tensor flatten(std::int64_t start_dim = 0, std::int64_t end_dim = -1) const;
  // Any view at all: the given shape, strides (elements) and storage offset. Checked to
  // stay inside the storage. Chapter 03 builds im2col for convolutions from it.
  Tensor as_strided(Shape shape, Shape strides, std::int64_t offset) const;

  // ---- Copies ------------------------------------------------------------------------
  Tensor contiguous() const;  // itself when already contiguous
  Tensor clone() const;       // always a fresh contiguous copy
  Tensor to(Device device) const;  // itself when already there
  Tensor to(DType dtype) const;    // itself when already that type
  Tensor cpu() const { return to(Device::cpu()); }
  Tensor cuda(int index = 0) const { return to(Device::cuda(index)); }

  // Row-major copy of the elements into host memory.
  template <typename T>
  std::vector<T> to_vector() const;
  // The single element of a one-element tensor.
  template <typename T>
  T item() const;

  // ---- In place (what optimizers need) -----------------------------------------------
  Tensor& copy_(const Tensor& src);  // src broadcast to this shape; any device, dtype cast
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }
  Tensor& add_(const Tensor& other, float alpha = 1.0f);  // this += alpha * other
  Tensor& sub_(const Tensor& other);
  Tensor& mul_(const Tensor& other);
  Tensor& div_(const Tensor& other);
  Tensor& add_(float scalar);
  Tensor& mul_(float scalar);

 private:
  std::shared_ptr<Storage> storage_;
  Shape shape_;
  Shape strides_;
  std::int64_t offset_ = 0;
  DType dtype_ = DType::Float32;
};

// ---- Creation ------------------------------------------------------------------------
Tensor empty(const Shape& shape, TensorOptions options = {});  // uninitialised
// Uninitialised, on the CPU, in page-locked memory when a GPU is usable (see
// Storage::pinned_host): the fast way to stage a GPU tensor's bytes through the host.
Tensor empty_pinned(const Shape& shape, DType dtype = DType::Float32);
Tensor zeros(const Shape& shape, TensorOptions options = {});
Tensor ones(const Shape& shape, TensorOptions options = {});
Tensor full(const Shape& shape, double value, TensorOptions options = {});
Tensor scalar_tensor(double value, TensorOptions options = {});  // 0-d
// start, start+step, ... < end (PyTorch's arange).
Tensor arange(double start, double end, double step = 1.0, TensorOptions options = {});
Tensor arange(std::int64_t end, TensorOptions options = {});
// Copies host values (row-major) into a new tensor of `shape` on `device`.
Tensor from_data(std::span<const float> values, const Shape& shape, Device device = Device::cpu());
Tensor from_data(std::span<const std::int64_t> values, const Shape& shape,
                 Device device = Device::cpu());
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);

// Prints dtype, shape, device and (up to a few dozen) values.
std::ostream& operator<<(std::ostream& os, const Tensor& t);

namespace detail {
// Every in-place operation checks its destination first: a view made by expand() has
// elements that are one memory location (a stride-0 dimension of size > 1), and
// writing them would race between threads or keep only the last write. PyTorch refuses
// the same. (Other overlaps, as_strided windows, are not detected.)
void check_writable(const Tensor& t, const char* op);
}  // namespace detail

}  // namespace ddp
