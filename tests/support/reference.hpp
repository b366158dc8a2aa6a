// Independent references for the tensor tests (chapters 00-01): plain loops over
// std::vector with explicit index arithmetic, accumulating in double.
//
// Nothing here calls the library's ops or views. A tensor is read straight from its
// Storage through (shape, strides, offset), and inputs with unusual layouts are built
// with the Tensor constructor over a Storage we fill ourselves. So when a test compares
// `ddp::add(a, b)` with `ref::zip(...)`, the two sides share only the metadata fields.
// Not here: anything on a GPU (chapter 02 compares the GPU with the CPU instead).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "tensor/dtype.hpp"
#include "tensor/op_math.hpp"
#include "tensor/shape.hpp"
#include "tensor/tensor.hpp"

namespace ddp::ref {

// ---- A row-major host array -----------------------------------------------------------
// The reference's own picture of a tensor: its shape and its elements in row-major
// order, as doubles (exact for float32 and for int64 up to 2^53).
struct Array {
  Shape shape;
  std::vector<double> v;
};

std::int64_t count(const Shape& shape);       // product of sizes, 1 for ()
Shape row_major_strides(const Shape& shape);  // (2,3,4) -> (12,4,1)
std::int64_t ravel(const std::vector<std::int64_t>& index, const Shape& shape);
std::string index_str(const std::vector<std::int64_t>& index);  // "(1, 0, 2)"
std::string shape_text(const Shape& shape);                     // "(2, 3)", "(4,)", "()"

// Calls f(index) for every multi-index of `shape` in row-major order: once, with an
// empty index, for a 0-d shape; never when a size is 0.
template <typename F>
void for_each_index(const Shape& shape, F&& f) {
  for (std::int64_t size : shape) {
    if (size == 0) return;
  }
  std::vector<std::int64_t> index(shape.size(), 0);
  for (;;) {
    f(index);
    std::size_t d = shape.size();
    for (;;) {
      if (d == 0) return;
      --d;
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
}

// ---- Between tensors and arrays -------------------------------------------------------
// Reads a CPU tensor element by element at storage index offset + sum(i_d * stride_d),
// from Storage::data(); throws std::out_of_range when an index leaves the storage.
Array read(const Tensor& t);
// A tensor holding `values` at an explicit layout, in a Storage of its own. Storage
// slots that no element uses hold `kPoison`, so a kernel that reads a gap shows up.
inline constexpr double kPoison = -7777.0;
Tensor make_tensor(const Array& values, const Shape& strides, std::int64_t offset,
                   DType dtype = DType::Float32);
Tensor make_contiguous(const Array& values, DType dtype = DType::Float32);
// A random non-contiguous layout for `shape`: dimensions in a shuffled order, gaps
// between rows, a non-zero offset. Strides are in elements.
struct Layout {
  Shape strides;
  std::int64_t offset;
};
Layout random_layout(std::mt19937& rng, const Shape& shape);
// The storage slot of element `index` of `t`, by the stride formula.
std::int64_t storage_index(const Tensor& t, const std::vector<std::int64_t>& index);
// Raw storage contents of a CPU float32 / int64 tensor, every slot (views included).
std::vector<float> storage_floats(const Tensor& t);

// ---- Random inputs --------------------------------------------------------------------
// Sizes: 0 with probability 1/10, 1 with 1/4, otherwise 2..max_size.
Shape random_shape(std::mt19937& rng, int min_dims, int max_dims, std::int64_t max_size);
// A shape that broadcasts with `shape`: some leading dims dropped, some sizes set to 1,
// and some of `shape`'s 1s replaced by a larger size (so both sides broadcast).
Shape random_broadcast_partner(std::mt19937& rng, const Shape& shape);
Array random_array(std::mt19937& rng, const Shape& shape, double low, double high);
// Whole numbers in [low, high]: ties for max/argmax, exact sums, int64 tensors.
Array random_ints(std::mt19937& rng, const Shape& shape, std::int64_t low, std::int64_t high);

// ---- Naive operations -----------------------------------------------------------------
// NumPy broadcasting, aligned from the right; nullopt when the shapes do not broadcast.
std::optional<Shape> broadcast_shape(const Shape& a, const Shape& b);
// out[i] = x[j] where j is i with broadcast dimensions (size 1 in x) pinned to 0.
Array broadcast_to(const Array& x, const Shape& shape);
Array map(const Array& x, const std::function<double(double)>& f);
// What BinaryOp `op` means, in double: a + b, ..., std::pow(a, b), 1/0 for comparisons.
double apply(BinaryOp op, double a, double b);
Array zip(const Array& a, const Array& b, const std::function<double(double, double)>& f);

enum class Reduce { Sum, Mean, Max, Min, ArgMax };
// Over dimension `dim` (0 <= dim < ndim, or dim 0 of a 0-d array). ArgMax: first max.
Array reduce_dim(const Array& x, std::int64_t dim, bool keepdim, Reduce op);
Array reduce_all(const Array& x, Reduce op);  // 0-d result
// The sum of x over the dimensions that broadcasting `shape` up to x.shape added.
Array sum_to(const Array& x, const Shape& shape);
// (M, K) @ (K, N) or (B, M, K) @ (B, K, N), triple loop in double.
Array matmul(const Array& a, const Array& b);

Array permute(const Array& x, const std::vector<std::int64_t>& dims);
Array slice(const Array& x, std::int64_t dim, std::int64_t start, std::int64_t end,
            std::int64_t step);
Array select(const Array& x, std::int64_t dim, std::int64_t index);
Array with_shape(const Array& x, const Shape& shape);  // same row-major values

// ---- Comparison -----------------------------------------------------------------------
// |got - want| <= atol + rtol * max(|want|, scale): `scale` lets a sum be judged
// against the sum of magnitudes that produced it (cancellation is not an error).
struct Tol {
  double rtol;
  double atol;
};
inline constexpr Tol kExact{0.0, 0.0};
inline constexpr Tol kFloat{2e-6, 1e-6};

// "" when `got` matches `want` (shape and every element; NaN matches NaN), otherwise
// a message naming the first mismatching element, its index, both values and the count
// of mismatches. Use as CHECK(ref::mismatch(...) == "") so the message is printed.
std::string mismatch(const Tensor& got, const Array& want, Tol tol,
                     const std::vector<double>& scale = {});
std::string mismatch(const Array& got, const Array& want, Tol tol,
                     const std::vector<double>& scale = {});
// "" when both have the same shape and bit-identical float32 elements.
std::string bitwise_mismatch(const Tensor& a, const Tensor& b);

// Sets the library's thread count for a scope and restores it afterwards.
class ThreadCountGuard {
 public:
  explicit ThreadCountGuard(int n);
  ~ThreadCountGuard();
  ThreadCountGuard(const ThreadCountGuard&) = delete;
  ThreadCountGuard& operator=(const ThreadCountGuard&) = delete;

 private:
  int saved_;
};

}  // namespace ddp::ref
