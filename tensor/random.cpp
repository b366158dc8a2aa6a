// Random tensors (see random.hpp). The numbers themselves come from the backends'
// random() kernels, which both evaluate philox.hpp: element i of a draw that starts at
// stream position `offset` is a function of (seed, offset + i) alone.
#include "tensor/random.hpp"

#include <numeric>
#include <utility>
#include <vector>

#include "tensor/backend.hpp"
#include "tensor/philox.hpp"

namespace ddp {

namespace {

Tensor& draw(Tensor& t, RandomSpec::Kind kind, float a, float b, Generator& gen) {
  detail::check_writable(t, kind == RandomSpec::Kind::Uniform ? "uniform_" : "normal_");
  DDP_CHECK(t.dtype() == DType::Float32, "random numbers fill float32 tensors, got ", t.describe());
  const std::uint64_t count = static_cast<std::uint64_t>(t.numel());
  const RandomSpec spec{kind, gen.seed(), gen.take(count), a, b};
  if (count == 0) return t;
  if (t.is_contiguous()) {
    backend_for(t.device()).random(spec, t);
  } else {  // draw in row-major order, then scatter into the view
    Tensor dense = empty(t.shape(), {DType::Float32, t.device()});
    backend_for(t.device()).random(spec, dense);
    t.copy_(dense);
  }
  return t;
}

}  // namespace

Tensor& uniform_(Tensor& t, float low, float high, Generator& gen) {
  DDP_CHECK(low <= high, "uniform: low ", low, " is greater than high ", high);
  return draw(t, RandomSpec::Kind::Uniform, low, high, gen);
}

Tensor& normal_(Tensor& t, float mean, float std, Generator& gen) {
  DDP_CHECK(std >= 0.0f, "normal: standard deviation ", std, " is negative");
  return draw(t, RandomSpec::Kind::Normal, mean, std, gen);
}

Tensor uniform(const Shape& shape, float low, float high, Generator& gen, Device device) {
  Tensor t = empty(shape, {DType::Float32, device});
  return uniform_(t, low, high, gen);
}

Tensor rand(const Shape& shape, Generator& gen, Device device) {
  return uniform(shape, 0.0f, 1.0f, gen, device);
}

Tensor normal(const Shape& shape, float mean, float std, Generator& gen, Device device) {
  Tensor t = empty(shape, {DType::Float32, device});
  return normal_(t, mean, std, gen);
}

Tensor randn(const Shape& shape, Generator& gen, Device device) {
  return normal(shape, 0.0f, 1.0f, gen, device);
}

Tensor randperm(std::int64_t n, Generator& gen) {
  DDP_CHECK(n >= 0, "randperm: n must be >= 0, got ", n);
  const std::uint64_t offset = gen.take(static_cast<std::uint64_t>(n));
  std::vector<std::int64_t> perm(static_cast<std::size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  // Fisher-Yates: position i swaps with a uniformly chosen j in [0, i]. A 64-bit random
  // value keeps the modulo bias below 2^-32 for any n that fits in memory.
  for (std::int64_t i = n - 1; i > 0; --i) {
    const philox::Uint4 w =
        philox::random_words(gen.seed(), offset + static_cast<std::uint64_t>(i));
    const std::uint64_t r = (static_cast<std::uint64_t>(w.y) << 32) | w.x;
    const auto j = static_cast<std::int64_t>(r % static_cast<std::uint64_t>(i + 1));
    std::swap(perm[i], perm[j]);
  }
  return from_data(std::span<const std::int64_t>(perm), {n});
}

}  // namespace ddp
