// Chapter 01, tensor.hpp: creation (empty, zeros, ones, full, scalar_tensor, arange,
// from_data, *_like), metadata, element access (data, raw_data, to_vector, item),
// dtype conversion and printing. Values are checked against the storage itself,
// read by the reference (tests/support/reference.hpp), not only through to_vector.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tensor/cuda/device_info.hpp"
#include "tensor/ops.hpp"
#include "tensor/storage.hpp"
#include "tensor/tensor.hpp"
#include "tests/support/reference.hpp"

using Catch::Contains;
using ddp::Device;
using ddp::DType;
using ddp::Shape;
using ddp::Tensor;
namespace ref = ddp::ref;

namespace {

ref::Array constant(const Shape& shape, double value) {
  return ref::Array{shape, std::vector<double>(static_cast<std::size_t>(ref::count(shape)), value)};
}

}  // namespace

TEST_CASE("zeros, ones and full fill every element, in both dtypes", "[ch01][creation]") {
  std::mt19937 rng(101);
  for (int trial = 0; trial < 40; ++trial) {
    const Shape shape = ref::random_shape(rng, 0, 4, 5);
    INFO("shape " << ref::shape_text(shape));
    for (DType dtype : {DType::Float32, DType::Int64}) {
      const Tensor z = ddp::zeros(shape, {dtype});
      const Tensor o = ddp::ones(shape, {dtype});
      const Tensor f = ddp::full(shape, -3.0, {dtype});
      for (const Tensor* t : {&z, &o, &f}) {
        CHECK(t->dtype() == dtype);
        CHECK(t->shape() == shape);
        CHECK(t->strides() == ref::row_major_strides(shape));
        CHECK(t->is_contiguous());
        CHECK(t->device() == ddp::Device::cpu());
      }
      CHECK(ref::mismatch(z, constant(shape, 0.0), ref::kExact) == "");
      CHECK(ref::mismatch(o, constant(shape, 1.0), ref::kExact) == "");
      CHECK(ref::mismatch(f, constant(shape, -3.0), ref::kExact) == "");
    }
  }
  CHECK(ddp::full({3}, 0.1).to_vector<float>() == std::vector<float>(3, 0.1f));
}

TEST_CASE("empty allocates a tensor of the right shape, dtype and size", "[ch01][creation]") {
  const Tensor e = ddp::empty({3, 4}, {DType::Int64});
  CHECK(e.shape() == Shape{3, 4});
  CHECK(e.dtype() == DType::Int64);
  CHECK(e.is_contiguous());
  CHECK(e.offset() == 0);
  CHECK(e.storage()->nbytes() >= 12 * sizeof(std::int64_t));
  const Tensor none = ddp::empty({0, 5});
  CHECK(none.numel() == 0);
  CHECK(none.to_vector<float>().empty());
  // Sizes whose byte count passes 2^63 are refused, not wrapped to a small allocation
  // (2^62 floats wrapped to 0 bytes, and zeros() then wrote through a null pointer).
  CHECK_THROWS_WITH(ddp::zeros({std::int64_t{1} << 62}), Contains("more than 2^63 bytes"));
  CHECK_THROWS_WITH(ddp::empty({std::int64_t{1} << 32, std::int64_t{1} << 32}),
                    Contains("(4294967296, 4294967296)"));
  CHECK_THROWS_WITH(ddp::empty({-1, 0}), Contains("sizes must be >= 0"));
  CHECK(ddp::empty({std::int64_t{1} << 62, 0}).numel() == 0);  // empty: no bytes at all
}

TEST_CASE("empty_pinned is host memory, page-locked exactly when a GPU is usable",
          "[ch01][creation]") {
  // The GPU half (the driver sees it as page-locked, copies round-trip, blocks are
  // cached) is tests/ch02/test_cuda_runtime.cpp; here, what every machine must give.
  Tensor t = ddp::empty_pinned({3, 4}, DType::Int64);
  CHECK(t.shape() == Shape{3, 4});
  CHECK(t.dtype() == DType::Int64);
  CHECK(t.device() == Device::cpu());
  CHECK(t.is_contiguous());
  CHECK(t.is_pinned() == ddp::cuda::is_available());
  t.fill_(7);
  CHECK(t.to_vector<std::int64_t>() == std::vector<std::int64_t>(12, 7));
  CHECK(ddp::empty_pinned({0}).numel() == 0);
  CHECK_FALSE(ddp::empty({2}).is_pinned());
}

TEST_CASE("scalar_tensor makes a 0-d tensor with one element", "[ch01][creation]") {
  const Tensor s = ddp::scalar_tensor(2.5);
  CHECK(s.dim() == 0);
  CHECK(s.shape().empty());
  CHECK(s.strides().empty());
  CHECK(s.numel() == 1);
  CHECK(s.item<float>() == 2.5f);
  CHECK(s.to_vector<float>() == std::vector<float>{2.5f});
  const Tensor i = ddp::scalar_tensor(-7, {DType::Int64});
  CHECK(i.dtype() == DType::Int64);
  CHECK(i.item<std::int64_t>() == -7);
}

TEST_CASE("arange counts from start by step while below end", "[ch01][creation]") {
  CHECK(ddp::arange(5).to_vector<float>() == std::vector<float>{0, 1, 2, 3, 4});
  CHECK(ddp::arange(5).dtype() == DType::Float32);
  const Tensor i = ddp::arange(4, {DType::Int64});
  CHECK(i.dtype() == DType::Int64);
  CHECK(i.to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 1, 2, 3});
  CHECK(ddp::arange(2.0, 5.0).to_vector<float>() == std::vector<float>{2, 3, 4});
  CHECK(ddp::arange(0.5, 3.0, 0.75).to_vector<float>() ==
        std::vector<float>{0.5f, 1.25f, 2.0f, 2.75f});
  // The count is ceil((end - start) / step): 10 for 0, 0.1, ..., 0.9.
  const Tensor tenths = ddp::arange(0.0, 1.0, 0.1);
  REQUIRE(tenths.shape() == Shape{10});
  const auto values = tenths.to_vector<float>();
  for (std::size_t k = 0; k < values.size(); ++k) {
    CHECK(values[k] == Approx(0.1 * static_cast<double>(k)).margin(1e-6));
  }
  CHECK(ddp::arange(-3.0, 3.0, 2.0).to_vector<float>() == std::vector<float>{-3, -1, 1});
  CHECK(ddp::arange(3.0, 3.0).shape() == Shape{0});
  CHECK(ddp::arange(0).shape() == Shape{0});
}

TEST_CASE("from_data copies row-major host values into a new tensor", "[ch01][creation]") {
  const std::vector<float> values{1, 2, 3, 4, 5, 6};
  const Tensor t = ddp::from_data(values, {2, 3});
  CHECK(t.shape() == Shape{2, 3});
  CHECK(t.dtype() == DType::Float32);
  CHECK(t.is_contiguous());
  CHECK(ref::mismatch(t, ref::Array{{2, 3}, {1, 2, 3, 4, 5, 6}}, ref::kExact) == "");

  const std::vector<std::int64_t> labels{3, -1, 9000000000LL};
  const Tensor l = ddp::from_data(labels, {3});
  CHECK(l.dtype() == DType::Int64);
  CHECK(l.to_vector<std::int64_t>() == labels);

  // A copy: changing the host vector afterwards does not change the tensor.
  std::vector<float> host{7, 8};
  const Tensor c = ddp::from_data(host, {2});
  host[0] = 100;
  CHECK(c.to_vector<float>() == std::vector<float>{7, 8});

  CHECK(ddp::from_data(std::vector<float>{4.5f}, {}).item<float>() == 4.5f);
  CHECK(ddp::from_data(std::vector<float>{}, {0, 3}).shape() == Shape{0, 3});
}

TEST_CASE("from_data rejects a value count that does not match the shape",
          "[ch01][creation][errors]") {
  const std::vector<float> five{1, 2, 3, 4, 5};
  REQUIRE_THROWS_AS(ddp::from_data(five, {2, 3}), ddp::Error);
  REQUIRE_THROWS_WITH(ddp::from_data(five, {2, 3}), Contains("(2, 3)") && Contains("5"));
  const std::vector<std::int64_t> two{1, 2};
  REQUIRE_THROWS_WITH(ddp::from_data(two, {3}), Contains("(3,)") && Contains("2"));
}

TEST_CASE("metadata: size, stride, dim, numel and negative dims", "[ch01][creation]") {
  const Tensor t = ddp::zeros({2, 3, 4});
  CHECK(t.defined());
  CHECK(t.dim() == 3);
  CHECK(t.numel() == 24);
  CHECK(t.size(0) == 2);
  CHECK(t.size(-1) == 4);
  CHECK(t.size(-3) == 2);
  CHECK(t.stride(0) == 12);
  CHECK(t.stride(-1) == 1);
  CHECK(t.offset() == 0);
  CHECK_FALSE(t.is_cuda());
  CHECK_THROWS_AS(t.size(3), ddp::Error);
  CHECK_THROWS_AS(t.stride(-4), ddp::Error);
  CHECK_FALSE(Tensor().defined());
}

TEST_CASE("describe names dtype, shape and device", "[ch01][creation]") {
  CHECK(ddp::zeros({2, 3}).describe() == "float32 (2, 3) on cpu");
  CHECK(ddp::zeros({4}, {DType::Int64}).describe() == "int64 (4,) on cpu");
  CHECK(ddp::scalar_tensor(1.0).describe() == "float32 () on cpu");
}

TEST_CASE("data<T> points at element 0 and checks the element type", "[ch01][creation]") {
  Tensor t = ddp::arange(6).view({2, 3});
  float* p = t.data<float>();
  CHECK(p == t.raw_data());
  CHECK(p == static_cast<float*>(t.storage()->data()) + t.offset());
  p[4] = 40.0f;  // writes land in the tensor
  CHECK(ref::read(t).v[4] == 40.0);
  // raw_data of a view is offset into the shared storage.
  const Tensor row = t.select(0, 1);
  CHECK(row.raw_data() == static_cast<void*>(p + 3));
  REQUIRE_THROWS_WITH(t.data<std::int64_t>(),
                      Contains("data<int64>") && Contains("float32 (2, 3) on cpu"));
}

TEST_CASE("to_vector and item read row-major, also through strided views", "[ch01][creation]") {
  std::mt19937 rng(102);
  for (int trial = 0; trial < 30; ++trial) {
    const Shape shape = ref::random_shape(rng, 0, 4, 5);
    const ref::Array values = ref::random_array(rng, shape, -5, 5);
    const ref::Layout layout = ref::random_layout(rng, shape);
    const Tensor t = ref::make_tensor(values, layout.strides, layout.offset);
    const auto got = t.to_vector<float>();
    REQUIRE(got.size() == values.v.size());
    for (std::size_t k = 0; k < got.size(); ++k) CHECK(got[k] == values.v[k]);

    const ref::Array ints = ref::random_ints(rng, shape, -1000, 1000);
    const Tensor ti = ref::make_tensor(ints, layout.strides, layout.offset, DType::Int64);
    const auto got_i = ti.to_vector<std::int64_t>();
    REQUIRE(got_i.size() == ints.v.size());
    for (std::size_t k = 0; k < got_i.size(); ++k) {
      CHECK(got_i[k] == static_cast<std::int64_t>(ints.v[k]));
    }
  }
  const Tensor one = ref::make_tensor(ref::Array{{1, 1}, {3.25}}, {7, 3}, 5);
  CHECK(one.item<float>() == 3.25f);
}

TEST_CASE("item refuses a tensor with more or fewer than one element", "[ch01][creation][errors]") {
  REQUIRE_THROWS_AS(ddp::zeros({2}).item<float>(), ddp::Error);
  REQUIRE_THROWS_AS(ddp::zeros({0}).item<float>(), ddp::Error);
  REQUIRE_THROWS_WITH(ddp::zeros({2, 3}).item<float>(), Contains("(2, 3)"));
}

TEST_CASE("empty_like, zeros_like and ones_like copy shape and dtype, not storage",
          "[ch01][creation]") {
  const Tensor base = ddp::full({3, 4}, 5.0, {DType::Int64});
  const Tensor view = base.t();
  for (const Tensor* src : {&base, &view}) {
    const Tensor e = ddp::empty_like(*src);
    const Tensor z = ddp::zeros_like(*src);
    const Tensor o = ddp::ones_like(*src);
    for (const Tensor* t : {&e, &z, &o}) {
      CHECK(t->shape() == src->shape());
      CHECK(t->dtype() == DType::Int64);
      CHECK(t->storage() != base.storage());
    }
    CHECK(ref::mismatch(z, constant(src->shape(), 0.0), ref::kExact) == "");
    CHECK(ref::mismatch(o, constant(src->shape(), 1.0), ref::kExact) == "");
  }
  CHECK(ref::mismatch(base, constant({3, 4}, 5.0), ref::kExact) == "");
}

TEST_CASE("to(DType) converts values, truncating toward zero into int64",
          "[ch01][creation][dtype]") {
  const Tensor f = ddp::from_data(std::vector<float>{2.7f, -2.7f, 0.0f, 1e6f, -0.5f}, {5});
  const Tensor i = f.to(DType::Int64);
  CHECK(i.dtype() == DType::Int64);
  CHECK(i.to_vector<std::int64_t>() == std::vector<std::int64_t>{2, -2, 0, 1000000, 0});
  const Tensor back = i.to(DType::Float32);
  CHECK(back.dtype() == DType::Float32);
  CHECK(back.to_vector<float>() == std::vector<float>{2, -2, 0, 1e6f, 0});
  // The same dtype gives the tensor itself: no copy.
  CHECK(f.to(DType::Float32).storage() == f.storage());
  // A strided view converts element by element in logical order.
  std::mt19937 rng(103);
  const ref::Array ints = ref::random_ints(rng, {3, 4, 2}, -50, 50);
  const ref::Layout layout = ref::random_layout(rng, {3, 4, 2});
  const Tensor strided = ref::make_tensor(ints, layout.strides, layout.offset, DType::Int64);
  const Tensor converted = strided.to(DType::Float32);
  CHECK(converted.dtype() == DType::Float32);
  CHECK(ref::mismatch(converted, ints, ref::kExact) == "");
}

TEST_CASE("to(Device::cpu()) of a CPU tensor is the tensor itself", "[ch01][creation]") {
  const Tensor t = ddp::ones({2});
  CHECK(t.to(ddp::Device::cpu()).storage() == t.storage());
  CHECK(t.cpu().storage() == t.storage());
}

TEST_CASE("a tensor sent to a GPU that is not there is an error, not a crash", "[ch01][creation]") {
  // cuda:N with N = device_count() names no GPU on every machine: cuda:0 where there is
  // none (or the build has no CUDA), the one past the last where there are some.
  // Chapter 02's tests cover the GPUs that are there.
  const int missing = ddp::cuda::device_count();
  const std::string name = "cuda:" + std::to_string(missing);
  INFO(missing << " usable GPU(s)");
  const Tensor t = ddp::ones({2});
  CHECK_THROWS_AS(t.to(Device::cuda(missing)), ddp::Error);
  CHECK_THROWS_WITH(t.to(Device::cuda(missing)), Contains(name));
  CHECK_THROWS_WITH(ddp::zeros({2}, {DType::Float32, Device::cuda(missing)}), Contains(name));
  if (missing == 0) CHECK_THROWS_AS(t.cuda(), ddp::Error);  // cuda() is cuda:0
}

TEST_CASE("the Tensor constructor checks its metadata", "[ch01][creation][errors]") {
  auto storage = std::make_shared<ddp::Storage>(64, ddp::Device::cpu());
  const Tensor ok(storage, {2, 3}, {1, 2}, 1, DType::Float32);
  CHECK(ok.shape() == Shape{2, 3});
  CHECK(ok.strides() == Shape{1, 2});
  CHECK(ok.offset() == 1);
  CHECK(ok.storage() == storage);
  REQUIRE_THROWS_WITH(Tensor(storage, {2, 3}, {1}, 0, DType::Float32),
                      Contains("(2, 3)") && Contains("(1,)"));
  REQUIRE_THROWS_WITH(Tensor(storage, {2, -1}, {1, 1}, 0, DType::Float32), Contains("(2, -1)"));
}

TEST_CASE("operator<< prints dtype, shape, device and the values", "[ch01][creation]") {
  std::ostringstream os;
  os << ddp::from_data(std::vector<float>{1.5f, -2.25f, 3.0f, 4.0f, 5.0f, 6.0f}, {2, 3});
  const std::string text = os.str();
  CHECK_THAT(text, Contains("float32") && Contains("(2, 3)") && Contains("cpu") &&
                       Contains("1.5") && Contains("-2.25"));
  std::ostringstream os_int;
  os_int << ddp::from_data(std::vector<std::int64_t>{42, -17}, {2});
  CHECK_THAT(os_int.str(), Contains("int64") && Contains("42") && Contains("-17"));
}
