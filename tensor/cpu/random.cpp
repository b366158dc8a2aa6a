// Random numbers on the CPU from the Philox stream. Chapter 01. The CUDA twin
// (tensor/cuda/random.cu) evaluates the very same expressions per element, so a seeded
// tensor has the same values on both devices.
#include "tensor/cpu/kernels.hpp"
#include "tensor/cpu/strided_loop.hpp"
#include "tensor/philox.hpp"

namespace ddp::cpu {

void random(const RandomSpec& spec, const Tensor& out) {
  float* p = out.data<float>();
  const std::int64_t n = out.numel();
  const bool normal = spec.kind == RandomSpec::Kind::Normal;
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
  for (std::int64_t i = 0; i < n; ++i) {
    const philox::Uint4 w =
        philox::random_words(spec.seed, spec.offset + static_cast<std::uint64_t>(i));
    p[i] = normal ? spec.a + spec.b * philox::standard_normal(w.x, w.y)
                  : philox::uniform_in(spec.a, spec.b, w.x);
  }
}

}  // namespace ddp::cpu
