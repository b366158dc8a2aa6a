// Tensor math (see ops.hpp): checks, broadcasting and result allocation, then one call
// into the backend of the inputs' device. Chapter 01.
//
// Every op follows the same four steps, which is why they are short:
//   1. check dtypes and devices, naming both tensors when they disagree;
//   2. work out the result's shape (broadcast_shapes, or the reduced shape);
//   3. allocate the result on the inputs' device;
//   4. ask that device's Backend to fill it (tensor/cpu/ or tensor/cuda/).
#include "tensor/ops.hpp"

#include <cmath>
#include <limits>

#include "tensor/backend.hpp"

namespace ddp {

namespace {

Backend& backend_of(const Tensor& t) { return backend_for(t.device()); }

void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  DDP_CHECK(a.device() == b.device(), op, ": expected both tensors on the same device, got ",
            a.describe(), " and ", b.describe(), "\nhint: move one with .to(device)");
}

void check_binary_dtypes(BinaryOp op, const Tensor& a, const Tensor& b) {
  DDP_CHECK(a.dtype() == b.dtype(), op_name(op), ": expected tensors of one dtype, got ",
            a.describe(), " and ", b.describe(), "\nhint: convert one with .to(DType::...)");
  DDP_CHECK(a.dtype() == DType::Float32 || supports_int64(op), op_name(op),
            " is not defined for int64 tensors (got ", a.describe(), ")");
}

DType binary_result_dtype(BinaryOp op, DType input) {
  return is_comparison(op) ? DType::Float32 : input;
}

// An int64 tensor takes only a whole-number scalar: the op runs in int64 (no promotion
// to float as in PyTorch), so 0.5 would be cut to 0 and `x < 0.5` answer `x < 0`.
void check_int64_scalar(BinaryOp op, const Tensor& a, double scalar) {
  if (a.dtype() != DType::Int64) return;
  DDP_CHECK(std::trunc(scalar) == scalar && std::abs(scalar) < 9.2e18, op_name(op), " of ",
            a.describe(), " with ", scalar, ": an int64 op takes a whole-number scalar",
            "\nhint: convert the tensor first, x.to(DType::Float32)");
}

// True when `b` reads memory that `out` writes, through a different layout: then an
// in-place op would read elements it has already overwritten.
bool overlaps_differently(const Tensor& out, const Tensor& b) {
  return out.storage() == b.storage() &&
         (out.offset() != b.offset() || out.strides() != b.strides() || out.shape() != b.shape());
}

}  // namespace

// ==== Elementwise ====================================================================

Tensor unary(UnaryOp op, const Tensor& x) {
  DDP_CHECK(x.dtype() == DType::Float32, op_name(op), " expects a float32 tensor, got ",
            x.describe());
  Tensor out = empty(x.shape(), {DType::Float32, x.device()});
  if (out.numel() > 0) backend_of(x).unary(op, x, out);
  return out;
}

Tensor neg(const Tensor& x) { return unary(UnaryOp::Neg, x); }
Tensor exp(const Tensor& x) { return unary(UnaryOp::Exp, x); }
Tensor log(const Tensor& x) { return unary(UnaryOp::Log, x); }
Tensor sqrt(const Tensor& x) { return unary(UnaryOp::Sqrt, x); }
Tensor rsqrt(const Tensor& x) { return unary(UnaryOp::Rsqrt, x); }
Tensor abs(const Tensor& x) { return unary(UnaryOp::Abs, x); }
Tensor relu(const Tensor& x) { return unary(UnaryOp::Relu, x); }
Tensor tanh(const Tensor& x) { return unary(UnaryOp::Tanh, x); }
Tensor sigmoid(const Tensor& x) { return unary(UnaryOp::Sigmoid, x); }
Tensor square(const Tensor& x) { return unary(UnaryOp::Square, x); }

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  check_same_device(op_name(op), a, b);
  check_binary_dtypes(op, a, b);
  const Shape shape = broadcast_shapes(a.shape(), b.shape());
  Tensor out = empty(shape, {binary_result_dtype(op, a.dtype()), a.device()});
  if (out.numel() > 0) backend_of(a).binary(op, a.expand(shape), b.expand(shape), out);
  return out;
}

Tensor binary(BinaryOp op, const Tensor& a, double scalar) {
  DDP_CHECK(a.dtype() == DType::Float32 || supports_int64(op), op_name(op),
            " is not defined for int64 tensors (got ", a.describe(), ")");
  check_int64_scalar(op, a, scalar);
  Tensor out = empty(a.shape(), {binary_result_dtype(op, a.dtype()), a.device()});
  if (out.numel() > 0) backend_of(a).binary_scalar(op, a, scalar, out);
  return out;
}

void binary_(BinaryOp op, const Tensor& out, const Tensor& b) {
  detail::check_writable(out, op_name(op));
  check_same_device(op_name(op), out, b);
  check_binary_dtypes(op, out, b);
  DDP_CHECK(!is_comparison(op), op_name(op), " cannot be done in place");
  DDP_CHECK(broadcast_shapes(out.shape(), b.shape()) == out.shape(), "in-place ", op_name(op),
            ": the right-hand side ", b.describe(), " cannot be broadcast to the shape ",
            shape_str(out.shape()), " of the tensor being updated");
  if (out.numel() == 0) return;
  const Tensor rhs = overlaps_differently(out, b) ? b.clone() : b;
  backend_of(out).binary(op, out, rhs.expand(out.shape()), out);
}

void binary_(BinaryOp op, const Tensor& out, double scalar) {
  detail::check_writable(out, op_name(op));
  DDP_CHECK(!is_comparison(op), op_name(op), " cannot be done in place");
  DDP_CHECK(out.dtype() == DType::Float32 || supports_int64(op), op_name(op),
            " is not defined for int64 tensors (got ", out.describe(), ")");
  check_int64_scalar(op, out, scalar);
  if (out.numel() > 0) backend_of(out).binary_scalar(op, out, scalar, out);
}

Tensor add(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Div, a, b); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Minimum, a, b); }
Tensor pow(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Pow, a, b); }
Tensor eq(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Ge, a, b); }

Tensor add(const Tensor& a, double s) { return binary(BinaryOp::Add, a, s); }
Tensor sub(const Tensor& a, double s) { return binary(BinaryOp::Sub, a, s); }
Tensor mul(const Tensor& a, double s) { return binary(BinaryOp::Mul, a, s); }
Tensor div(const Tensor& a, double s) { return binary(BinaryOp::Div, a, s); }
Tensor pow(const Tensor& a, double s) { return binary(BinaryOp::Pow, a, s); }
Tensor maximum(const Tensor& a, double s) { return binary(BinaryOp::Maximum, a, s); }
Tensor minimum(const Tensor& a, double s) { return binary(BinaryOp::Minimum, a, s); }

Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, double s) { return add(a, s); }
Tensor operator-(const Tensor& a, double s) { return sub(a, s); }
Tensor operator*(const Tensor& a, double s) { return mul(a, s); }
Tensor operator/(const Tensor& a, double s) { return div(a, s); }
Tensor operator+(double s, const Tensor& a) { return add(a, s); }
Tensor operator-(double s, const Tensor& a) { return add(neg(a), s); }
Tensor operator*(double s, const Tensor& a) { return mul(a, s); }

// ==== Reductions =====================================================================

namespace {

// Reduces dimension `dim` of x. The backend sees x as (outer, n, inner): everything
// before `dim`, `dim` itself, everything after. (2, 3, 4) over dim 1 is (2, 3, 4) with
// outer 2, n 3, inner 4; the result is (outer, inner) = (2, 4).
Tensor reduce(Reduction op, const Tensor& x, std::int64_t dim, bool keepdim) {
  const std::int64_t d = normalize_dim(dim, x.dim());
  const std::int64_t n = x.dim() == 0 ? 1 : x.shape()[d];
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t i = 0; i < d; ++i) outer *= x.shape()[i];
  for (std::int64_t i = d + 1; i < x.dim(); ++i) inner *= x.shape()[i];

  Shape out_shape = x.shape();
  if (x.dim() > 0) {
    if (keepdim) {
      out_shape[d] = 1;
    } else {
      out_shape.erase(out_shape.begin() + d);
    }
  }
  const DType out_dtype = op == Reduction::ArgMax ? DType::Int64 : x.dtype();
  if (n == 0) {
    DDP_CHECK(op == Reduction::Sum, op_name(op), " over dimension ", d, " of a ", x.describe(),
              " tensor: the dimension is empty, so there is no ", op_name(op));
    return zeros(out_shape, {out_dtype, x.device()});
  }
  Tensor out = empty(out_shape, {out_dtype, x.device()});
  if (out.numel() > 0) backend_of(x).reduce(op, x.contiguous(), outer, n, inner, out);
  return out;
}

Tensor reduce_all(Reduction op, const Tensor& x) { return reduce(op, x.reshape({-1}), 0, false); }

}  // namespace

Tensor sum(const Tensor& x) { return reduce_all(Reduction::Sum, x); }
Tensor sum(const Tensor& x, std::int64_t dim, bool keepdim) {
  return reduce(Reduction::Sum, x, dim, keepdim);
}
Tensor max(const Tensor& x) { return reduce_all(Reduction::Max, x); }
Tensor max(const Tensor& x, std::int64_t dim, bool keepdim) {
  return reduce(Reduction::Max, x, dim, keepdim);
}
Tensor min(const Tensor& x) { return reduce_all(Reduction::Min, x); }
Tensor min(const Tensor& x, std::int64_t dim, bool keepdim) {
  return reduce(Reduction::Min, x, dim, keepdim);
}
Tensor argmax(const Tensor& x, std::int64_t dim, bool keepdim) {
  return reduce(Reduction::ArgMax, x, dim, keepdim);
}

Tensor mean(const Tensor& x) {
  DDP_CHECK(x.dtype() == DType::Float32, "mean expects a float32 tensor, got ", x.describe());
  const double n = static_cast<double>(x.numel());
  return div(sum(x), n > 0 ? n : std::numeric_limits<double>::quiet_NaN());
}

Tensor mean(const Tensor& x, std::int64_t dim, bool keepdim) {
  DDP_CHECK(x.dtype() == DType::Float32, "mean expects a float32 tensor, got ", x.describe());
  const std::int64_t n = x.dim() == 0 ? 1 : x.size(dim);
  return div(sum(x, dim, keepdim),
             n > 0 ? static_cast<double>(n) : std::numeric_limits<double>::quiet_NaN());
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  DDP_CHECK(shape.size() <= x.shape().size() && broadcast_shapes(shape, x.shape()) == x.shape(),
            "sum_to: ", shape_str(shape), " does not broadcast to ", x.describe(),
            ", so x cannot be summed down to it");
  Tensor result = x;
  const std::size_t lead = x.shape().size() - shape.size();
  for (std::size_t i = 0; i < lead; ++i) result = sum(result, 0, false);  // new leading dims
  for (std::size_t d = 0; d < shape.size(); ++d) {  // dims that were size 1 and repeated
    if (shape[d] == 1 && result.shape()[d] != 1)
      result = sum(result, static_cast<std::int64_t>(d), true);
  }
  return result.reshape(shape);
}

// ==== Matmul =========================================================================

namespace {

// Makes each (rows, cols) matrix of a 3-D tensor row-major or column-major with a
// valid leading dimension (what Eigen and cuBLAS read without copying); copies when the
// view is neither, e.g. a slice with a step.
Tensor as_blas_layout(const Tensor& t) {
  const std::int64_t rows = t.shape()[1], cols = t.shape()[2];
  const std::int64_t rs = t.strides()[1], cs = t.strides()[2];
  const bool row_major = (cs == 1 || cols == 1) && rs >= std::max<std::int64_t>(cols, 1);
  const bool col_major = (rs == 1 || rows == 1) && cs >= std::max<std::int64_t>(rows, 1);
  return row_major || col_major ? t : t.contiguous();
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_same_device("matmul", a, b);
  DDP_CHECK(a.dtype() == DType::Float32 && b.dtype() == DType::Float32,
            "matmul expects float32 tensors, got ", a.describe(), " and ", b.describe());
  DDP_CHECK((a.dim() == 2 || a.dim() == 3) && (b.dim() == 2 || b.dim() == 3),
            "matmul expects 2-D or 3-D (batched) tensors, got ", a.describe(), " and ",
            b.describe());
  const std::int64_t k = a.size(-1);
  DDP_CHECK(b.size(-2) == k, "matmul: shapes ", shape_str(a.shape()), " and ", shape_str(b.shape()),
            " do not fit: a has ", k, " columns but b has ", b.size(-2), " rows");
  // Lift both to (batch, rows, cols); a 2-D operand is shared by the whole batch.
  Tensor a3 = a.dim() == 2 ? a.unsqueeze(0) : a;
  Tensor b3 = b.dim() == 2 ? b.unsqueeze(0) : b;
  const std::int64_t batch_a = a3.shape()[0], batch_b = b3.shape()[0];
  DDP_CHECK(batch_a == batch_b || batch_a == 1 || batch_b == 1, "matmul: batch sizes ", batch_a,
            " and ", batch_b, " differ (", shape_str(a.shape()), " and ", shape_str(b.shape()),
            ")");
  const std::int64_t batch = batch_a == 1 ? batch_b : batch_a;  // (0 with 1 is 0, not 1)
  const std::int64_t m = a3.shape()[1], n = b3.shape()[2];
  a3 = as_blas_layout(a3).expand({batch, m, k});
  b3 = as_blas_layout(b3).expand({batch, k, n});

  Tensor out = empty({batch, m, n}, {DType::Float32, a.device()});
  if (out.numel() > 0) {
    if (k == 0) {
      out.zero_();
    } else {
      backend_of(a).matmul(a3, b3, out);
    }
  }
  return a.dim() == 2 && b.dim() == 2 ? out.view({m, n}) : out;
}

}  // namespace ddp
