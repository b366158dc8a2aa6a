// ch02_cuda: one small computation on the best device present, checked against the CPU.
// Chapter 02 (tutorial/ch02_cuda/README.md).
//
//   build/release/bin/ch02_cuda            # cuda:0 when a GPU is usable, else the CPU
//   build/release/bin/ch02_cuda cuda:1     # or name the device
//
// It draws seeded random inputs (the same numbers on every device, see philox.hpp),
// runs a few ops and a matmul there, runs the same on the CPU, and prints the largest
// relative difference per op, then the caching allocator's counters before and after a
// loop of steps (zero new cudaMalloc calls once warm). It does not time anything: that
// is bench/bench_gemm.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "tensor/cuda/device_info.hpp"
#include "tensor/cuda/matmul_tiled.hpp"
#include "tensor/ops.hpp"
#include "tensor/random.hpp"
#include "tensor/tensor.hpp"
#include "base/units.hpp"

namespace {

using ddp::Device;
using ddp::Tensor;

// max over elements of |got - want| / max(1, |want|): relative, absolute near zero.
double max_error(const Tensor& got, const Tensor& want) {
  const Tensor g = got.to(ddp::DType::Float32), w = want.to(ddp::DType::Float32);
  const std::vector<float> gv = g.to_vector<float>(), wv = w.to_vector<float>();
  double worst = 0.0;
  for (std::size_t i = 0; i < gv.size(); ++i) {
    const double diff = std::abs(static_cast<double>(gv[i]) - wv[i]);
    worst = std::max(worst, diff / std::max(1.0, std::abs(static_cast<double>(wv[i]))));
  }
  return worst;
}

// The computation: a linear layer with a ReLU, then per-row statistics.
//   x: (B, D), w: (D, H), b: (H,) -> {y: (B, H), row sums: (B,), row argmax: (B,)}
struct Result {
  Tensor x, y, row_sum, row_argmax, loss;
};

Result run(Device device, std::uint64_t seed) {
  ddp::Generator gen(seed);  // same seed on both devices: the same inputs
  Result r;
  r.x = ddp::randn({256, 512}, gen, device);
  const Tensor w = ddp::mul(ddp::randn({512, 128}, gen, device), 1.0 / std::sqrt(512.0));
  const Tensor b = ddp::uniform({128}, -0.1f, 0.1f, gen, device);
  r.y = ddp::relu(ddp::matmul(r.x, w) + b);
  r.row_sum = ddp::sum(r.y, 1);
  r.row_argmax = ddp::argmax(r.y, 1);
  r.loss = ddp::mean(ddp::square(r.y - 0.5));
  return r;
}

void print_stats(const char* when, const ddp::AllocatorStats& s) {
  std::printf(
      "  %-22s cudaMalloc calls %4llu, cudaFree calls %4llu, requests %6llu,"
      " from cache %6llu\n  %-22s in use %8.2f MiB, cached %8.2f MiB, peak %8.2f MiB\n",
      when, static_cast<unsigned long long>(s.device_allocs),
      static_cast<unsigned long long>(s.device_frees), static_cast<unsigned long long>(s.requests),
      static_cast<unsigned long long>(s.cache_hits), "",
      static_cast<double>(s.bytes_in_use) / ddp::kMiB,
      static_cast<double>(s.bytes_cached) / ddp::kMiB,
      static_cast<double>(s.peak_bytes_in_use) / ddp::kMiB);
}

int run_program(int argc, char** argv) {
  const int gpus = ddp::cuda::device_count();
  Device device = gpus > 0 ? Device::cuda(0) : Device::cpu();
  if (argc > 1) device = Device::parse(argv[1]);

  if (device.is_cuda()) {
    std::printf("device: %s (%s), %d GPU(s) usable\n", device.str().c_str(),
                ddp::cuda::device_name(device.index).c_str(), gpus);
  } else {
    std::printf("device: cpu. %s\n",
                !ddp::cuda::is_built()
                    ? "This build has no CUDA (reconfigure with -DDDP_CUDA=ON to get it)."
                : gpus == 0 ? "No usable CUDA GPU (no device or no driver)."
                            : "The CPU was asked for.");
    std::printf("The comparison below is the CPU against itself: every error is 0.\n");
  }

  const Result got = run(device, 2024);
  const Result want = run(Device::cpu(), 2024);
  constexpr double kTolerance = 1e-4;
  struct Line {
    const char* what;
    double error;
  };
  const std::vector<Line> lines = {
      {"randn inputs", max_error(got.x, want.x)},
      {"relu(x @ w + b)", max_error(got.y, want.y)},
      {"sum(y, 1)", max_error(got.row_sum, want.row_sum)},
      {"argmax(y, 1)", max_error(got.row_argmax, want.row_argmax)},
      {"mean((y - 0.5)^2)", max_error(got.loss, want.loss)},
  };
  std::printf("\n%-22s %s\n", "op", "max relative error vs the CPU");
  bool ok = true;
  for (const Line& line : lines) {
    std::printf("%-22s %.3g\n", line.what, line.error);
    ok = ok && line.error <= kTolerance;
  }

  if (device.is_cuda()) {
    // The hand-written kernel of the chapter, on the same inputs as the cuBLAS matmul.
    const Tensor w = got.x.narrow(0, 0, 128).t().contiguous();  // (512, 128)
    const Tensor tiled = ddp::empty({256, 128}, {ddp::DType::Float32, device});
    ddp::cuda::matmul_tiled(got.x, w, tiled);
    const double err = max_error(tiled, ddp::matmul(want.x, w.cpu()));
    std::printf("%-22s %.3g\n", "matmul_tiled", err);
    ok = ok && err <= kTolerance;

    std::printf("\ncaching allocator of %s:\n", device.str().c_str());
    const ddp::AllocatorStats before = ddp::cuda::allocator_stats(device.index);
    print_stats("after the first run:", before);
    for (int step = 0; step < 10; ++step) (void)run(device, 7 + step).loss.item<float>();
    const ddp::AllocatorStats after = ddp::cuda::allocator_stats(device.index);
    print_stats("after 10 more runs:", after);
    std::printf("  new cudaMalloc calls in those 10 runs: %llu\n",
                static_cast<unsigned long long>(after.device_allocs - before.device_allocs));
  }

  std::printf("\n%s\n", ok ? "OK: every result is within 1e-4 of the CPU's"
                           : "FAILED: a result differs from the CPU's by more than 1e-4");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run_program(argc, argv);
  } catch (const ddp::Error& e) {
    std::fprintf(stderr, "ch02_cuda: %s\n", e.what());
    return 1;
  }
}
