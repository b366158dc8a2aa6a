// The CUDA kernels' entry points, one per Backend method (backend.hpp), and the launch
// shape they share. Chapter 02. Internal to tensor/cuda/: backend.cu calls these after
// making the tensors' GPU the current device; elementwise.cu, reduce.cu, matmul.cu and
// random.cu implement them. Each function only ENQUEUES work on `stream` and returns;
// none of them waits for the GPU.
//
// The contract is Backend's: inputs are on this GPU, shapes already matched, broadcast
// inputs expanded with stride-0 dimensions, `out` allocated (and possibly equal to `a`).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "tensor/backend.hpp"
#include "tensor/op_math.hpp"

namespace ddp {
class Tensor;
}

namespace ddp::cuda {

// ---- Launch shape ----------------------------------------------------------------------

// Note [Grid-stride loops]
// A kernel runs as a grid of blocks of threads. The simplest launch gives every element
// its own thread, which needs a grid as large as the tensor. Instead each thread starts
// at its global index and steps by the total number of threads in the grid:
//
//     for (i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
//
// so any grid size is correct, and the grid can be capped at a few times what fills
// the GPU (an H100 has 132 SMs x 2048 resident threads = 1056 blocks of 256). The same loop,
// with one "thread", is the CPU twin's plain for loop.
constexpr int kThreadsPerBlock = 256;
constexpr std::int64_t kMaxBlocks = 4096;

// Blocks for `n` elements with a grid-stride loop: enough to cover n, at most kMaxBlocks.
inline unsigned int blocks_for(std::int64_t n) {
  const std::int64_t blocks = (n + kThreadsPerBlock - 1) / kThreadsPerBlock;
  return static_cast<unsigned int>(std::clamp<std::int64_t>(blocks, 1, kMaxBlocks));
}

// ---- Elementwise (elementwise.cu) ------------------------------------------------------
void fill(cudaStream_t stream, const Tensor& out, double value);
void arange(cudaStream_t stream, const Tensor& out, double start, double step);
void copy(cudaStream_t stream, const Tensor& src, const Tensor& out);
void unary(cudaStream_t stream, UnaryOp op, const Tensor& x, const Tensor& out);
void binary(cudaStream_t stream, BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);
void binary_scalar(cudaStream_t stream, BinaryOp op, const Tensor& a, double scalar,
                   const Tensor& out);

// ---- Reductions (reduce.cu) ------------------------------------------------------------
void reduce(cudaStream_t stream, Reduction op, const Tensor& x, std::int64_t outer, std::int64_t n,
            std::int64_t inner, const Tensor& out);

// ---- Matmul (matmul.cu) ----------------------------------------------------------------
// cuBLAS SGEMM; `handle` is bound to the compute stream.
void matmul_cublas(cublasHandle_t handle, const Tensor& a, const Tensor& b, const Tensor& out);

// ---- Random numbers (random.cu) --------------------------------------------------------
void random(cudaStream_t stream, const RandomSpec& spec, const Tensor& out);

// ---- From backend.cu -------------------------------------------------------------------
// The compute stream of GPU `index` (creating its backend if needed), for code outside
// the Backend interface that launches kernels, such as matmul_tiled.
cudaStream_t compute_stream(int index);
// The copy stream of GPU `index` (Note [The streams of a GPU], tensor/cuda/streams.hpp).
cudaStream_t copy_stream(int index);

}  // namespace ddp::cuda
