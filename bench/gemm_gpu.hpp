// The GPU half of bench_gemm: ddp::matmul on a GPU beside cuBLAS called directly and
// the chapter-02 tiled kernel. Built from gemm_gpu.cpp when CUDA is built, from
// gemm_gpu_none.cpp (which says so) otherwise, so gemm.cpp has no #ifdef.
#pragma once

#include <vector>

namespace ddp::bench {

struct GpuGemmOptions {
  std::vector<int> sizes;  // square n x n x n
  int warmup = 1;          // untimed repetitions first
  int reps = 10;           // timed repetitions
  int calls = 10;          // back-to-back calls per repetition (GPU calls are short)
};

// Prints one table; prints one line and returns when no GPU is usable.
void run_gpu_gemm(const GpuGemmOptions& options);

}  // namespace ddp::bench
