// Shape arithmetic (see shape.hpp).
#include "tensor/shape.hpp"

#include <algorithm>
#include <sstream>

#include "base/error.hpp"

namespace ddp {

std::int64_t numel(const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t size : shape) n *= size;
  return n;
}

std::optional<std::int64_t> checked_nbytes(const Shape& shape, std::size_t element_bytes) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  auto bytes = static_cast<std::int64_t>(element_bytes);
  for (std::int64_t size : shape) {
    if (__builtin_mul_overflow(bytes, size, &bytes)) return std::nullopt;
  }
  return bytes;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  std::int64_t stride = 1;
  for (std::size_t d = shape.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= std::max<std::int64_t>(shape[d], 1);
  }
  return strides;
}

std::string shape_str(const Shape& shape) {
  std::ostringstream os;
  os << '(';
  for (std::size_t d = 0; d < shape.size(); ++d) os << (d ? ", " : "") << shape[d];
  if (shape.size() == 1) os << ',';
  os << ')';
  return os.str();
}

std::int64_t normalize_dim(std::int64_t dim, std::int64_t ndim) {
  const std::int64_t lo = ndim == 0 ? -1 : -ndim, hi = ndim == 0 ? 0 : ndim - 1;
  DDP_CHECK(dim >= lo && dim <= hi, "dimension ", dim, " is out of range for a tensor with ",
            ndim, " dimensions (expected ", lo, " to ", hi, ")");
  return dim < 0 ? dim + std::max<std::int64_t>(ndim, 1) : dim;
}

}  // namespace ddp
