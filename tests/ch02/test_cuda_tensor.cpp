// Chapter 02: tensor.hpp on the GPU: creation, views (which only change metadata, so
// they must read the same elements on either device), copies between and within
// devices, dtype conversion, and the errors a participant meets when mixing devices.
#include <catch2/catch.hpp>

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "tensor/backend.hpp"
#include "tensor/cuda/device_info.hpp"
#include "tensor/ops.hpp"
#include "tensor/random.hpp"
#include "tests/ch02/gpu_compare.hpp"

using namespace ddp;
using ddp::test::kElementwiseTol;
using ddp::test::kGpu;
using ddp::test::mismatch;

TEST_CASE("creation functions on the GPU match the CPU", "[ch02][cuda][tensor]") {
  const TensorOptions f32{DType::Float32, kGpu}, i64{DType::Int64, kGpu};
  CHECK(empty({3, 4}, f32).device() == kGpu);
  CHECK(empty({3, 4}, f32).shape() == Shape{3, 4});
  CHECK(mismatch(zeros({3, 4}, f32), zeros({3, 4}), 0.0) == "");
  CHECK(mismatch(ones({2, 0, 3}, f32), ones({2, 0, 3}), 0.0) == "");
  CHECK(mismatch(full({5}, -2.5, f32), full({5}, -2.5), 0.0) == "");
  CHECK(mismatch(full({2, 2}, 7.0, i64), full({2, 2}, 7.0, {DType::Int64}), 0.0) == "");
  CHECK(mismatch(scalar_tensor(3.25, f32), scalar_tensor(3.25), 0.0) == "");
  CHECK(mismatch(arange(0.0, 10.0, 0.7, f32), arange(0.0, 10.0, 0.7), kElementwiseTol) == "");
  CHECK(mismatch(arange(5.0, -3.0, -1.5, f32), arange(5.0, -3.0, -1.5), kElementwiseTol) == "");
  CHECK(mismatch(arange(12, i64), arange(12, {DType::Int64}), 0.0) == "");
  CHECK(mismatch(arange(3.0, 3.0, 1.0, f32), arange(3.0, 3.0, 1.0), 0.0) == "");
  const std::vector<float> values = {1, -2, 3.5f, 4, 5, 6};
  const Tensor from_f = from_data(std::span<const float>(values), {2, 3}, kGpu);
  CHECK(from_f.device() == kGpu);
  CHECK(from_f.to_vector<float>() == values);
  const std::vector<std::int64_t> ints = {-4, 0, 9};
  CHECK(from_data(std::span<const std::int64_t>(ints), {3}, kGpu).to_vector<std::int64_t>() ==
        ints);
  const Tensor like = empty_like(from_f);
  CHECK((like.device() == kGpu && like.shape() == from_f.shape()));
  CHECK(mismatch(zeros_like(from_f), zeros({2, 3}), 0.0) == "");
  CHECK(mismatch(ones_like(from_f), ones({2, 3}), 0.0) == "");
}

TEST_CASE("views of a GPU tensor read the same elements as on the CPU", "[ch02][cuda][tensor]") {
  Generator gen(31);
  const Tensor c = randn({4, 6, 5}, gen);
  const Tensor g = c.to(kGpu);
  auto same = [](const Tensor& got, const Tensor& want) {
    CHECK(got.device() == kGpu);
    CHECK(got.strides() == want.strides());  // views are metadata: identical on both
    CHECK(mismatch(got, want, 0.0) == "");
  };
  same(g.view({24, 5}), c.view({24, 5}));
  same(g.view({-1}), c.view({-1}));
  same(g.reshape({6, 20}), c.reshape({6, 20}));
  same(g.permute({2, 0, 1}), c.permute({2, 0, 1}));
  same(g.transpose(0, 2), c.transpose(0, 2));
  same(g.select(2, 1).t(), c.select(2, 1).t());
  same(g.narrow(1, 2, 3), c.narrow(1, 2, 3));
  same(g.slice(2, 1, 5, 2), c.slice(2, 1, 5, 2));
  same(g.slice(0, -2, 4), c.slice(0, -2, 4));
  same(g.select(0, -1), c.select(0, -1));
  same(g.narrow(0, 0, 1).expand({3, 6, 5}), c.narrow(0, 0, 1).expand({3, 6, 5}));
  same(g.unsqueeze(1), c.unsqueeze(1));
  same(g.narrow(1, 0, 1).squeeze(1), c.narrow(1, 0, 1).squeeze(1));
  same(g.flatten(1), c.flatten(1));
  same(g.flatten(), c.flatten());
  // Overlapping windows (what chapter 03's im2col builds), and a copy of them.
  same(g.as_strided({4, 3, 3}, {5, 1, 5}, 2), c.as_strided({4, 3, 3}, {5, 1, 5}, 2));
  CHECK(mismatch(g.as_strided({4, 3, 3}, {5, 1, 5}, 2).contiguous(),
                 c.as_strided({4, 3, 3}, {5, 1, 5}, 2).contiguous(), 0.0) == "");
  // A reshape that cannot be a view copies, on the GPU too.
  const Tensor r = g.transpose(0, 1).reshape({-1});
  CHECK(r.device() == kGpu);
  CHECK(mismatch(r, c.transpose(0, 1).reshape({-1}), 0.0) == "");
}

TEST_CASE("contiguous and clone copy on the GPU", "[ch02][cuda][tensor]") {
  Generator gen(32);
  const Tensor c = randn({5, 7}, gen);
  const Tensor g = c.to(kGpu);
  const Tensor gt = g.t().contiguous();
  CHECK(gt.is_contiguous());
  CHECK(gt.device() == kGpu);
  CHECK(mismatch(gt, c.t().contiguous(), 0.0) == "");
  CHECK(g.contiguous().storage() == g.storage());  // already contiguous: itself

  Tensor copy = g.clone();
  CHECK(copy.storage() != g.storage());
  copy.fill_(0.0);  // the clone is independent
  CHECK(mismatch(g, c, 0.0) == "");
  CHECK(mismatch(g.slice(1, 0, 7, 3).clone(), c.slice(1, 0, 7, 3), 0.0) == "");
  const Tensor empty_rows = g.narrow(0, 0, 0).clone();
  CHECK(empty_rows.shape() == Shape{0, 7});
}

TEST_CASE("to(Device) moves data between the CPU and the GPU", "[ch02][cuda][tensor]") {
  Generator gen(33);
  const Tensor c = randn({3, 8}, gen);
  const Tensor g = c.to(kGpu);
  CHECK(g.is_cuda());
  CHECK(g.to(kGpu).storage() == g.storage());  // already there: itself
  CHECK(mismatch(g.cpu(), c, 0.0) == "");
  CHECK(g.cpu().device() == Device::cpu());
  CHECK(mismatch(c.cuda(0), c, 0.0) == "");
  CHECK(mismatch(c.t().to(kGpu), c.t(), 0.0) == "");  // a view travels by its elements
  CHECK(mismatch(g.t().cpu(), c.t(), 0.0) == "");
  CHECK(g.t().to_vector<float>() == c.t().to_vector<float>());
  CHECK(g.select(0, 1).select(0, 3).item<float>() == c.select(0, 1).select(0, 3).item<float>());
  CHECK(c.narrow(0, 0, 0).to(kGpu).shape() == Shape{0, 8});
  if (cuda::device_count() >= 2) {  // GPU to GPU goes through the host
    const Tensor other = g.to(Device::cuda(1));
    CHECK(other.device() == Device::cuda(1));
    CHECK(mismatch(other, c, 0.0) == "");
    CHECK(mismatch(add(other, other), add(c, c), kElementwiseTol) == "");
  }
}

TEST_CASE("to(DType) converts on the GPU like the CPU", "[ch02][cuda][tensor]") {
  const std::vector<float> v = {-2.75f, -1.5f, -0.25f, 0.0f, 0.5f, 1.99f, 3.0f, 1e6f};
  const Tensor c = from_data(std::span<const float>(v), {2, 4});
  const Tensor g = c.to(kGpu);
  const Tensor gi = g.to(DType::Int64);
  CHECK(gi.device() == kGpu);
  CHECK(mismatch(gi, c.to(DType::Int64), 0.0) == "");  // truncation toward zero
  CHECK(mismatch(gi.to(DType::Float32), c.to(DType::Int64).to(DType::Float32), 0.0) == "");
  CHECK(mismatch(g.t().to(DType::Int64), c.t().to(DType::Int64), 0.0) == "");
  CHECK(g.to(DType::Float32).storage() == g.storage());
}

TEST_CASE("copy_, fill_ and zero_ on GPU tensors", "[ch02][cuda][tensor]") {
  Generator gen(34);
  const Tensor src = randn({4, 5}, gen);
  Tensor gc = zeros({4, 5}), gg = zeros({4, 5}, {DType::Float32, kGpu});
  gg.copy_(src);  // CPU -> GPU
  gc.copy_(src);
  CHECK(mismatch(gg, src, 0.0) == "");
  Tensor back = zeros({4, 5});
  back.copy_(gg);  // GPU -> CPU
  CHECK(mismatch(back, src, 0.0) == "");
  // Broadcast source, strided destination, GPU -> GPU.
  const Tensor row = randn({5}, gen);
  Tensor view_g = gg.slice(0, 0, 4, 2), view_c = gc.slice(0, 0, 4, 2);
  view_g.copy_(row.to(kGpu));
  view_c.copy_(row);
  CHECK(mismatch(gg, gc, 0.0) == "");
  // dtype conversion inside copy_.
  Tensor ints = zeros({4, 5}, {DType::Int64, kGpu});
  ints.copy_(mul(src, 3.0).to(kGpu));
  CHECK(mismatch(ints, mul(src, 3.0).to(DType::Int64), 0.0) == "");
  // Across devices into a contiguous view at an offset (one direct transfer), and across
  // devices with broadcasting, strides or a dtype conversion (through a temporary).
  Tensor tall_g = zeros({6, 5}, {DType::Float32, kGpu}), tall_c = zeros({6, 5});
  tall_g.narrow(0, 1, 4).copy_(src);
  tall_c.narrow(0, 1, 4).copy_(src);
  CHECK(mismatch(tall_g, tall_c, 0.0) == "");
  Tensor rows_c = full({6, 5}, -1.0);
  rows_c.narrow(0, 2, 4).copy_(tall_g.narrow(0, 1, 4));
  CHECK(mismatch(rows_c.narrow(0, 2, 4), src, 0.0) == "");
  CHECK(mismatch(rows_c.narrow(0, 0, 2), full({2, 5}, -1.0), 0.0) == "");
  Tensor wide_g = zeros({4, 5}, {DType::Float32, kGpu});
  wide_g.copy_(row);  // CPU row broadcast into every GPU row
  CHECK(mismatch(wide_g, row.expand({4, 5}), 0.0) == "");
  Tensor strided_c = zeros({5, 4});
  strided_c.t().copy_(gg);  // GPU -> a transposed CPU view
  CHECK(mismatch(strided_c.t(), gg.cpu(), 0.0) == "");
  Tensor ints_c = zeros({4, 5}, {DType::Int64});
  ints_c.copy_(mul(src, 3.0).to(kGpu));  // float32 GPU -> int64 CPU
  CHECK(mismatch(ints_c, mul(src, 3.0).to(DType::Int64), 0.0) == "");
  // Copying a tensor onto a transposed view of itself.
  Tensor sq_c = randn({4, 4}, gen), sq_g = sq_c.to(kGpu);
  sq_c.copy_(sq_c.t());
  sq_g.copy_(sq_g.t());
  CHECK(mismatch(sq_g, sq_c, 0.0) == "");

  Tensor t = randn({3, 6}, gen).to(kGpu);
  Tensor col = t.slice(1, 1, 6, 2);
  col.fill_(4.5);
  t.narrow(0, 2, 1).zero_();
  CHECK(mismatch(t.slice(1, 1, 6, 2).narrow(0, 0, 2), full({2, 3}, 4.5), 0.0) == "");
  CHECK(mismatch(t.narrow(0, 2, 1), zeros({1, 6}), 0.0) == "");
  Tensor i64 = empty({2, 3}, {DType::Int64, kGpu});
  i64.fill_(-7.0);
  CHECK(mismatch(i64, full({2, 3}, -7.0, {DType::Int64}), 0.0) == "");
}

TEST_CASE("printing a GPU tensor shows its device and values", "[ch02][cuda][tensor]") {
  const std::vector<float> v = {1.5f, -2.0f};
  std::ostringstream os;
  os << from_data(std::span<const float>(v), {2}, kGpu);
  CHECK_THAT(os.str(),
             Catch::Contains("cuda:0") && Catch::Contains("1.5") && Catch::Contains("-2"));
}

// The message names both devices. (Not a stored `Contains("cpu") && Contains("cuda:0")`:
// Catch2 v2's && keeps pointers to its two temporary matchers, which die at the end of
// the statement; the first GPU run of this test crashed on them.)
struct NamesBothDevices : Catch::MatcherBase<std::string> {
  bool match(const std::string& message) const override {
    return message.find("cpu") != std::string::npos && message.find("cuda:0") != std::string::npos;
  }
  std::string describe() const override { return "names both cpu and cuda:0"; }
};

TEST_CASE("mixing devices is an error that names both devices", "[ch02][cuda][errors]") {
  const Tensor c = ones({2, 3});
  const Tensor g = ones({2, 3}, {DType::Float32, kGpu});
  const NamesBothDevices both;
  CHECK_THROWS_WITH(add(c, g), both);
  CHECK_THROWS_WITH(mul(g, c), both);
  CHECK_THROWS_WITH(matmul(g, c.t()), both);
  Tensor target = g.clone();
  CHECK_THROWS_WITH(target.add_(c), both);
  CHECK_THROWS_AS(add(c, g), Error);
}

TEST_CASE("asking for a GPU that is not there is an error with a hint", "[ch02][cuda][errors]") {
  const int count = cuda::device_count();
  REQUIRE(count >= 1);
  CHECK(cuda::is_built());
  CHECK(cuda::is_available());
  CHECK_FALSE(cuda::device_name(0).empty());
  CHECK_THROWS_WITH(cuda_backend(count),
                    Catch::Contains("cuda:" + std::to_string(count)) && Catch::Contains("hint:"));
  CHECK_THROWS_AS(zeros({2}, {DType::Float32, Device::cuda(count)}), Error);
  CHECK_THROWS_AS(cuda::device_name(count), Error);
  CHECK(&backend_for(kGpu) == &cuda_backend(0));  // one backend per device
  CHECK(backend_for(kGpu).device() == kGpu);
}
