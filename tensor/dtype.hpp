// Element types of a tensor: float32 for values, int64 for labels and indices.
// Chapter 01. Deliberately only two: every op is written once per type it supports,
// and two types are enough to train a network (PyTorch's `long` labels included).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace ddp {

enum class DType : std::uint8_t { Float32, Int64 };

constexpr std::size_t element_size(DType dtype) {
  return dtype == DType::Float32 ? sizeof(float) : sizeof(std::int64_t);
}

constexpr std::string_view dtype_name(DType dtype) {
  return dtype == DType::Float32 ? "float32" : "int64";
}

// dtype_of<float>() == DType::Float32; a compile error for any other C++ type.
template <typename T>
constexpr DType dtype_of() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, std::int64_t>,
                "ddp tensors hold float or std::int64_t");
  return std::is_same_v<T, float> ? DType::Float32 : DType::Int64;
}

}  // namespace ddp
