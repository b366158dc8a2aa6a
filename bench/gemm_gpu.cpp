// The GPU half of bench_gemm (see gemm_gpu.hpp), built only with CUDA: ddp::matmul on
// GPU 0 beside cuBLAS called directly (the ceiling ddp::matmul should reach, since it
// calls cuBLAS itself) and ddp::cuda::matmul_tiled (the chapter-02 kernel, expected to
// be several times slower). Host code only: it launches no kernel of its own.
//
// Timing: a GPU call returns before the work is done, so each repetition synchronizes,
// makes `calls` back-to-back calls, synchronizes again, and divides by `calls`.
#include <cublas_v2.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/gemm_gpu.hpp"
#include "bench/timing.hpp"
#include "tensor/backend.hpp"
#include "tensor/cuda/device_info.hpp"
#include "tensor/cuda/matmul_tiled.hpp"
#include "tensor/cuda/runtime.hpp"
#include "tensor/ops.hpp"
#include "tensor/random.hpp"
#include "tensor/tensor.hpp"

namespace ddp::bench {

namespace {

// Owns a cuBLAS handle.
struct CublasDeleter {
  void operator()(cublasContext* handle) const noexcept { cublasDestroy(handle); }
};
using CublasHandle = std::unique_ptr<cublasContext, CublasDeleter>;

CublasHandle make_cublas(const cuda::Stream& stream) {
  cublasHandle_t raw = nullptr;
  DDP_CHECK_CUBLAS(cublasCreate(&raw));
  CublasHandle handle(raw);
  DDP_CHECK_CUBLAS(cublasSetStream(raw, stream.get()));
  // The same arithmetic as ddp::matmul (tensor/cuda/backend.cu): plain FP32, no TF32.
  DDP_CHECK_CUBLAS(cublasSetMathMode(raw, CUBLAS_DEFAULT_MATH));
  return handle;
}

Timing time_calls(const GpuGemmOptions& options, const std::function<void()>& call,
                  const std::function<void()>& sync) {
  std::vector<double> times;
  for (int r = 0; r < options.warmup + options.reps; ++r) {
    sync();
    const double t0 = now_seconds();
    for (int c = 0; c < options.calls; ++c) call();
    sync();
    if (r >= options.warmup) times.push_back((now_seconds() - t0) / options.calls);
  }
  return summarize(times);
}

// max |x - ref| / max |ref|, on the host.
double max_rel_diff(const Tensor& x, const Tensor& ref) {
  const std::vector<float> xs = x.to_vector<float>(), rs = ref.to_vector<float>();
  double diff = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(xs[i] - rs[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(rs[i])));
  }
  return scale > 0.0 ? diff / scale : diff;
}

void print_row(int n, const char* path, const Timing& t, const std::string& ratio) {
  std::printf("%6d  %-36s %8.1f %8.1f %9.3f  %s\n", n, path, gemm_gflops(n, t.median_s),
              gemm_gflops(n, t.min_s), t.median_s * 1e3, ratio.c_str());
}

}  // namespace

void run_gpu_gemm(const GpuGemmOptions& options) {
  if (cuda::device_count() == 0) {
    std::printf("\nGPU: CUDA built, but no GPU is usable (no device or no driver); skipped\n");
    return;
  }
  const Device device = Device::cuda(0);
  cuda::DeviceGuard guard(0);
  Backend& backend = backend_for(device);
  const cuda::Stream stream;  // cuBLAS-direct runs on its own stream
  const CublasHandle cublas = make_cublas(stream);

  std::printf(
      "\nGPU 0: %s. FP32 without TF32; per repetition %d back-to-back calls,"
      " %d warm-up + %d timed repetitions\n\n",
      cuda::device_name(0).c_str(), options.calls, options.warmup, options.reps);
  std::printf("%6s  %-36s %8s %8s %9s  %s\n", "n", "path", "median", "best", "ms(med)",
              "this/cuBLAS (median)");

  for (const int n : options.sizes) {
    Generator gen(static_cast<std::uint64_t>(n));
    const Tensor a = randn({n, n}, gen, device);
    const Tensor b = randn({n, n}, gen, device);
    const TensorOptions on_gpu{DType::Float32, device};
    const Tensor c_blas = empty({n, n}, on_gpu);
    const Tensor c_tiled = empty({n, n}, on_gpu);
    Tensor c_ours;

    // Row-major C = A B is column-major C^T = B^T A^T: pass b first (as matmul.cu does).
    const float alpha = 1.0f, beta = 0.0f;
    const auto blas_call = [&] {
      DDP_CHECK_CUBLAS(cublasSgemm(cublas.get(), CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha,
                                   b.data<float>(), n, a.data<float>(), n, &beta,
                                   c_blas.data<float>(), n));
    };
    const auto ours_call = [&] { c_ours = matmul(a, b); };
    const auto tiled_call = [&] { cuda::matmul_tiled(a, b, c_tiled); };
    // a and b were filled on ddp's compute stream; the cuBLAS stream must not start early.
    const auto sync_both = [&] {
      backend.synchronize();
      stream.synchronize();
    };

    const Timing blas = time_calls(options, blas_call, sync_both);
    const Timing ours = time_calls(options, ours_call, sync_both);
    const Timing tiled = time_calls(options, tiled_call, sync_both);
    const double blas_gflops = gemm_gflops(n, blas.median_s);
    const auto ratio = [&](const Timing& t) {
      char text[32];
      std::snprintf(text, sizeof text, "%.2fx", gemm_gflops(n, t.median_s) / blas_gflops);
      return std::string(text);
    };
    print_row(n, "cuBLAS cublasSgemm, direct", blas, "");
    print_row(n, "ddp::matmul (cuda:0)", ours, ratio(ours));
    print_row(n, "ddp::cuda::matmul_tiled", tiled, ratio(tiled));
    std::printf("%6s  results agree: vs cuBLAS, max rel diff ours %.1e, tiled %.1e\n\n", "",
                max_rel_diff(c_ours, c_blas), max_rel_diff(c_tiled, c_blas));
  }
}

}  // namespace ddp::bench
