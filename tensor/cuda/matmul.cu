// Matrix multiply on a GPU, twice: with cuBLAS (what ddp::matmul uses; Note [cuBLAS is
// column-major]) and by hand with shared-memory tiles (matmul_tiled.hpp; Note [Tiled
// matmul]), the kernel to read. Chapter 02. The CPU twin is tensor/cpu/matmul.cpp.
// Not here: tensor cores (TF32 is switched off in backend.cu, so the GPU and the CPU
// round alike), half precision, or a tuned kernel that would compete with cuBLAS.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "tensor/cuda/kernels.hpp"
#include "tensor/cuda/matmul_tiled.hpp"
#include "tensor/cuda/runtime.hpp"
#include "base/error.hpp"
#include "tensor/tensor.hpp"

namespace ddp::cuda {

// ==== cuBLAS ============================================================================

// Note [cuBLAS is column-major]
// cuBLAS follows Fortran BLAS: a matrix is column-major, element (i, j) at
// ptr[i + j * ld], where the "leading dimension" ld is the distance between columns.
// Our tensors are row-major. The trick that needs no copy: a row-major (R, C) matrix
// with row stride ld IS a column-major (C, R) matrix with leading dimension ld, i.e.
// its transpose. So instead of out = a @ b we ask cuBLAS for
//
//     out^T = b^T @ a^T          (N, M) = (N, K) @ (K, M), all column-major
//
// and the column-major out^T it writes is exactly the row-major out we wanted.
//
// A transposed view (a.t()) is column-major already; for it, we hand cuBLAS the memory
// as it is and set the transpose flag instead. Either way no element moves:
//
//     our matrix (R, C)    strides       cuBLAS sees           op    ld
//     row-major            (ld, 1)       (C, R) = ours^T       N     row stride
//     column-major         (1, ld)       (R, C) = ours         T     column stride
//
// Batches use cublasSgemmStridedBatched: matrix i starts batch_stride * i elements
// further on; a stride of 0 reuses one matrix for the whole batch (a 2-D weight times
// a 3-D input), which is how ops.cpp passes a shared operand.
namespace {

struct BlasOperand {
  cublasOperation_t op;
  std::int64_t ld;
};

// How cuBLAS should read matrix `t[batch]` of a (B, R, C) tensor so that op(X) = t^T.
// The layouts mirror tensor/cpu/matmul.cpp (and ops.cpp's as_blas_layout guarantees one).
BlasOperand blas_operand(const Tensor& t) {
  const std::int64_t rows = t.shape()[1], cols = t.shape()[2];
  const std::int64_t rs = t.strides()[1], cs = t.strides()[2];
  if ((cs == 1 || cols == 1) && rs >= std::max<std::int64_t>(cols, 1)) {
    return {CUBLAS_OP_N, rs};  // row-major: X = t^T, (cols, rows), ld = row stride
  }
  if ((rs == 1 || rows == 1) && cs >= std::max<std::int64_t>(rows, 1)) {
    return {CUBLAS_OP_T, cs};  // column-major: X = t, (rows, cols), ld = column stride
  }
  DDP_FAIL("matmul on the GPU: a ", t.describe(), " matrix with strides ", shape_str(t.strides()),
           " is neither row- nor column-major",
           "\nhint: ops.cpp should have made it contiguous (as_blas_layout)");
}

int as_int(std::int64_t v, const char* what) {
  DDP_CHECK(v <= INT_MAX, "matmul on the GPU: ", what, " = ", v,
            " does not fit cuBLAS's 32-bit sizes");
  return static_cast<int>(v);
}

}  // namespace

// a: (B, M, K), b: (B, K, N), out: contiguous (B, M, N).
void matmul_cublas(cublasHandle_t handle, const Tensor& a, const Tensor& b, const Tensor& out) {
  DDP_CHECK(a.dtype() == DType::Float32 && b.dtype() == DType::Float32 &&
                out.dtype() == DType::Float32 && out.is_contiguous(),
            "matmul on the GPU expects float32 inputs and a contiguous float32 output, got ",
            a.describe(), ", ", b.describe(), " and ", out.describe());
  const std::int64_t batch = out.shape()[0], m = out.shape()[1], n = out.shape()[2];
  const std::int64_t k = a.shape()[2];
  if (out.numel() == 0) return;
  DDP_CHECK(k > 0, "matmul on the GPU: K = 0 should have been handled by the caller");
  const BlasOperand ob = blas_operand(b);  // cuBLAS's first operand:  b^T, (N, K)
  const BlasOperand oa = blas_operand(a);  // cuBLAS's second operand: a^T, (K, M)
  const float alpha = 1.0f, beta = 0.0f;
  // cuBLAS's (m, n, k) are the column-major out^T's: (N, M, K).
  DDP_CHECK_CUBLAS(cublasSgemmStridedBatched(
      handle, ob.op, oa.op, as_int(n, "N"), as_int(m, "M"), as_int(k, "K"), &alpha,
      static_cast<const float*>(b.raw_data()), as_int(ob.ld, "ld(b)"), b.strides()[0],
      static_cast<const float*>(a.raw_data()), as_int(oa.ld, "ld(a)"), a.strides()[0], &beta,
      static_cast<float*>(out.raw_data()), as_int(n, "N"), m * n, as_int(batch, "batch")));
}

// ==== Tiled matmul, by hand =============================================================

// Note [Tiled matmul]
// The naive kernel gives each thread one out[r][c] and lets it read a whole row of a
// and a whole column of b from global memory: 2K loads per 2K flops, and the GPU waits
// on memory. Tiling reuses each load: a block of 32 x 32 threads computes a 32 x 32 tile
// of out, and walks along K in steps of 32. At each step the block copies one 32 x 32
// tile of a and one of b into shared memory (every thread loads one element of each),
// waits (__syncthreads), and then every thread does 32 multiply-adds from shared memory:
//
//          K ->                          N ->
//        +----+----+----+             +----+----+
//   M    | A0 | A1 | A2 |        K    | B0 |    |     out tile (r, c) =
//   |    +----+----+----+        |    +----+----+       A0 B0 + A1 B1 + A2 B2
//   v                            v    | B1 |    |
//                                     +----+----+
//                                     | B2 |    |
//                                     +----+----+
//
// Each element of a and b is now read from global memory N/32 and M/32 times instead
// of N and M times. Tiles that stick out of the matrix (M, N, K not multiples of 32) are
// padded with zeros, which add nothing. The second __syncthreads keeps a fast thread
// from overwriting the tiles while a slow one is still reading them.
// The inner loop reads tile_a[ty][k] (the same address for a whole warp: a broadcast)
// and tile_b[k][tx] (consecutive addresses: one per memory bank), so shared memory
// serves a warp without conflicts.
namespace {

constexpr int kTile = 32;

__global__ void matmul_tiled_kernel(const float* a, const float* b, float* out, int m, int n,
                                    int k) {
  __shared__ float tile_a[kTile][kTile];
  __shared__ float tile_b[kTile][kTile];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int row = static_cast<int>(blockIdx.y) * kTile + ty;  // of out and a
  const int col = static_cast<int>(blockIdx.x) * kTile + tx;  // of out and b

  float acc = 0.0f;
  for (int k0 = 0; k0 < k; k0 += kTile) {
    tile_a[ty][tx] = row < m && k0 + tx < k ? a[std::int64_t{row} * k + k0 + tx] : 0.0f;
    tile_b[ty][tx] = k0 + ty < k && col < n ? b[std::int64_t{k0 + ty} * n + col] : 0.0f;
    __syncthreads();  // the tiles are complete
#pragma unroll
    for (int kk = 0; kk < kTile; ++kk) acc += tile_a[ty][kk] * tile_b[kk][tx];
    __syncthreads();  // everyone is done with the tiles before they are overwritten
  }
  if (row < m && col < n) out[std::int64_t{row} * n + col] = acc;
}

}  // namespace

void matmul_tiled(const Tensor& a, const Tensor& b, const Tensor& out) {
  DDP_CHECK(a.dim() == 2 && b.dim() == 2 && out.dim() == 2 && a.size(1) == b.size(0) &&
                out.size(0) == a.size(0) && out.size(1) == b.size(1),
            "matmul_tiled expects a: (M, K), b: (K, N), out: (M, N), got ", a.describe(), ", ",
            b.describe(), " and ", out.describe());
  DDP_CHECK(a.is_cuda() && b.device() == a.device() && out.device() == a.device(),
            "matmul_tiled expects all three tensors on one GPU, got ", a.describe(), ", ",
            b.describe(), " and ", out.describe());
  DDP_CHECK(
      a.dtype() == DType::Float32 && b.dtype() == DType::Float32 && out.dtype() == DType::Float32,
      "matmul_tiled expects float32 tensors, got ", a.describe(), ", ", b.describe(), " and ",
      out.describe());
  DDP_CHECK(a.is_contiguous() && b.is_contiguous() && out.is_contiguous(),
            "matmul_tiled expects contiguous tensors\nhint: call .contiguous() first");
  const int m = as_int(a.size(0), "M"), k = as_int(a.size(1), "K"), n = as_int(b.size(1), "N");
  if (m == 0 || n == 0) return;

  const int index = a.device().index;
  const cudaStream_t stream = compute_stream(index);  // creates the backend on first use
  DeviceGuard guard(index);
  const dim3 threads(kTile, kTile);
  const dim3 blocks((n + kTile - 1) / kTile, (m + kTile - 1) / kTile);
  DDP_CHECK(blocks.y <= 65535, "matmul_tiled: M = ", m, " needs more than 65535 block rows");
  matmul_tiled_kernel<<<blocks, threads, 0, stream>>>(static_cast<const float*>(a.raw_data()),
                                                      static_cast<const float*>(b.raw_data()),
                                                      static_cast<float*>(out.raw_data()), m, n, k);
  DDP_CHECK_CUDA(cudaGetLastError());
}

}  // namespace ddp::cuda
