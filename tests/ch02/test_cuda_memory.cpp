// Chapter 02: the caching allocator on a real GPU. A loop of tensor ops in its steady
// state makes zero cudaMalloc calls (AllocatorStats counts them), empty_cache gives
// memory back, and asking for more than the GPU has is a ddp::Error with the sizes.
// (Page-locked host memory, empty_pinned, is checked in test_cuda_runtime.cpp, with the
// driver's view of the pointer.)
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include "tensor/cuda/device_info.hpp"
#include "tensor/ops.hpp"
#include "tensor/random.hpp"
#include "tests/ch02/gpu_compare.hpp"

using namespace ddp;
using ddp::test::kGpu;

namespace {

// Something like one training step of a small network: every op allocates its result,
// and every temporary is freed when it goes out of scope.
float step(const Tensor& x, const Tensor& w1, const Tensor& w2, Generator& gen) {
  const Tensor noise = randn(x.shape(), gen, kGpu);
  const Tensor h = relu(matmul(add(x, mul(noise, 0.01)), w1));
  const Tensor logits = matmul(h, w2);
  const Tensor probs = sigmoid(logits - max(logits, 1, true));
  const Tensor loss = mean(square(probs - 0.5));
  const Tensor grad = matmul(h.t(), probs);
  (void)argmax(logits, 1);
  (void)sum(grad, 0);
  return loss.item<float>();  // copies to the host: the host waits here
}

}  // namespace

TEST_CASE("a steady-state loop of GPU ops makes no new device allocations",
          "[ch02][cuda][allocator]") {
  Generator gen(41);
  const Tensor x = randn({128, 784}, gen, kGpu);
  const Tensor w1 = randn({784, 64}, gen, kGpu);
  const Tensor w2 = randn({64, 10}, gen, kGpu);
  step(x, w1, w2, gen);  // warm-up: the cache fills
  step(x, w1, w2, gen);
  const AllocatorStats warm = cuda::allocator_stats(0);
  for (int i = 0; i < 20; ++i) step(x, w1, w2, gen);
  const AllocatorStats s = cuda::allocator_stats(0);
  CAPTURE(warm.device_allocs, s.device_allocs, s.requests - warm.requests);
  CHECK(s.device_allocs == warm.device_allocs);  // zero cudaMalloc calls in 20 steps
  CHECK(s.device_frees == warm.device_frees);
  CHECK(s.requests > warm.requests);
  CHECK(s.cache_hits - warm.cache_hits == s.requests - warm.requests);  // all from cache
  CHECK(s.bytes_in_use == warm.bytes_in_use);                           // nothing leaked
  CHECK(s.peak_bytes_in_use >= s.bytes_in_use);
}

TEST_CASE("GPU tensors take memory from the allocator and give it back on destruction",
          "[ch02][cuda][allocator]") {
  const AllocatorStats before = cuda::allocator_stats(0);
  {
    const Tensor t = empty({1000, 1000}, {DType::Float32, kGpu});  // 4 MB: class 4 MiB
    const AllocatorStats during = cuda::allocator_stats(0);
    CHECK(during.bytes_in_use - before.bytes_in_use == CachingAllocator::round_size(4000000));
    CHECK(during.requests == before.requests + 1);
  }
  const AllocatorStats after = cuda::allocator_stats(0);
  CHECK(after.bytes_in_use == before.bytes_in_use);
  CHECK(after.bytes_cached >= CachingAllocator::round_size(4000000));

  cuda::empty_cache(0);
  const AllocatorStats emptied = cuda::allocator_stats(0);
  CHECK(emptied.bytes_cached == 0);
  CHECK(emptied.device_frees > after.device_frees);
  CHECK(emptied.bytes_in_use == after.bytes_in_use);
}

TEST_CASE("running out of GPU memory is a ddp::Error naming the sizes", "[ch02][cuda][allocator]") {
  // 2^48 float32 elements = 1 PiB: more than any GPU has.
  std::string message;
  try {
    (void)empty({std::int64_t{1} << 48}, {DType::Float32, kGpu});
  } catch (const Error& e) {
    message = e.what();
  }
  CAPTURE(message);
  CHECK_THAT(message, Catch::Contains("out of GPU 0 memory"));
  CHECK_THAT(message, Catch::Contains("1.00 PiB (1125899906842624 bytes)"));
  CHECK_THAT(message, Catch::Contains("hint:"));
  // The GPU is still usable afterwards.
  CHECK(sum(ones({4}, {DType::Float32, kGpu})).item<float>() == 4.0f);
}
