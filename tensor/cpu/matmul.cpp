// Matrix multiply on the CPU with Eigen. Chapter 01. The CUDA twin is
// tensor/cuda/matmul.cu (cuBLAS).
//
// Eigen::Map puts an Eigen matrix "over" memory we already own, so nothing is copied:
// a row-major matrix is Map<RowMajor> with the row stride as its outer stride, and a
// transposed view (a.t()) is simply the same memory read as column-major. Eigen then
// runs its blocked, vectorised GEMM, multi-threaded through OpenMP (threads.hpp).
#include <Eigen/Core>

#include "tensor/cpu/kernels.hpp"

namespace ddp::cpu {

namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ColMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
using Stride = Eigen::OuterStride<>;

// Calls f(matrix) with matrix `batch` of the 3-D tensor t mapped as row- or
// column-major, whichever its strides are (ops.cpp made sure it is one of the two).
template <typename F>
void with_matrix(const Tensor& t, std::int64_t batch, F&& f) {
  const float* p = t.data<float>() + batch * t.strides()[0];
  const std::int64_t rows = t.shape()[1], cols = t.shape()[2];
  const std::int64_t rs = t.strides()[1], cs = t.strides()[2];
  if ((cs == 1 || cols == 1) && rs >= std::max<std::int64_t>(cols, 1)) {
    f(Eigen::Map<const RowMajor, 0, Stride>(p, rows, cols, Stride(rs)));
  } else {
    f(Eigen::Map<const ColMajor, 0, Stride>(p, rows, cols, Stride(cs)));
  }
}

}  // namespace

// a: (B, M, K), b: (B, K, N), out: contiguous (B, M, N).
void matmul(const Tensor& a, const Tensor& b, const Tensor& out) {
  const std::int64_t batch = out.shape()[0], m = out.shape()[1], n = out.shape()[2];
  for (std::int64_t i = 0; i < batch; ++i) {
    Eigen::Map<RowMajor> c(out.data<float>() + i * m * n, m, n);
    with_matrix(a, i, [&](const auto& ma) {
      with_matrix(b, i, [&](const auto& mb) { c.noalias() = ma * mb; });
    });
  }
}

}  // namespace ddp::cpu
