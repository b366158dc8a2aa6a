// Chapter 01, random.hpp: element i of a draw is a pure function of (seed, offset + i)
// through tensor/philox.hpp, evaluated here independently; Generator bookkeeping;
// the distributions' moments within statistical tolerance; randperm.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include "tensor/philox.hpp"
#include "tensor/random.hpp"
#include "tensor/tensor.hpp"
#include "tests/support/reference.hpp"

using Catch::Contains;
using ddp::Generator;
using ddp::Shape;
using ddp::Tensor;
namespace ref = ddp::ref;
namespace philox = ddp::philox;

namespace {

// What element i of a uniform draw at `offset` must be, from the Philox functions.
float expected_uniform01(std::uint64_t seed, std::uint64_t position) {
  return philox::uniform01(philox::random_words(seed, position).x);
}

float expected_standard_normal(std::uint64_t seed, std::uint64_t position) {
  const philox::Uint4 words = philox::random_words(seed, position);
  return philox::standard_normal(words.x, words.y);
}

struct Moments {
  double mean, variance;
};

Moments moments(const std::vector<float>& v) {
  double sum = 0;
  for (float x : v) sum += x;
  const double mean = sum / static_cast<double>(v.size());
  double sq = 0;
  for (float x : v) sq += (x - mean) * (x - mean);
  return {mean, sq / static_cast<double>(v.size() - 1)};
}

}  // namespace

TEST_CASE("Philox4x32-10 reproduces the published known-answer vectors", "[ch01][random][philox]") {
  // From the Random123 distribution (kat_vectors): counter, key -> output.
  const philox::Uint4 zero = philox::philox4x32_10({0, 0, 0, 0}, 0, 0);
  CHECK(zero.x == 0x6627e8d5u);
  CHECK(zero.y == 0xe169c58du);
  CHECK(zero.z == 0xbc57ac4cu);
  CHECK(zero.w == 0x9b00dbd8u);
  const philox::Uint4 ones = philox::philox4x32_10(
      {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, 0xffffffffu, 0xffffffffu);
  CHECK(ones.x == 0x408f276du);
  CHECK(ones.y == 0x41c83b0eu);
  CHECK(ones.z == 0xa20bc7c6u);
  CHECK(ones.w == 0x6d5451fdu);
  const philox::Uint4 pi = philox::philox4x32_10(
      {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, 0xa4093822u, 0x299f31d0u);
  CHECK(pi.x == 0xd16cfe09u);
  CHECK(pi.y == 0x94fdccebu);
  CHECK(pi.z == 0x5001e420u);
  CHECK(pi.w == 0x24126ea1u);
}

TEST_CASE("Generator reserves stream positions and manual_seed restarts them", "[ch01][random]") {
  Generator gen(42);
  CHECK(gen.seed() == 42);
  CHECK(gen.offset() == 0);
  CHECK(gen.take(10) == 0);
  CHECK(gen.take(5) == 10);
  CHECK(gen.offset() == 15);
  gen.manual_seed(7);
  CHECK(gen.seed() == 7);
  CHECK(gen.offset() == 0);
  CHECK(Generator().seed() == 0);
}

TEST_CASE("rand and randn take element i from stream position offset + i",
          "[ch01][random][philox]") {
  for (std::uint64_t seed :
       {std::uint64_t{0}, std::uint64_t{1234}, std::uint64_t{0x123456789abcdefULL}}) {
    Generator gen(seed);
    gen.take(17);  // start somewhere other than 0
    INFO("seed " << seed);
    const Tensor u = ddp::rand({3, 5, 7}, gen);
    CHECK(gen.offset() == 17 + 105);
    const Tensor z = ddp::randn({4, 25}, gen);
    CHECK(gen.offset() == 17 + 105 + 100);
    CHECK(u.shape() == Shape{3, 5, 7});
    CHECK(u.dtype() == ddp::DType::Float32);
    CHECK(u.is_contiguous());
    const auto uv = u.to_vector<float>();
    const auto zv = z.to_vector<float>();
    for (std::size_t i = 0; i < uv.size(); ++i) {
      INFO("uniform element " << i);
      CHECK(uv[i] == expected_uniform01(seed, 17 + i));
    }
    for (std::size_t i = 0; i < zv.size(); ++i) {
      INFO("normal element " << i);
      CHECK(zv[i] == expected_standard_normal(seed, 17 + 105 + i));
    }
  }
}

TEST_CASE("uniform and normal scale the Philox values into range", "[ch01][random][philox]") {
  Generator gen(99);
  const Tensor u = ddp::uniform({1000}, -2.0f, 3.0f, gen);
  const Tensor z = ddp::normal({1000}, 1.5f, 0.25f, gen);
  const auto uv = u.to_vector<float>(), zv = z.to_vector<float>();
  for (std::size_t i = 0; i < uv.size(); ++i) {
    const double want = -2.0 + 5.0 * expected_uniform01(99, i);
    REQUIRE(uv[i] == Approx(want).margin(1e-6));
  }
  for (std::size_t i = 0; i < zv.size(); ++i) {
    const double want = 1.5 + 0.25 * expected_standard_normal(99, 1000 + i);
    REQUIRE(zv[i] == Approx(want).margin(1e-6));
  }
}

TEST_CASE("the same seed gives the same values, another seed or offset does not",
          "[ch01][random]") {
  Generator g1(5), g2(5), g3(6);
  const auto a = ddp::randn({1000}, g1).to_vector<float>();
  const auto b = ddp::randn({1000}, g2).to_vector<float>();
  const auto c = ddp::randn({1000}, g3).to_vector<float>();
  const auto next = ddp::randn({1000}, g1).to_vector<float>();  // offset 1000
  CHECK(a == b);
  std::size_t same_seed = 0, same_offset = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    same_seed += a[i] == c[i];
    same_offset += a[i] == next[i];
  }
  CHECK(same_seed == 0);
  CHECK(same_offset == 0);
  // Restarting the stream repeats it, draw by draw.
  g1.manual_seed(5);
  CHECK(ddp::randn({1000}, g1).to_vector<float>() == a);
  CHECK(ddp::randn({1000}, g1).to_vector<float>() == next);
  // One draw of 2n equals two draws of n: the values depend on positions, not calls.
  Generator whole(8), halves(8);
  const auto both = ddp::rand({2, 300}, whole).to_vector<float>();
  auto first = ddp::rand({300}, halves).to_vector<float>();
  const auto second = ddp::rand({300}, halves).to_vector<float>();
  first.insert(first.end(), second.begin(), second.end());
  CHECK(both == first);
}

TEST_CASE("uniform_in never returns high, even where low + (high - low) u rounds up to it",
          "[ch01][random][philox]") {
  // The largest u, 1 - 2^-24: 1 + (2 - 1) u is halfway between 2 - 2^-23 and 2, and rounds
  // to 2. The draw is folded back to low.
  const std::uint32_t top = 0xFFFFFFFFu;
  CHECK(1.0f + 1.0f * philox::uniform01(top) == 2.0f);  // the rounding the fold is for
  CHECK(philox::uniform_in(1.0f, 2.0f, top) == 1.0f);
  CHECK(philox::uniform_in(1.0f, 2.0f, 0x80000000u) == 1.5f);  // u = 1/2: unchanged
}

TEST_CASE("uniform samples lie in the half-open range low to high with the right mean and variance",
          "[ch01][random][statistics]") {
  Generator gen(2024);
  const double low = -2.0, high = 3.0;
  const std::size_t n = 100000;
  const auto v = ddp::uniform({static_cast<std::int64_t>(n)}, static_cast<float>(low),
                              static_cast<float>(high), gen)
                     .to_vector<float>();
  REQUIRE(v.size() == n);
  CHECK(*std::min_element(v.begin(), v.end()) >= low);
  CHECK(*std::max_element(v.begin(), v.end()) < high);
  const Moments m = moments(v);
  const double var = (high - low) * (high - low) / 12.0;  // 25/12
  // Standard error of the mean sqrt(var/n) = 0.0046; of the variance about
  // sqrt(0.8 var^2/n) = 0.0059 for a uniform. Allow 5 of each.
  CHECK(m.mean == Approx((low + high) / 2).margin(5 * std::sqrt(var / n)));
  CHECK(m.variance == Approx(var).margin(5 * std::sqrt(0.8 * var * var / n)));
  // Ten equal bins each hold about a tenth: sd sqrt(n 0.1 0.9) = 95, allow 5 sd.
  std::vector<int> bins(10, 0);
  for (float x : v)
    ++bins[std::min<std::size_t>(9, static_cast<std::size_t>((x - low) / (high - low) * 10))];
  for (int count : bins) CHECK(std::abs(count - 10000) < 475);
  // rand() is uniform(0, 1).
  const auto r = ddp::rand({20000}, gen).to_vector<float>();
  CHECK(*std::min_element(r.begin(), r.end()) >= 0.0f);
  CHECK(*std::max_element(r.begin(), r.end()) < 1.0f);
  CHECK(moments(r).mean == Approx(0.5).margin(5 * std::sqrt(1.0 / 12 / 20000)));
}

TEST_CASE("normal samples have the requested mean and standard deviation",
          "[ch01][random][statistics]") {
  Generator gen(77);
  const std::size_t n = 100000;
  const double mean = -1.0, std = 2.5;
  const auto v = ddp::normal({static_cast<std::int64_t>(n)}, static_cast<float>(mean),
                             static_cast<float>(std), gen)
                     .to_vector<float>();
  const Moments m = moments(v);
  // Standard errors: std/sqrt(n) = 0.0079 for the mean, std/sqrt(2n) = 0.0056 for std.
  CHECK(m.mean == Approx(mean).margin(5 * std / std::sqrt(n)));
  CHECK(std::sqrt(m.variance) == Approx(std).margin(5 * std / std::sqrt(2.0 * n)));
  // About 68.27% within one standard deviation (sd of the fraction 0.0015).
  std::size_t inside = 0;
  for (float x : v) inside += std::fabs(x - mean) < std;
  CHECK(static_cast<double>(inside) / n == Approx(0.6827).margin(0.0075));
  const Moments standard =
      moments(ddp::randn({static_cast<std::int64_t>(n)}, gen).to_vector<float>());
  CHECK(standard.mean == Approx(0.0).margin(5 / std::sqrt(n)));
  CHECK(standard.variance == Approx(1.0).margin(5 * std::sqrt(2.0 / n)));
}

TEST_CASE("uniform_ and normal_ fill a tensor in place like their out-of-place twins",
          "[ch01][random]") {
  Generator g1(31), g2(31);
  Tensor t = ddp::zeros({4, 6});
  Tensor& same = ddp::uniform_(t, -1.0f, 1.0f, g1);
  CHECK(&same == &t);
  CHECK(g1.offset() == 24);
  CHECK(ref::bitwise_mismatch(t, ddp::uniform({4, 6}, -1.0f, 1.0f, g2)) == "");
  Tensor& same_n = ddp::normal_(t, 0.0f, 0.02f, g1);
  CHECK(&same_n == &t);
  CHECK(ref::bitwise_mismatch(t, ddp::normal({4, 6}, 0.0f, 0.02f, g2)) == "");
  CHECK(g1.offset() == g2.offset());
  // A strided view is filled in its own row-major order, as if it were contiguous, and
  // the storage slots outside the view keep their values.
  Generator g3(47), g4(47);
  Tensor wide = ddp::zeros({4, 6});
  Tensor view = wide.slice(1, 1, 6, 2).t();  // (3, 4), strides (2, 6)
  ddp::uniform_(view, 0.0f, 1.0f, g3);
  CHECK(ref::bitwise_mismatch(view, ddp::uniform({3, 4}, 0.0f, 1.0f, g4)) == "");
  const auto all = wide.to_vector<float>();
  for (std::size_t k = 0; k < all.size(); ++k) {
    if (k % 2 == 0) CHECK(all[k] == 0.0f);  // columns 0, 2, 4 are not in the view
  }
  // Only float32.
  Tensor labels = ddp::zeros({3}, {ddp::DType::Int64});
  REQUIRE_THROWS_WITH(ddp::normal_(labels, 0.0f, 1.0f, g1), Contains("int64"));
  REQUIRE_THROWS_AS(ddp::uniform_(labels, 0.0f, 1.0f, g1), ddp::Error);
}

TEST_CASE("empty draws take no stream positions", "[ch01][random]") {
  Generator gen(3);
  const Tensor e = ddp::rand({0, 4}, gen);
  CHECK(e.shape() == Shape{0, 4});
  CHECK(gen.offset() == 0);
  const Tensor s = ddp::randn({}, gen);  // 0-d: one value
  CHECK(s.dim() == 0);
  CHECK(gen.offset() == 1);
  CHECK(s.item<float>() == expected_standard_normal(3, 0));
}

TEST_CASE("randperm is a seeded permutation of 0..n-1", "[ch01][random][randperm]") {
  for (std::int64_t n : {0, 1, 2, 7, 100, 1000}) {
    Generator gen(11);
    const Tensor p = ddp::randperm(n, gen);
    INFO("n = " << n);
    CHECK(p.dtype() == ddp::DType::Int64);
    CHECK(p.shape() == Shape{n});
    auto values = p.to_vector<std::int64_t>();
    std::vector<std::int64_t> sorted = values;
    std::sort(sorted.begin(), sorted.end());
    std::vector<std::int64_t> identity(static_cast<std::size_t>(n));
    std::iota(identity.begin(), identity.end(), std::int64_t{0});
    CHECK(sorted == identity);
    Generator again(11);
    CHECK(ddp::randperm(n, again).to_vector<std::int64_t>() == values);
    if (n >= 100) {
      Generator other(12);
      CHECK(ddp::randperm(n, other).to_vector<std::int64_t>() != values);
      CHECK(values != identity);
      CHECK(gen.offset() > 0);
    }
  }
}

TEST_CASE("randperm draws every permutation of 3 equally often", "[ch01][random][randperm]") {
  // 30000 shuffles: each of the 6 orders expected 5000 times, sd sqrt(30000/6*5/6) = 65.
  // A classic off-by-one (swapping with any position) gives 4444 or 5556: caught.
  Generator gen(2);
  std::map<std::vector<std::int64_t>, int> counts;
  for (int trial = 0; trial < 30000; ++trial) {
    ++counts[ddp::randperm(3, gen).to_vector<std::int64_t>()];
  }
  CHECK(counts.size() == 6);
  for (const auto& [order, count] : counts) {
    INFO("order " << ref::index_str(order));
    CHECK(std::abs(count - 5000) < 330);
  }
  // Each element lands in each position of a longer permutation equally often.
  std::vector<std::vector<int>> where(10, std::vector<int>(10, 0));
  for (int trial = 0; trial < 5000; ++trial) {
    const auto p = ddp::randperm(10, gen).to_vector<std::int64_t>();
    for (std::size_t pos = 0; pos < 10; ++pos) ++where[static_cast<std::size_t>(p[pos])][pos];
  }
  for (const auto& row : where) {
    for (int count : row) CHECK(std::abs(count - 500) < 110);  // sd 21.2
  }
}
