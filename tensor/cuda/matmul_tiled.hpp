// matmul_tiled: a matrix multiply written by hand with shared-memory tiles, the kernel
// chapter 02 reads line by line (tensor/cuda/matmul.cu, Note [Tiled matmul]). ddp::matmul
// on a GPU uses cuBLAS instead; this one exists to be understood, tested against the
// CPU (tests/ch02) and timed against cuBLAS (bench/). Declared on every build; without
// CUDA it throws ddp::Error.
#pragma once

#include "tensor/tensor.hpp"

namespace ddp::cuda {

// a: (M, K), b: (K, N), out: (M, N); all contiguous float32 on one GPU; out must not
// overlap a or b. Queued on the GPU's compute stream: it returns before the product is
// computed, like every kernel (read `out`, or synchronize, to wait for it).
void matmul_tiled(const Tensor& a, const Tensor& b, const Tensor& out);

}  // namespace ddp::cuda
