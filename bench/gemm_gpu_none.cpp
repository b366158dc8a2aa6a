// bench_gemm without the CUDA backend: the GPU table is replaced by one line.
#include <cstdio>

#include "bench/gemm_gpu.hpp"

namespace ddp::bench {

void run_gpu_gemm(const GpuGemmOptions& /*options*/) {
  std::printf("\nGPU: CUDA not built (configure with nvcc available, or -DDDP_CUDA=ON); skipped\n");
}

}  // namespace ddp::bench
