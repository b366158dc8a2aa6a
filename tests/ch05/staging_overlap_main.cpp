// ch05_staging_overlap: a tcp or mpi collective on CUDA tensors must not wait for kernels
// queued AFTER it (Note [Staging CUDA tensors off the compute stream], process_group.hpp).
// Chapter 05's staging, as chapter 07's overlap of communication with backward needs it.
//
//   ddprun --nproc-per-node 2 build/<dir>/tests/ch05_staging_overlap --backend tcp
//   mpirun -np 2 --oversubscribe build/<dir>/tests/ch05_staging_overlap --backend mpi
//
// Every rank (all on GPU 0): queue a collective, THEN a chain of large matmuls on the
// compute stream (calibrated to take about kLongMs alone) and an event after it; wait for
// the Work. Staging that copies on the compute stream cannot finish before that event is
// reached: here the Work must. Before the collective, its input is written by a kernel
// queued behind a shorter chain, so staging that ignores the compute stream altogether
// copies stale values: the results, closed forms, must be exact.
// Exit code 0 when every check passed on this rank, 1 otherwise; 77 (ctest: Skipped) on
// every rank where no GPU is usable. Only built with CUDA.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dist/init.hpp"
#include "tensor/cuda/device_info.hpp"
#include "tensor/cuda/runtime.hpp"  // Event::query
#include "tensor/cuda/streams.hpp"
#include "tensor/ops.hpp"
#include "tensor/tensor.hpp"
#include "tests/support/no_gpu.hpp"

namespace {

using namespace ddp;
using Clock = std::chrono::steady_clock;
constexpr Device kGpu = Device::cuda(0);
constexpr TensorOptions kF32{DType::Float32, kGpu};
constexpr std::int64_t kSide = 4096;  // matmul side: ~3 ms a product on an H100 in FP32
constexpr double kLongMs = 600;       // the chain queued after the collective, alone
constexpr auto kTimeout = std::chrono::seconds(60);

int failures = 0;

void expect(bool ok, int rank, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "rank %d: FAILED %s\n", rank, what.c_str());
    ++failures;
  }
}

// `count` products of (kSide, kSide) matrices, queued on the compute stream; the host
// returns at once. The values stay 1/kSide (each product averages a row), so nothing
// overflows however long the chain.
Tensor matmul_chain(int count) {
  const Tensor w = full({kSide, kSide}, 1.0 / kSide, kF32);
  Tensor x = w;
  for (int i = 0; i < count; ++i) x = matmul(x, w);
  return x;
}

// How many products take about `ms` on this GPU (with the other ranks idle).
int calibrate(double ms) {
  matmul_chain(2);  // cuBLAS and the allocator warm up
  const int probe = 8;
  auto start_mark = cuda::record_on_compute_stream(0);
  start_mark->synchronize();
  const Clock::time_point start = Clock::now();
  matmul_chain(probe);
  cuda::record_on_compute_stream(0)->synchronize();
  const double per_product =
      std::chrono::duration<double, std::milli>(Clock::now() - start).count() / probe;
  return static_cast<int>(ms / per_product) + 1;
}

// One collective with the overlap check: `launch` queues it on tensors that `produce`
// fills (behind a short chain of products), `check` reads the results.
template <typename Produce, typename Launch, typename Check>
void overlap_case(const char* name, int rank, int long_chain, Produce produce, Launch launch,
                  Check check) {
  matmul_chain(long_chain / 8);
  produce();  // its kernels start only once the short chain has run
  std::shared_ptr<Work> work = launch();
  matmul_chain(long_chain);  // queued after the collective
  const std::shared_ptr<cuda::Event> long_done = cuda::record_on_compute_stream(0);
  const Clock::time_point start = Clock::now();
  work->wait(kTimeout);
  const double waited_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  const bool reached = long_done->query();
  expect(!reached, rank,
         std::string(name) +
             ": the Work finished only once the kernels queued after it had "
             "(waited " +
             std::to_string(waited_ms) + " ms): the staging copy queued behind them");
  check();  // reads through the compute stream: after the long chain
  std::printf("rank %d: %s waited %.1f ms, long chain %s when it finished\n", rank, name, waited_ms,
              reached ? "DONE" : "still running");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || std::string_view(argv[1]) != "--backend") {
    std::fprintf(stderr, "usage: ch05_staging_overlap --backend tcp|mpi\n");
    return 2;
  }
  if (cuda::device_count() == 0) return test::skip_without_gpu();  // every rank: 77
  try {
    InitOptions options;
    options.backend = argv[2];
    options.timeout = kTimeout;
    std::unique_ptr<ProcessGroup> group = init_process_group(options);
    const int rank = group->rank();
    const int w = group->size();
    const int long_chain = calibrate(kLongMs);
    group->barrier()->wait(kTimeout);  // every rank calibrated: the GPU is shared

    // all_reduce: element i of rank r is r + i -> w(w-1)/2 + w*i, exact in float32.
    const std::int64_t n = 100003;
    Tensor x = zeros({n}, kF32);
    overlap_case(
        "all_reduce", rank, long_chain,
        [&] {
          x.add_(arange(0.0, static_cast<double>(n), 1.0, kF32)).add_(static_cast<float>(rank));
        },
        [&] { return group->all_reduce(x, ReduceOp::Sum); },
        [&] {
          const std::vector<float> got = x.to_vector<float>();
          bool ok = true;
          for (std::int64_t i = 0; i < n; ++i) {
            ok = ok && got[i] == static_cast<float>(w * (w - 1) / 2 + w * i);
          }
          expect(ok, rank, "all_reduce sum == w(w-1)/2 + w*i");
        });

    // broadcast from the last rank: its values, rank-dependent elsewhere.
    Tensor b = zeros({n}, kF32);
    overlap_case(
        "broadcast", rank, long_chain, [&] { b.add_(7.0f * (rank + 1)); },
        [&] { return group->broadcast(b, w - 1); },
        [&] {
          bool ok = true;
          for (float v : b.to_vector<float>()) ok = ok && v == 7.0f * w;
          expect(ok, rank, "broadcast from rank w-1 == 7w");
        });

    // all_gather of (m) per rank, rank r's chunk holding r*1000 + i.
    const std::int64_t m = 4099;
    Tensor in = zeros({m}, kF32);
    Tensor gathered = zeros({w * m}, kF32);
    overlap_case(
        "all_gather", rank, long_chain,
        [&] { in.add_(arange(0.0, static_cast<double>(m), 1.0, kF32)).add_(1000.0f * rank); },
        [&] { return group->all_gather(gathered, in); },
        [&] {
          const std::vector<float> got = gathered.to_vector<float>();
          bool ok = true;
          for (int r = 0; r < w; ++r) {
            for (std::int64_t i = 0; i < m; ++i) ok = ok && got[r * m + i] == 1000.0f * r + i;
          }
          expect(ok, rank, "all_gather chunk r == 1000r + i");
        });

    // reduce_scatter of (w*m): every rank holds j + 1 at j -> rank r gets w(rm + i + 1).
    Tensor scatter_in = zeros({w * m}, kF32);
    Tensor part = zeros({m}, kF32);
    overlap_case(
        "reduce_scatter", rank, long_chain,
        [&] { scatter_in.add_(arange(1.0, static_cast<double>(w * m + 1), 1.0, kF32)); },
        [&] { return group->reduce_scatter(part, scatter_in, ReduceOp::Sum); },
        [&] {
          const std::vector<float> got = part.to_vector<float>();
          bool ok = true;
          for (std::int64_t i = 0; i < m; ++i) {
            ok = ok && got[i] == static_cast<float>(w * (rank * m + i + 1));
          }
          expect(ok, rank, "reduce_scatter == w(rm + i + 1)");
        });

    group->barrier()->wait(kTimeout);
    std::printf("rank %d/%d (%s): %d products of %lld^2 after each collective, %s\n", rank, w,
                argv[2], long_chain, static_cast<long long>(kSide),
                failures == 0 ? "all checks passed" : "FAILED");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ch05_staging_overlap: %s\n", e.what());
    return 1;
  }
  return failures == 0 ? 0 : 1;
}
