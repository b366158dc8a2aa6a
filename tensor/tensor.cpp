// Tensor (see tensor.hpp): metadata, views, copies and creation. Chapter 01.
//
// Reading order: the constructor and metadata, then views (which only compute a new
// shape, strides and offset), then copies (which ask the backend to move data), then
// the creation functions at the end.
#include "tensor/tensor.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>
#include <ostream>

#include "tensor/backend.hpp"
#include "tensor/ops.hpp"

namespace ddp {

// ==== Construction and metadata ======================================================

Tensor::Tensor(std::shared_ptr<Storage> storage, Shape shape, Shape strides, std::int64_t offset,
               DType dtype)
    : storage_(std::move(storage)),
      shape_(std::move(shape)),
      strides_(std::move(strides)),
      offset_(offset),
      dtype_(dtype) {
  DDP_CHECK(shape_.size() == strides_.size(), "shape ", shape_str(shape_), " and strides ",
            shape_str(strides_), " have different lengths");
  for (std::int64_t size : shape_) {
    DDP_CHECK(size >= 0, "negative size in shape ", shape_str(shape_));
  }
}

namespace {
// normalize_dim accepts 0 and -1 for a 0-d tensor, as PyTorch does (squeeze(0) of a
// scalar is the scalar); an operation that indexes the dimension cannot.
std::int64_t indexed_dim(const Tensor& t, std::int64_t dim, const char* op) {
  DDP_CHECK(t.dim() > 0, op, "(", dim, "): a 0-d tensor (", t.describe(),
            ") has no dimensions\nhint: reshape({1}) first");
  return normalize_dim(dim, t.dim());
}
}  // namespace

std::int64_t Tensor::size(std::int64_t dim) const {
  return shape_[indexed_dim(*this, dim, "size")];
}

std::int64_t Tensor::stride(std::int64_t dim) const {
  return strides_[indexed_dim(*this, dim, "stride")];
}

Device Tensor::device() const {
  DDP_CHECK(defined(), "this tensor is undefined (default-constructed): it has no device");
  return storage_->device();
}

bool Tensor::is_contiguous() const {
  std::int64_t expected = 1;
  for (std::int64_t d = dim() - 1; d >= 0; --d) {
    if (shape_[d] == 0) return true;  // no elements: any layout is contiguous
    if (shape_[d] != 1 && strides_[d] != expected) return false;
    expected *= shape_[d];
  }
  return true;
}

bool Tensor::is_pinned() const { return storage_ != nullptr && storage_->is_pinned(); }

std::string Tensor::describe() const {
  if (!defined()) return "undefined";
  return std::string(dtype_name(dtype_)) + " " + shape_str(shape_) + " on " + device().str();
}

void* Tensor::raw_data() const {
  DDP_CHECK(defined(), "raw_data() of an undefined tensor");
  DDP_CHECK(!storage_->is_released(), "a ", describe(),
            " tensor whose memory was released (Storage::release) was used before its memory "
            "came back (Storage::restore)");
  return static_cast<char*>(storage_->data()) +
         offset_ * static_cast<std::int64_t>(element_size(dtype_));
}

// ==== Views ==========================================================================

namespace {

// Strides that let `new_shape` walk the same elements, in the same row-major order, as
// (old_shape, old_strides) -- or nothing when the old layout does not allow it.
// Dimensions of the old tensor that are laid out back to back form a "chunk"; a view
// may split or merge dimensions only inside a chunk. (PyTorch: computeStride.)
std::optional<Shape> view_strides(const Shape& old_shape, const Shape& old_strides,
                                  const Shape& new_shape) {
  Shape new_strides(new_shape.size(), 1);
  if (numel(old_shape) == 0 || old_shape.empty()) return contiguous_strides(new_shape);
  std::int64_t view_d = static_cast<std::int64_t>(new_shape.size()) - 1;
  std::int64_t chunk_base_stride = old_strides.back();
  std::int64_t tensor_numel = 1, view_numel = 1;
  for (std::int64_t tensor_d = static_cast<std::int64_t>(old_shape.size()) - 1; tensor_d >= 0;
       --tensor_d) {
    tensor_numel *= old_shape[tensor_d];
    const bool chunk_ends =
        tensor_d == 0 || (old_shape[tensor_d - 1] != 1 &&
                          old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
      new_strides[view_d] = view_numel * chunk_base_stride;
      view_numel *= new_shape[view_d];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (tensor_d > 0) {
      chunk_base_stride = old_strides[tensor_d - 1];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

// Replaces a single -1 in `shape` by the size that makes numel(shape) == total.
Shape infer_size(Shape shape, std::int64_t total, const Shape& from) {
  std::int64_t known = 1, infer_at = -1;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == -1) {
      DDP_CHECK(infer_at < 0, "shape ", shape_str(shape), " has more than one -1");
      infer_at = static_cast<std::int64_t>(d);
    } else {
      DDP_CHECK(shape[d] >= 0, "invalid size ", shape[d], " in shape ", shape_str(shape));
      known *= shape[d];
    }
  }
  if (infer_at >= 0) {
    DDP_CHECK(known != 0 && total % known == 0, "cannot view ", shape_str(from), " (", total,
              " elements) as ", shape_str(shape));
    shape[infer_at] = total / known;
  }
  DDP_CHECK(numel(shape) == total, "cannot view ", shape_str(from), " (", total, " elements) as ",
            shape_str(shape), " (", numel(shape), " elements)");
  return shape;
}

}  // namespace

Tensor Tensor::view(Shape shape) const {
  shape = infer_size(std::move(shape), numel(), shape_);
  std::optional<Shape> strides = view_strides(shape_, strides_, shape);
  DDP_CHECK(strides.has_value(), "view ", shape_str(shape), " is not possible for a ", describe(),
            " tensor with strides ", shape_str(strides_),
            "\nhint: the elements are not laid out in a compatible order; use reshape(), "
            "which copies, or contiguous() first");
  return Tensor(storage_, std::move(shape), std::move(*strides), offset_, dtype_);
}

Tensor Tensor::reshape(Shape shape) const {
  shape = infer_size(std::move(shape), numel(), shape_);
  if (std::optional<Shape> strides = view_strides(shape_, strides_, shape)) {
    return Tensor(storage_, std::move(shape), std::move(*strides), offset_, dtype_);
  }
  return clone().view(std::move(shape));
}

Tensor Tensor::permute(const std::vector<std::int64_t>& dims) const {
  DDP_CHECK(static_cast<std::int64_t>(dims.size()) == dim(), "permute of a ", describe(),
            " tensor needs ", dim(), " dimensions, got ", dims.size());
  Shape shape(dims.size()), strides(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const std::int64_t d = normalize_dim(dims[i], dim());
    DDP_CHECK(!seen[d], "permute: dimension ", d, " appears twice");
    seen[d] = true;
    shape[i] = shape_[d];
    strides[i] = strides_[d];
  }
  return Tensor(storage_, std::move(shape), std::move(strides), offset_, dtype_);
}

Tensor Tensor::transpose(std::int64_t dim0, std::int64_t dim1) const {
  std::vector<std::int64_t> dims(shape_.size());
  std::iota(dims.begin(), dims.end(), 0);
  const std::int64_t d0 = normalize_dim(dim0, dim()), d1 = normalize_dim(dim1, dim());
  if (dim() == 0) return *this;  // a scalar transposed is itself
  std::swap(dims[d0], dims[d1]);
  return permute(dims);
}

Tensor Tensor::t() const {
  DDP_CHECK(dim() == 2, "t() expects a 2-D tensor, got ", describe());
  return transpose(0, 1);
}

Tensor Tensor::narrow(std::int64_t dim, std::int64_t start, std::int64_t length) const {
  const std::int64_t d = indexed_dim(*this, dim, "narrow");
  // (length <= size - start, not start + length <= size: that sum can overflow.)
  DDP_CHECK(start >= 0 && length >= 0 && start <= shape_[d] && length <= shape_[d] - start,
            "narrow(dim=", d,
            ", start=", start, ", length=", length, ") is out of range for size ", shape_[d],
            " of a ", describe(), " tensor");
  Shape shape = shape_;
  shape[d] = length;
  return Tensor(storage_, std::move(shape), strides_, offset_ + start * strides_[d], dtype_);
}

Tensor Tensor::slice(std::int64_t dim, std::int64_t start, std::int64_t end,
                     std::int64_t step) const {
  const std::int64_t d = indexed_dim(*this, dim, "slice");
  DDP_CHECK(step > 0, "slice step must be positive, got ", step);
  const std::int64_t size = shape_[d];
  // Python semantics: negative indices count from the end; out-of-range ones clamp.
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<std::int64_t>(start, 0, size);
  end = std::clamp<std::int64_t>(end, start, size);
  Shape shape = shape_, strides = strides_;
  shape[d] = (end - start + step - 1) / step;
  strides[d] *= step;
  return Tensor(storage_, std::move(shape), std::move(strides), offset_ + start * strides_[d],
                dtype_);
}

Tensor Tensor::select(std::int64_t dim, std::int64_t index) const {
  const std::int64_t d = indexed_dim(*this, dim, "select");
  DDP_CHECK(index >= -shape_[d] && index < shape_[d], "select: index ", index,
            " is out of range for size ", shape_[d], " of dimension ", d, " of a ", describe(),
            " tensor");
  if (index < 0) index += shape_[d];
  Shape shape = shape_, strides = strides_;
  shape.erase(shape.begin() + d);
  strides.erase(strides.begin() + d);
  return Tensor(storage_, std::move(shape), std::move(strides), offset_ + index * strides_[d],
                dtype_);
}

Tensor Tensor::unsqueeze(std::int64_t dim) const {
  const std::int64_t d = normalize_dim(dim, this->dim() + 1);
  Shape shape = shape_, strides = strides_;
  const std::int64_t stride = d < this->dim() ? shape_[d] * strides_[d] : 1;
  shape.insert(shape.begin() + d, 1);
  strides.insert(strides.begin() + d, stride);
  return Tensor(storage_, std::move(shape), std::move(strides), offset_, dtype_);
}

Tensor Tensor::squeeze(std::int64_t dim) const {
  const std::int64_t d = normalize_dim(dim, this->dim());
  if (this->dim() == 0 || shape_[d] != 1) return *this;  // as in PyTorch: only size-1 ones go
  Shape shape = shape_, strides = strides_;
  shape.erase(shape.begin() + d);
  strides.erase(strides.begin() + d);
  return Tensor(storage_, std::move(shape), std::move(strides), offset_, dtype_);
}

Tensor Tensor::flatten(std::int64_t start_dim, std::int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  const std::int64_t s = normalize_dim(start_dim, dim()), e = normalize_dim(end_dim, dim());
  DDP_CHECK(s <= e, "flatten: start_dim ", s, " is after end_dim ", e);
  Shape shape(shape_.begin(), shape_.begin() + s);
  std::int64_t merged = 1;
  for (std::int64_t d = s; d <= e; ++d) merged *= shape_[d];
  shape.push_back(merged);
  shape.insert(shape.end(), shape_.begin() + e + 1, shape_.end());
  return reshape(std::move(shape));
}

Tensor Tensor::as_strided(Shape shape, Shape strides, std::int64_t offset) const {
  DDP_CHECK(shape.size() == strides.size(), "as_strided: shape ", shape_str(shape), " and strides ",
            shape_str(strides), " have different lengths");
  // The furthest element the view can reach must lie inside the storage; huge strides
  // must not wrap that reach around to a small number.
  std::int64_t last = offset;
  bool overflow = false;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    DDP_CHECK(shape[d] >= 0 && strides[d] >= 0, "as_strided: negative size or stride in ",
              shape_str(shape), " / ", shape_str(strides));
    std::int64_t reach = 0;
    if (shape[d] > 0) {
      overflow = overflow || __builtin_mul_overflow(shape[d] - 1, strides[d], &reach) ||
                 __builtin_add_overflow(last, reach, &last);
    }
  }
  DDP_CHECK(!overflow || ddp::numel(shape) == 0, "as_strided: view ", shape_str(shape),
            " with strides ", shape_str(strides), " reaches past any storage (int64 overflow)");
  if (ddp::numel(shape) == 0) last = offset - 1;  // an empty view reads nothing
  const auto capacity = static_cast<std::int64_t>(storage_->nbytes() / element_size(dtype_));
  DDP_CHECK(offset >= 0 && last < capacity, "as_strided: view ", shape_str(shape), " with strides ",
            shape_str(strides), " at offset ", offset, " reaches element ", last,
            " of a storage of ", capacity, " elements");
  return Tensor(storage_, std::move(shape), std::move(strides), offset, dtype_);
}

// ==== Copies =========================================================================

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::clone() const {
  Tensor out = empty(shape_, {dtype_, device()});
  backend_for(device()).copy(*this, out);
  return out;
}

Tensor Tensor::to(Device device) const {
  if (device == this->device()) return *this;
  const Tensor src = contiguous();
  if (src.is_cuda() && device.is_cuda()) return src.cpu().to(device);  // GPU to GPU via host
  Tensor dst = empty(shape_, {dtype_, device});
  if (dst.numel() == 0) return dst;
  if (device.is_cuda()) {
    backend_for(device).copy_from_host(src.raw_data(), dst);  // host -> GPU
  } else {
    backend_for(src.device()).copy_to_host(src, dst.raw_data());  // GPU -> host
  }
  return dst;
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return *this;
  Tensor out = empty(shape_, {dtype, device()});
  backend_for(device()).copy(*this, out);
  return out;
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  DDP_CHECK(dtype_of<T>() == dtype_, "to_vector<", dtype_name(dtype_of<T>()), ">() of a ",
            describe(), " tensor");
  const Tensor host = contiguous().cpu();
  std::vector<T> values(static_cast<std::size_t>(numel()));
  if (!values.empty()) std::memcpy(values.data(), host.raw_data(), values.size() * sizeof(T));
  return values;
}

template <typename T>
T Tensor::item() const {
  DDP_CHECK(numel() == 1, "item() needs a tensor with one element, got ", describe());
  return to_vector<T>()[0];
}

template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<std::int64_t> Tensor::to_vector<std::int64_t>() const;
template float Tensor::item<float>() const;
template std::int64_t Tensor::item<std::int64_t>() const;

// ==== In place =======================================================================

void detail::check_writable(const Tensor& t, const char* op) {
  for (std::int64_t d = 0; d < t.dim(); ++d) {
    DDP_CHECK(t.strides()[d] != 0 || t.shape()[d] <= 1, "in-place ", op, ": the tensor written to, ",
              t.describe(), ", repeats its elements along dimension ", d,
              " (stride 0, from expand()), so several of them are one memory location",
              "\nhint: write into a copy (clone() or contiguous()) instead");
  }
}

Tensor& Tensor::copy_(const Tensor& src) {
  detail::check_writable(*this, "copy_");
  // Between the host and a GPU, whole contiguous tensors of one dtype go in one transfer
  // straight into this tensor; a page-locked host side (the staging buffers of chapter
  // 05) then runs at the copy engine's full speed. Anything else (broadcasting, strides,
  // a dtype conversion) goes through a temporary on this tensor's device.
  if (src.device() != device() && src.is_cuda() != is_cuda() && src.shape() == shape_ &&
      src.dtype() == dtype_ && src.is_contiguous() && is_contiguous()) {
    if (numel() == 0) return *this;
    if (is_cuda()) {
      backend_for(device()).copy_from_host(src.raw_data(), *this);  // host -> GPU
    } else {
      backend_for(src.device()).copy_to_host(src, raw_data());  // GPU -> host
    }
    return *this;
  }
  Tensor from = src.to(device());
  // Reading and writing the same memory through different strides would read values
  // this copy has already overwritten: copy the source out first.
  if (from.storage() == storage_) from = from.clone();
  backend_for(device()).copy(from.expand(shape_), *this);
  return *this;
}

Tensor& Tensor::fill_(double value) {
  detail::check_writable(*this, "fill_");
  backend_for(device()).fill(*this, value);
  return *this;
}

Tensor& Tensor::add_(const Tensor& other, float alpha) {
  binary_(BinaryOp::Add, *this, alpha == 1.0f ? other : mul(other, alpha));
  return *this;
}
Tensor& Tensor::sub_(const Tensor& other) {
  binary_(BinaryOp::Sub, *this, other);
  return *this;
}
Tensor& Tensor::mul_(const Tensor& other) {
  binary_(BinaryOp::Mul, *this, other);
  return *this;
}
Tensor& Tensor::div_(const Tensor& other) {
  binary_(BinaryOp::Div, *this, other);
  return *this;
}
Tensor& Tensor::add_(float scalar) {
  binary_(BinaryOp::Add, *this, scalar);
  return *this;
}
Tensor& Tensor::mul_(float scalar) {
  binary_(BinaryOp::Mul, *this, scalar);
  return *this;
}

// ==== Creation =======================================================================

namespace {
// Bytes a new contiguous tensor of this shape needs; every size must be >= 0.
// Checked: {1 << 62} floats would wrap to 0 bytes, and the fill would then write
// through a null pointer.
std::size_t creation_bytes(const Shape& shape, DType dtype) {
  for (std::int64_t size : shape) {
    DDP_CHECK(size >= 0, "cannot create a tensor of shape ", shape_str(shape),
              ": sizes must be >= 0");
  }
  const std::optional<std::int64_t> bytes = checked_nbytes(shape, element_size(dtype));
  DDP_CHECK(bytes.has_value(), "cannot create a tensor of shape ", shape_str(shape),
            ": more than 2^63 bytes");
  return static_cast<std::size_t>(*bytes);
}
}  // namespace

Tensor empty(const Shape& shape, TensorOptions options) {
  auto storage = std::make_shared<Storage>(creation_bytes(shape, options.dtype), options.device);
  return Tensor(std::move(storage), shape, contiguous_strides(shape), 0, options.dtype);
}

Tensor empty_pinned(const Shape& shape, DType dtype) {
  return Tensor(Storage::pinned_host(creation_bytes(shape, dtype)), shape,
                contiguous_strides(shape), 0, dtype);
}

Tensor full(const Shape& shape, double value, TensorOptions options) {
  Tensor t = empty(shape, options);
  t.fill_(value);
  return t;
}
Tensor zeros(const Shape& shape, TensorOptions options) { return full(shape, 0.0, options); }
Tensor ones(const Shape& shape, TensorOptions options) { return full(shape, 1.0, options); }
Tensor scalar_tensor(double value, TensorOptions options) { return full({}, value, options); }

Tensor arange(double start, double end, double step, TensorOptions options) {
  DDP_CHECK(step != 0.0, "arange: step must not be zero");
  const double count = std::ceil((end - start) / step);
  const std::int64_t n = count > 0 ? static_cast<std::int64_t>(count) : 0;
  Tensor out = empty({n}, options);
  if (n > 0) backend_for(options.device).arange(out, start, step);
  return out;
}

Tensor arange(std::int64_t end, TensorOptions options) {
  return arange(0.0, static_cast<double>(end), 1.0, options);
}

namespace {
template <typename T>
Tensor from_host(std::span<const T> values, const Shape& shape, Device device) {
  DDP_CHECK(static_cast<std::int64_t>(values.size()) == numel(shape), "from_data: got ",
            values.size(), " values for shape ", shape_str(shape), ", which holds ", numel(shape));
  Tensor out = empty(shape, {dtype_of<T>(), device});
  if (!values.empty()) backend_for(device).copy_from_host(values.data(), out);
  return out;
}
}  // namespace

Tensor from_data(std::span<const float> values, const Shape& shape, Device device) {
  return from_host(values, shape, device);
}
Tensor from_data(std::span<const std::int64_t> values, const Shape& shape, Device device) {
  return from_host(values, shape, device);
}

Tensor empty_like(const Tensor& t) { return empty(t.shape(), {t.dtype(), t.device()}); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), {t.dtype(), t.device()}); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), {t.dtype(), t.device()}); }

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  os << "tensor(" << t.describe();
  if (!t.defined()) return os << ')';
  constexpr std::int64_t kMaxShown = 32;
  os << ", values=[";
  const std::int64_t shown = std::min(t.numel(), kMaxShown);
  const Tensor flat = t.reshape({-1}).narrow(0, 0, shown);
  if (t.dtype() == DType::Float32) {
    const auto values = flat.to_vector<float>();
    for (std::int64_t i = 0; i < shown; ++i) os << (i ? ", " : "") << values[i];
  } else {
    const auto values = flat.to_vector<std::int64_t>();
    for (std::int64_t i = 0; i < shown; ++i) os << (i ? ", " : "") << values[i];
  }
  if (t.numel() > shown) os << ", ...";
  return os << "])";
}

}  // namespace ddp
