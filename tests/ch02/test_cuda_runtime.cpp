// Chapter 02: the CUDA runtime wrappers of tensor/cuda/runtime.hpp: what a failed call
// says, the owners of streams and events, and page-locked host memory (empty_pinned) as
// the driver sees it. Built only with CUDA.
#include <catch2/catch.hpp>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <string>
#include <utility>
#include <vector>

#include "tensor/cuda/device_info.hpp"
#include "tensor/cuda/runtime.hpp"
#include "base/error.hpp"
#include "tensor/ops.hpp"
#include "tensor/tensor.hpp"

using namespace ddp;

TEST_CASE("DDP_CHECK_CUDA names the call, the error, the place and a hint",
          "[ch02][cuda][runtime]") {
  std::string message;
  try {
    DDP_CHECK_CUDA(cudaSetDevice(9999));
  } catch (const Error& e) {
    message = e.what();
  }
  CAPTURE(message);
  CHECK_THAT(message, Catch::Contains("cudaSetDevice(9999)"));
  CHECK_THAT(message, Catch::Contains("cudaErrorInvalidDevice"));
  CHECK_THAT(message, Catch::Contains("test_cuda_runtime.cpp:"));
  CHECK_THAT(message, Catch::Contains("hint:"));
  // The failure was cleared: the next launch check does not report it again.
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK_NOTHROW(DDP_CHECK_CUDA(cudaGetLastError()));
}

TEST_CASE("DDP_CHECK_CUBLAS names the call and the status", "[ch02][cuda][runtime]") {
  CHECK_NOTHROW(DDP_CHECK_CUBLAS(CUBLAS_STATUS_SUCCESS));
  CHECK_THROWS_WITH(
      DDP_CHECK_CUBLAS(CUBLAS_STATUS_INVALID_VALUE),
      Catch::Contains("CUBLAS_STATUS_INVALID_VALUE") && Catch::Contains("leading dimension"));
}

TEST_CASE("Stream and Event order work and time it", "[ch02][cuda][runtime]") {
  cuda::Stream stream;
  REQUIRE(stream.get() != nullptr);
  CHECK(stream.device() == cuda::current_device());
  cuda::Event start(true), end(true);
  void* buffer = nullptr;
  DDP_CHECK_CUDA(cudaMalloc(&buffer, 1 << 24));
  start.record(stream);
  DDP_CHECK_CUDA(cudaMemsetAsync(buffer, 1, 1 << 24, stream.get()));
  end.record(stream);
  // A second stream waits for the first on the GPU; the host only waits at synchronize.
  cuda::Stream other;
  end.wait(other);
  other.synchronize();
  CHECK(end.query());
  CHECK(cuda::Event::elapsed_ms(start, end) >= 0.0f);
  DDP_CHECK_CUDA(cudaFree(buffer));

  // Move-only: the moved-from owner holds nothing and destroys nothing.
  cuda::Stream moved(std::move(stream));
  CHECK(stream.get() == nullptr);  // NOLINT(bugprone-use-after-move): that is the point
  CHECK(moved.get() != nullptr);
  cuda::Event e2;
  e2 = std::move(start);
  CHECK(start.get() == nullptr);  // NOLINT(bugprone-use-after-move)
  e2.record(moved);
  e2.synchronize();
  CHECK(e2.query());
}

TEST_CASE("DeviceGuard restores the current device", "[ch02][cuda][runtime]") {
  const int before = cuda::current_device();
  {
    cuda::DeviceGuard guard(cuda::device_count() - 1);
    CHECK(cuda::current_device() == cuda::device_count() - 1);
  }
  CHECK(cuda::current_device() == before);
  CHECK_THROWS_AS(cuda::DeviceGuard(cuda::device_count()), Error);
  CHECK(cuda::current_device() == before);
}

TEST_CASE("empty_pinned is page-locked host memory that round-trips a GPU tensor, cached",
          "[ch02][cuda][pinned]") {
  const Tensor on_gpu = arange(0.0, 1000.0, 1.0, {DType::Float32, Device::cuda(0)});
  Tensor host = empty_pinned({1000});
  CHECK(host.is_pinned());
  CHECK_FALSE(host.is_cuda());
  // The driver's own view of the pointer: page-locked host memory, not pageable.
  cudaPointerAttributes attributes{};
  REQUIRE(cudaPointerGetAttributes(&attributes, host.raw_data()) == cudaSuccess);
  CHECK(attributes.type == cudaMemoryTypeHost);

  host.copy_(on_gpu);
  const std::vector<float> values = host.to_vector<float>();
  for (int i = 0; i < 1000; ++i) REQUIRE(values[static_cast<std::size_t>(i)] == float(i));
  Tensor back = empty({1000}, {DType::Float32, Device::cuda(0)});
  back.copy_(host);
  CHECK(back.cpu().to_vector<float>() == values);

  // Pinning is slow, so a freed block is kept and handed out again for the same size.
  const void* block = host.raw_data();
  host = Tensor();
  const Tensor again = empty_pinned({1000});
  CHECK(again.raw_data() == block);
}
