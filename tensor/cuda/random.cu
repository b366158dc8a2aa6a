// Random numbers on a GPU from the Philox stream (tensor/philox.hpp). Chapter 02.
// The CPU twin is tensor/cpu/random.cpp: element i of both is computed from
// random_words(seed, offset + i) by the same expression, so a tensor drawn with a
// seeded Generator has the same values on either device (tests/ch02 checks it).
// Not here: drawing four numbers per Philox call, which would be faster but would
// change which words element i uses, and with them every seeded result.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "tensor/cuda/kernels.hpp"
#include "tensor/cuda/runtime.hpp"
#include "base/error.hpp"
#include "tensor/philox.hpp"
#include "tensor/tensor.hpp"

namespace ddp::cuda {
namespace {

// Each thread needs no state but its index: the counter-based generator at work.
// The expressions are written exactly as in the CPU twin (same operand order), so that
// both compilers see the same floating-point operations.
__global__ void random_kernel(float* out, std::int64_t n, RandomSpec spec) {
  const bool normal = spec.kind == RandomSpec::Kind::Normal;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const philox::Uint4 w =
        philox::random_words(spec.seed, spec.offset + static_cast<std::uint64_t>(i));
    out[i] = normal ? spec.a + spec.b * philox::standard_normal(w.x, w.y)
                    : philox::uniform_in(spec.a, spec.b, w.x);
  }
}

}  // namespace

// out: contiguous float32, element i from stream position spec.offset + i.
void random(cudaStream_t stream, const RandomSpec& spec, const Tensor& out) {
  DDP_CHECK(out.dtype() == DType::Float32 && out.is_contiguous(),
            "random numbers on the GPU fill contiguous float32 tensors, got ", out.describe());
  const std::int64_t n = out.numel();
  if (n == 0) return;
  random_kernel<<<blocks_for(n), kThreadsPerBlock, 0, stream>>>(static_cast<float*>(out.raw_data()),
                                                                n, spec);
  DDP_CHECK_CUDA(cudaGetLastError());
}

}  // namespace ddp::cuda
