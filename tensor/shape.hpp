// Shapes and strides: the arithmetic behind views and broadcasting. Chapter 01.
//
// A tensor's element (i0, i1, ..., ik) lives at storage index
//     offset + i0*stride[0] + i1*stride[1] + ... + ik*stride[k].
// Strides are counted in ELEMENTS, not bytes, everywhere in ddp.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ddp {

using Shape = std::vector<std::int64_t>;  // sizes, or strides (in elements)

// Product of the sizes; 1 for a 0-d (scalar) shape.
std::int64_t numel(const Shape& shape);
// Bytes of a contiguous tensor of `shape` (every size >= 0) with elements of
// `element_bytes`, or nothing when that passes 2^63 - 1. A shape with a 0 holds 0 bytes,
// however large its other sizes.
std::optional<std::int64_t> checked_nbytes(const Shape& shape, std::size_t element_bytes);

// Row-major strides: the last dimension is contiguous. (2,3,4) -> (12,4,1).
Shape contiguous_strides(const Shape& shape);

// "(2, 3, 4)", for error messages.
std::string shape_str(const Shape& shape);

// NumPy broadcasting: align from the right; each pair of sizes must be equal or one
// of them 1. (8,1,6,1) and (7,1,5) -> (8,7,6,5). Throws ddp::Error naming both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b);

// Python-style dimension index: -1 is the last. Throws when out of [-ndim, ndim).
std::int64_t normalize_dim(std::int64_t dim, std::int64_t ndim);

}  // namespace ddp
