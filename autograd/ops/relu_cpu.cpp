// relu on the CPU with a one-pass backward. Chapter 03. relu_composed (elementwise.cpp)
// computes the backward as mul(g, out > 0): a 0/1 mask tensor, then a product, two
// passes and a temporary. Here one loop writes g where out > 0, else 0. relu() picks it
// for float32 tensors in host memory (Note [Fused CPU paths], conv.cpp).
#include <cstdint>

#include "autograd/function.hpp"
#include "autograd/fused_cpu.hpp"
#include "tensor/ops.hpp"

namespace ddp {

namespace {

// Below this many elements the loop runs on one thread (as tensor/cpu's kParallelGrain).
constexpr std::int64_t kParallelGrain = 1 << 15;

struct ReluCpuBackward final : Node {
  Tensor out;  // the forward's output, contiguous
  std::vector<Tensor> backward(const Tensor& g_in) override {
    const Tensor g = g_in.contiguous();
    Tensor gx = empty(g.shape());
    const float* pg = g.data<float>();
    const float* po = out.data<float>();
    float* pgx = gx.data<float>();
    const std::int64_t n = g.numel();
#pragma omp parallel for simd schedule(static) if (n >= kParallelGrain)
    for (std::int64_t i = 0; i < n; ++i) pgx[i] = po[i] > 0.0f ? pg[i] : 0.0f;
    return {gx};
  }
  const char* name() const override { return "ReluCpuBackward"; }
  void release_saved() override { out = Tensor(); }
};

}  // namespace

// x: any shape -> the same shape, max(x, 0).
Variable relu_cpu(const Variable& x) {
  DDP_CHECK(fused_cpu_applies(x.data()), "relu_cpu: x is ", x.data().describe(),
            ", expected float32 on the cpu\nhint: call relu(), which picks the version");
  Tensor out = ddp::relu(x.data());  // a fresh contiguous tensor
  return make_result(out, {x}, [&] {
    auto node = std::make_shared<ReluCpuBackward>();
    node->out = out;
    return node;
  });
}

}  // namespace ddp
