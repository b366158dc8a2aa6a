// batch_norm on the CPU as two loops forward and two backward, one channel per thread at
// a time. Chapter 03. The same formulas as batch_norm.cpp (Note [The batch-norm
// backward]), written as loops over each channel's B*H*W values instead of broadcasting
// tensor ops, so that no (B, C, H, W) temporary is made; batch_norm() picks it for
// float32 tensors in host memory (Note [Fused CPU paths], conv.cpp). Not here: GPUs.
#include <cmath>
#include <cstdint>
#include <vector>

#include "autograd/function.hpp"
#include "autograd/fused_cpu.hpp"
#include "autograd/ops/batch_norm_check.hpp"
#include "tensor/threads.hpp"

namespace ddp {

namespace {

// A channel c of a contiguous (B, C, H, W) tensor is B rows of HW values: row b starts at
// (b*C + c)*HW. Sums run in double, as the tensor library's do (tensor/cpu/reduce.cpp).
struct Channels {
  std::int64_t B = 0, C = 0, HW = 0;
  std::int64_t row(std::int64_t b, std::int64_t c) const { return (b * C + c) * HW; }
  double n() const { return static_cast<double>(B * HW); }
};

// Channels go to the threads as they ask for them (threads_for(C) of them; Note [Work
// shared out on demand], conv_cpu.cpp); each channel's sums are computed by one thread,
// so the results do not depend on the schedule or the thread count.

// Per channel: rstd = 1 / sqrt(var + eps), k = w * rstd (w = 1 without affine weight).
float rstd_of(float var, double eps) { return 1.0f / std::sqrt(var + static_cast<float>(eps)); }

// Note [The batch-norm backward] (batch_norm.cpp) derives, per channel over its N values,
//     db = sum(g),   dw = rstd * sum(g * xc),   dx = k * (g - db / N - xc * rstd * dw / N)
// with xc = x - mean and k = w * rstd. Pass 1 computes the two sums, pass 2 dx. In
// evaluation mean and rstd are constants and dx = k * g.
struct BatchNormCpuBackward final : Node {
  Channels ch;
  Tensor x;                 // (B, C, H, W) contiguous: the input
  std::vector<float> mean;  // (C): the statistics x was normalised with
  std::vector<float> rstd;  // (C)
  Tensor weight;            // (C) contiguous, or undefined (w = 1)
  bool training = true;
  std::vector<Tensor> backward(const Tensor& g_in) override {  // g: (B, C, H, W)
    const bool want_x = needs_input_grad(0), want_w = needs_input_grad(1);
    const bool want_b = needs_input_grad(2);
    const Tensor g = g_in.contiguous();
    Tensor gx = want_x ? empty(g.shape()) : Tensor();
    Tensor gw = zeros({ch.C}), gb = zeros({ch.C});
    const float* pg = g.data<float>();
    const float* px = x.data<float>();
    const float* pw = weight.defined() ? weight.data<float>() : nullptr;
    float* pgx = want_x ? gx.data<float>() : nullptr;
    float* pgw = gw.data<float>();
    float* pgb = gb.data<float>();
    const double n = ch.n();
#pragma omp parallel for num_threads(threads_for(ch.C)) schedule(dynamic, 1)
    for (std::int64_t c = 0; c < ch.C; ++c) {
      const float m = mean[c];
      double sum_g = 0.0, sum_gxc = 0.0;
      for (std::int64_t b = 0; b < ch.B; ++b) {  // pass 1
        const float* gr = pg + ch.row(b, c);
        const float* xr = px + ch.row(b, c);
#pragma omp simd reduction(+ : sum_g, sum_gxc)
        for (std::int64_t i = 0; i < ch.HW; ++i) {
          sum_g += gr[i];
          sum_gxc += static_cast<double>(gr[i] * (xr[i] - m));
        }
      }
      const float db = static_cast<float>(sum_g);
      const float dw = static_cast<float>(sum_gxc) * rstd[c];
      pgb[c] = db;
      pgw[c] = dw;
      if (pgx == nullptr) continue;
      const float k = (pw != nullptr ? pw[c] : 1.0f) * rstd[c];
      const float g_mean = training ? static_cast<float>(db / n) : 0.0f;
      const float slope = training ? static_cast<float>(rstd[c] * dw / n) : 0.0f;
      for (std::int64_t b = 0; b < ch.B; ++b) {  // pass 2
        const float* gr = pg + ch.row(b, c);
        const float* xr = px + ch.row(b, c);
        float* out = pgx + ch.row(b, c);
#pragma omp simd
        for (std::int64_t i = 0; i < ch.HW; ++i) {
          out[i] = k * (gr[i] - g_mean - (xr[i] - m) * slope);
        }
      }
    }
    return {gx, want_w ? gw : Tensor(), want_b ? gb : Tensor()};
  }
  const char* name() const override { return "BatchNormCpuBackward"; }
  void release_saved() override {
    x = weight = Tensor();
    mean = rstd = {};
  }
};

}  // namespace

// x: (B, C, H, W), weight/bias: (C) or undefined -> (B, C, H, W).
Variable batch_norm_cpu(const Variable& x, const Variable& weight, const Variable& bias,
                        Tensor& running_mean, Tensor& running_var, bool training, double momentum,
                        double eps) {
  const std::int64_t n =
      detail::check_batch_norm(x, weight, bias, running_mean, running_var, training);
  DDP_CHECK(fused_cpu_applies(x.data()), "batch_norm_cpu: x is ", x.data().describe(),
            ", expected float32 on the cpu\nhint: call batch_norm(), which picks the version");
  const Tensor xc = x.data().contiguous();
  Channels ch;
  ch.B = xc.size(0), ch.C = xc.size(1), ch.HW = xc.size(2) * xc.size(3);
  const Tensor w = weight.defined() ? weight.data().contiguous() : Tensor();
  const Tensor bs = bias.defined() ? bias.data().contiguous() : Tensor();
  const float* pw = w.defined() ? w.data<float>() : nullptr;
  const float* pb = bs.defined() ? bs.data<float>() : nullptr;
  const float* px = xc.data<float>();

  Tensor mean = training ? empty({ch.C}) : running_mean.contiguous();  // (C)
  Tensor var = training ? empty({ch.C}) : running_var.contiguous();    // (C), biased
  float* pmean = mean.data<float>();
  float* pvar = var.data<float>();
  std::vector<float> rstd(static_cast<std::size_t>(ch.C));
  Tensor y = empty(xc.shape());
  float* py = y.data<float>();
#pragma omp parallel for num_threads(threads_for(ch.C)) schedule(dynamic, 1)
  for (std::int64_t c = 0; c < ch.C; ++c) {
    if (training) {
      // Two passes (mean first, then the squares of x - mean), as in batch_norm.cpp.
      double sum = 0.0;
      for (std::int64_t b = 0; b < ch.B; ++b) {
        const float* xr = px + ch.row(b, c);
#pragma omp simd reduction(+ : sum)
        for (std::int64_t i = 0; i < ch.HW; ++i) sum += xr[i];
      }
      const auto m = static_cast<float>(sum / ch.n());
      double squares = 0.0;
      for (std::int64_t b = 0; b < ch.B; ++b) {
        const float* xr = px + ch.row(b, c);
#pragma omp simd reduction(+ : squares)
        for (std::int64_t i = 0; i < ch.HW; ++i) {
          const float d = xr[i] - m;
          squares += static_cast<double>(d * d);
        }
      }
      pmean[c] = m;
      pvar[c] = static_cast<float>(squares / ch.n());
    }
    const float m = pmean[c];
    rstd[c] = rstd_of(pvar[c], eps);
    const float scale = (pw != nullptr ? pw[c] : 1.0f) * rstd[c];
    const float shift = pb != nullptr ? pb[c] : 0.0f;
    for (std::int64_t b = 0; b < ch.B; ++b) {
      const float* xr = px + ch.row(b, c);
      float* out = py + ch.row(b, c);
#pragma omp simd
      for (std::int64_t i = 0; i < ch.HW; ++i) out[i] = (xr[i] - m) * scale + shift;
    }
  }
  if (training && (running_mean.defined() || running_var.defined())) {
    detail::update_running_stats(running_mean, running_var, mean, var, n, momentum);
  }

  return make_result(std::move(y), {x, weight, bias}, [&] {
    auto node = std::make_shared<BatchNormCpuBackward>();
    node->ch = ch;
    node->x = xc;
    node->mean = mean.to_vector<float>();
    node->rstd = std::move(rstd);
    node->weight = w;
    node->training = training;
    return node;
  });
}

}  // namespace ddp
