// Chapter 01, tensor.hpp views and copies: view, reshape, permute, transpose, t,
// narrow, slice, select, expand, unsqueeze, squeeze, flatten, contiguous, clone,
// is_contiguous. A view must (1) hold the elements the reference index map says,
// (2) share the base's storage, so writes through it show in the base, and (3) have the
// strides and offset the stride formula predicts. Bases come in random strided layouts.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "tensor/ops.hpp"
#include "tensor/tensor.hpp"
#include "tests/support/reference.hpp"

using Catch::Contains;
using ddp::Shape;
using ddp::Tensor;
namespace ref = ddp::ref;

namespace {

// A random base tensor: contiguous on even trials, a shuffled padded layout on odd ones.
struct Base {
  ref::Array values;
  Tensor tensor;
};

Base random_base(std::mt19937& rng, const Shape& shape, int trial) {
  ref::Array values = ref::random_array(rng, shape, -10, 10);
  if (trial % 2 == 0) return {values, ref::make_contiguous(values)};
  const ref::Layout layout = ref::random_layout(rng, shape);
  return {values, ref::make_tensor(values, layout.strides, layout.offset)};
}

std::int64_t pick(std::mt19937& rng, std::int64_t low, std::int64_t high) {
  return std::uniform_int_distribution<std::int64_t>(low, high)(rng);
}

}  // namespace

TEST_CASE("view reshapes a contiguous tensor in place, inferring one -1 size", "[ch01][views]") {
  const Tensor base = ddp::arange(24);
  const Tensor v = base.view({2, 3, 4});
  CHECK(v.shape() == Shape{2, 3, 4});
  CHECK(v.strides() == Shape{12, 4, 1});
  CHECK(v.storage() == base.storage());
  CHECK(ref::mismatch(v, ref::with_shape(ref::read(base), {2, 3, 4}), ref::kExact) == "");
  CHECK(base.view({4, -1}).shape() == Shape{4, 6});
  CHECK(base.view({-1}).shape() == Shape{24});
  CHECK(base.view({2, -1, 3}).shape() == Shape{2, 4, 3});
  CHECK(ddp::scalar_tensor(3.0).view({1, 1}).shape() == Shape{1, 1});
  CHECK(ddp::ones({1, 1}).view({}).shape() == Shape{});
  CHECK(ddp::zeros({0, 4}).view({-1, 2}).shape() == Shape{0, 2});

  Tensor writable = base.view({6, 4});
  writable.select(0, 2).fill_(-1.0);  // elements 8..11 of the base
  const auto after = base.to_vector<float>();
  for (int k = 0; k < 24; ++k) {
    CHECK(after[static_cast<std::size_t>(k)] == (k >= 8 && k < 12 ? -1.0f : static_cast<float>(k)));
  }
}

TEST_CASE("view refuses a non-contiguous layout and bad sizes, naming the shapes",
          "[ch01][views][errors]") {
  const Tensor m = ddp::arange(12).view({3, 4});
  REQUIRE_THROWS_AS(m.t().view({12}), ddp::Error);
  REQUIRE_THROWS_WITH(m.t().view({12}), Contains("(4, 3)") && Contains("(12,)"));
  REQUIRE_THROWS_AS(m.narrow(1, 0, 3).view({9}), ddp::Error);  // rows of 3 with gaps of 1
  // Every other column IS evenly spaced: (3, 2) with strides (4, 2) views as (6,) stride 2.
  const Tensor stepped = m.slice(1, 0, 4, 2).view({6});
  CHECK(stepped.strides() == Shape{2});
  CHECK(stepped.to_vector<float>() == std::vector<float>{0, 2, 4, 6, 8, 10});
  REQUIRE_THROWS_WITH(m.view({5, -1}), Contains("(5, -1)") && Contains("(3, 4)"));
  REQUIRE_THROWS_WITH(m.view({5, 2}), Contains("(5, 2)") && Contains("(3, 4)"));
  REQUIRE_THROWS_AS(m.view({-1, -1}), ddp::Error);
}

TEST_CASE("reshape is a view when the layout allows it and a copy when not", "[ch01][views]") {
  std::mt19937 rng(201);
  for (int trial = 0; trial < 40; ++trial) {
    const Shape shape = ref::random_shape(rng, 1, 4, 5);
    Base base = random_base(rng, shape, trial);
    const std::int64_t n = ref::count(shape);
    INFO("shape " << ref::shape_text(shape) << ", trial " << trial);
    const Tensor flat = base.tensor.reshape({n});
    CHECK(ref::mismatch(flat, ref::with_shape(base.values, {n}), ref::kExact) == "");
    const Tensor two = base.tensor.reshape({1, -1});
    CHECK(two.shape() == Shape{1, n});
    if (base.tensor.is_contiguous()) {
      CHECK(flat.storage() == base.tensor.storage());
    }
  }
  // A transposed matrix cannot be flattened in place: reshape copies, and the copy is
  // independent of the base.
  Tensor m = ddp::arange(6).view({2, 3});
  Tensor r = m.t().reshape({6});
  CHECK(r.to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK(r.storage() != m.storage());
  r.fill_(9.0);
  CHECK(m.to_vector<float>() == std::vector<float>{0, 1, 2, 3, 4, 5});
  // A contiguous reshape aliases.
  Tensor alias = m.reshape({3, 2});
  CHECK(alias.storage() == m.storage());
  alias.select(0, 0).fill_(-5.0);
  CHECK(m.to_vector<float>() == std::vector<float>{-5, -5, 2, 3, 4, 5});
  REQUIRE_THROWS_WITH(m.reshape({4}), Contains("(4,)") && Contains("(2, 3)"));
}

TEST_CASE("permute and transpose reorder dimensions by swapping strides", "[ch01][views]") {
  std::mt19937 rng(202);
  for (int trial = 0; trial < 60; ++trial) {
    const Shape shape = ref::random_shape(rng, 1, 5, 4);
    Base base = random_base(rng, shape, trial);
    std::vector<std::int64_t> dims(shape.size());
    std::iota(dims.begin(), dims.end(), std::int64_t{0});
    std::shuffle(dims.begin(), dims.end(), rng);
    INFO("shape " << ref::shape_text(shape) << ", dims " << ref::index_str(dims));
    const Tensor p = base.tensor.permute(dims);
    CHECK(p.storage() == base.tensor.storage());
    CHECK(p.offset() == base.tensor.offset());
    for (std::size_t d = 0; d < dims.size(); ++d) {
      CHECK(p.stride(static_cast<std::int64_t>(d)) == base.tensor.stride(dims[d]));
    }
    CHECK(ref::mismatch(p, ref::permute(base.values, dims), ref::kExact) == "");

    // Negative dims in permute count from the end.
    std::vector<std::int64_t> negative = dims;
    for (auto& d : negative) d -= static_cast<std::int64_t>(dims.size());
    CHECK(ref::mismatch(base.tensor.permute(negative), ref::permute(base.values, dims),
                        ref::kExact) == "");

    const auto ndim = static_cast<std::int64_t>(shape.size());
    const std::int64_t d0 = pick(rng, 0, ndim - 1), d1 = pick(rng, 0, ndim - 1);
    std::vector<std::int64_t> swap(shape.size());
    std::iota(swap.begin(), swap.end(), std::int64_t{0});
    std::swap(swap[static_cast<std::size_t>(d0)], swap[static_cast<std::size_t>(d1)]);
    const Tensor tr = base.tensor.transpose(d0, d1 - ndim);
    CHECK(tr.storage() == base.tensor.storage());
    CHECK(ref::mismatch(tr, ref::permute(base.values, swap), ref::kExact) == "");
  }
}

TEST_CASE("t() transposes a matrix and writing through it changes the base", "[ch01][views]") {
  Tensor m = ddp::arange(6).view({2, 3});
  Tensor mt = m.t();
  CHECK(mt.shape() == Shape{3, 2});
  CHECK(mt.strides() == Shape{1, 3});
  CHECK_FALSE(mt.is_contiguous());
  CHECK(mt.to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
  mt.select(0, 2).fill_(7.0);  // column 2 of m
  CHECK(m.to_vector<float>() == std::vector<float>{0, 1, 7, 3, 4, 7});
}

TEST_CASE("permute rejects a repeated or missing dimension", "[ch01][views][errors]") {
  const Tensor t = ddp::zeros({2, 3, 4});
  REQUIRE_THROWS_WITH(t.permute({0, 0, 1}), Contains("permute"));
  REQUIRE_THROWS_WITH(t.permute({0, 1}), Contains("permute") && Contains("(2, 3, 4)"));
  CHECK_THROWS_AS(t.permute({0, 1, 3}), ddp::Error);
  CHECK_THROWS_AS(t.transpose(0, 3), ddp::Error);
}

TEST_CASE("narrow, slice with a step and select pick the right elements", "[ch01][views]") {
  std::mt19937 rng(203);
  for (int trial = 0; trial < 80; ++trial) {
    const Shape shape = ref::random_shape(rng, 1, 4, 6);
    Base base = random_base(rng, shape, trial);
    const auto ndim = static_cast<std::int64_t>(shape.size());
    const std::int64_t dim = pick(rng, 0, ndim - 1);
    const std::int64_t size = shape[static_cast<std::size_t>(dim)];
    const std::int64_t start = pick(rng, 0, size);
    const std::int64_t length = pick(rng, 0, size - start);
    INFO("shape " << ref::shape_text(shape) << ", dim " << dim << ", start " << start << ", length "
                  << length);

    const Tensor n = base.tensor.narrow(dim, start, length);
    CHECK(n.storage() == base.tensor.storage());
    CHECK(n.strides() == base.tensor.strides());
    if (length > 0 && ref::count(n.shape()) > 0) {
      CHECK(n.offset() == base.tensor.offset() + start * base.tensor.stride(dim));
    }
    CHECK(ref::mismatch(n, ref::slice(base.values, dim, start, start + length, 1), ref::kExact) ==
          "");

    const std::int64_t step = pick(rng, 1, 3);
    const std::int64_t end = pick(rng, start, size);
    INFO("slice end " << end << ", step " << step);
    const Tensor s = base.tensor.slice(dim - ndim, start, end, step);
    CHECK(s.storage() == base.tensor.storage());
    CHECK(s.stride(dim) == base.tensor.stride(dim) * step);
    CHECK(ref::mismatch(s, ref::slice(base.values, dim, start, end, step), ref::kExact) == "");

    if (size > 0) {
      const std::int64_t index = pick(rng, 0, size - 1);
      const Tensor sel = base.tensor.select(dim, index);
      CHECK(sel.dim() == ndim - 1);
      CHECK(sel.storage() == base.tensor.storage());
      CHECK(ref::mismatch(sel, ref::select(base.values, dim, index), ref::kExact) == "");
    }
  }
}

TEST_CASE("narrow, slice and select reject out-of-range arguments", "[ch01][views][errors]") {
  const Tensor t = ddp::zeros({4, 5});
  REQUIRE_THROWS_WITH(t.narrow(0, 3, 2), Contains("narrow") && Contains("(4, 5)"));
  CHECK_THROWS_AS(t.narrow(1, -1, 2), ddp::Error);
  CHECK_THROWS_AS(t.narrow(2, 0, 1), ddp::Error);
  // start + length would overflow int64 and wrap below the size.
  CHECK_THROWS_AS(t.narrow(0, std::numeric_limits<std::int64_t>::max(), 2), ddp::Error);
  REQUIRE_THROWS_WITH(t.select(0, 4), Contains("index 4") && Contains("(4, 5)"));
  CHECK_THROWS_AS(t.select(2, 0), ddp::Error);
  REQUIRE_THROWS_WITH(t.slice(1, 0, 5, 0), Contains("step"));
  // A 0-d tensor has no dimension to index (these read past an empty shape before).
  const Tensor s = ddp::scalar_tensor(1.0);
  CHECK_THROWS_WITH(s.size(0), Contains("size(0): a 0-d tensor"));
  CHECK_THROWS_WITH(s.stride(-1), Contains("stride(-1): a 0-d tensor"));
  CHECK_THROWS_WITH(s.narrow(0, 0, 1), Contains("narrow(0): a 0-d tensor"));
  CHECK_THROWS_WITH(s.slice(0, 0, 1), Contains("slice(0): a 0-d tensor"));
  CHECK_THROWS_WITH(s.select(0, 0), Contains("select(0): a 0-d tensor"));
  // ... while squeeze and transpose of dimension 0 (or -1) give the scalar back.
  CHECK(s.squeeze(0).dim() == 0);
  CHECK(s.transpose(0, -1).dim() == 0);
  CHECK(s.transpose(0, 0).item<float>() == 1.0f);
}

TEST_CASE("writes through a slice with a step change exactly those base elements",
          "[ch01][views][aliasing]") {
  Tensor base = ddp::zeros({4, 6});
  Tensor every_other = base.slice(1, 1, 6, 2);  // columns 1, 3, 5
  every_other.fill_(1.0);
  const ref::Array got = ref::read(base);
  for (std::int64_t r = 0; r < 4; ++r) {
    for (std::int64_t c = 0; c < 6; ++c) {
      CHECK(got.v[static_cast<std::size_t>(r * 6 + c)] == (c % 2 == 1 ? 1.0 : 0.0));
    }
  }
  // A clone does not alias: writing into it leaves the base alone.
  Tensor copy = base.clone();
  copy.fill_(5.0);
  CHECK(ref::mismatch(base, got, ref::kExact) == "");
}

TEST_CASE("expand repeats size-1 dimensions with stride 0 and adds leading ones",
          "[ch01][views][ex01.2]") {
  std::mt19937 rng(204);
  for (int trial = 0; trial < 50; ++trial) {
    const Shape shape = ref::random_shape(rng, 0, 4, 4);
    Base base = random_base(rng, shape, trial);
    // The target: some new leading dims, and each size-1 dim grown to 0..3.
    Shape target = ref::random_shape(rng, 0, 2, 3);
    for (std::int64_t s : shape) target.push_back(s == 1 ? pick(rng, 0, 3) : s);
    INFO("shape " << ref::shape_text(shape) << " to " << ref::shape_text(target));
    const Tensor e = base.tensor.expand(target);
    CHECK(e.shape() == target);
    CHECK(e.storage() == base.tensor.storage());
    const std::size_t lead = target.size() - shape.size();
    for (std::size_t d = 0; d < target.size(); ++d) {
      const bool repeated = d < lead || shape[d - lead] != target[d];
      if (repeated && target[d] > 1) CHECK(e.stride(static_cast<std::int64_t>(d)) == 0);
    }
    CHECK(ref::mismatch(e, ref::broadcast_to(base.values, target), ref::kExact) == "");
  }
}

TEST_CASE("expand of a strided, offset view: -1 keeps a size, repeats read one element",
          "[ch01][views][ex01.2]") {
  // A column of a transposed, offset base: (3, 1) with strides (1, 4), offset 1.
  const Tensor base = ddp::arange(12).reshape({3, 4}).t().narrow(0, 1, 1).t();
  REQUIRE(base.shape() == Shape{3, 1});
  const Tensor e = base.expand({2, -1, 5});
  CHECK(e.shape() == Shape{2, 3, 5});
  CHECK(e.strides() == Shape{0, 4, 0});
  CHECK(e.offset() == 1);
  // e[i, r, j] = base[r, 0] = 4 r + 1, by the stride formula of shape.hpp.
  const std::vector<float> got = e.contiguous().to_vector<float>();
  for (std::int64_t i = 0; i < 2; ++i) {
    for (std::int64_t r = 0; r < 3; ++r) {
      for (std::int64_t j = 0; j < 5; ++j) {
        CHECK(got[(i * 3 + r) * 5 + j] == static_cast<float>(4 * r + 1));
      }
    }
  }
  REQUIRE_THROWS_WITH(base.expand({-1, 3, 1}), Contains("-1"));
}

TEST_CASE("expand refuses to change a size that is not 1, naming both shapes",
          "[ch01][views][errors][ex01.2]") {
  const Tensor t = ddp::zeros({2, 3});
  REQUIRE_THROWS_WITH(t.expand({4, 3}), Contains("(2, 3)") && Contains("(4, 3)"));
  REQUIRE_THROWS_WITH(t.expand({3}), Contains("(2, 3)") && Contains("(3,)"));
}

TEST_CASE("unsqueeze, squeeze and flatten change the shape, not the elements", "[ch01][views]") {
  std::mt19937 rng(205);
  for (int trial = 0; trial < 40; ++trial) {
    const Shape shape = ref::random_shape(rng, 0, 4, 4);
    Base base = random_base(rng, shape, trial);
    const auto ndim = static_cast<std::int64_t>(shape.size());
    const std::int64_t at = pick(rng, 0, ndim);
    INFO("shape " << ref::shape_text(shape) << ", at " << at);
    Shape grown = shape;
    grown.insert(grown.begin() + at, 1);
    const Tensor u = base.tensor.unsqueeze(at);
    CHECK(u.shape() == grown);
    CHECK(u.storage() == base.tensor.storage());
    CHECK(ref::mismatch(u, ref::with_shape(base.values, grown), ref::kExact) == "");
    CHECK(base.tensor.unsqueeze(at - ndim - 1).shape() == grown);  // negative form

    const Tensor back = u.squeeze(at);
    CHECK(back.shape() == shape);
    CHECK(ref::mismatch(back, base.values, ref::kExact) == "");

    if (ndim >= 1) {
      const std::int64_t s = pick(rng, 0, ndim - 1), e = pick(rng, s, ndim - 1);
      Shape flat(shape.begin(), shape.begin() + s);
      std::int64_t merged = 1;
      for (std::int64_t d = s; d <= e; ++d) merged *= shape[static_cast<std::size_t>(d)];
      flat.push_back(merged);
      flat.insert(flat.end(), shape.begin() + e + 1, shape.end());
      INFO("flatten " << s << " to " << e);
      const Tensor f = base.tensor.flatten(s, e);
      CHECK(ref::mismatch(f, ref::with_shape(base.values, flat), ref::kExact) == "");
      CHECK(ref::mismatch(base.tensor.flatten(), ref::with_shape(base.values, {ref::count(shape)}),
                          ref::kExact) == "");
    }
  }
  CHECK(ddp::zeros({2, 1, 3}).squeeze(-2).shape() == Shape{2, 3});
  CHECK(ddp::scalar_tensor(1.0).unsqueeze(0).shape() == Shape{1});
  CHECK_THROWS_AS(ddp::zeros({2, 3}).unsqueeze(3), ddp::Error);
}

TEST_CASE("as_strided makes any view inside the storage, overlapping windows included",
          "[ch01][views]") {
  std::mt19937 rng(207);
  for (int trial = 0; trial < 30; ++trial) {
    const std::int64_t slots = pick(rng, 1, 40);
    const ref::Array flat = ref::random_array(rng, {slots}, -5, 5);
    const Tensor base = ref::make_contiguous(flat);
    // A random view that stays inside [0, slots): sizes, strides (0 allowed), offset.
    const Shape shape = ref::random_shape(rng, 0, 3, 4);
    Shape strides(shape.size());
    for (auto& s : strides) s = pick(rng, 0, 5);
    std::int64_t reach = 0;
    for (std::size_t d = 0; d < shape.size(); ++d) {
      reach += std::max<std::int64_t>(shape[d] - 1, 0) * strides[d];
    }
    if (reach >= slots) continue;
    const std::int64_t offset = pick(rng, 0, slots - 1 - reach);
    INFO("shape " << ref::shape_text(shape) << ", strides " << ref::shape_text(strides)
                  << ", offset " << offset << " in " << slots);
    const Tensor v = base.as_strided(shape, strides, offset);
    CHECK(v.shape() == shape);
    CHECK(v.strides() == strides);
    CHECK(v.offset() == offset);
    CHECK(v.storage() == base.storage());
    ref::Array want{shape, {}};
    ref::for_each_index(shape, [&](const std::vector<std::int64_t>& index) {
      std::int64_t pos = offset;
      for (std::size_t d = 0; d < index.size(); ++d) pos += index[d] * strides[d];
      want.v.push_back(flat.v[static_cast<std::size_t>(pos)]);
    });
    CHECK(ref::mismatch(v, want, ref::kExact) == "");
  }
  // Sliding windows of 3 with hop 2 over 0..9: what im2col builds.
  const Tensor seq = ddp::arange(10);
  const Tensor windows = seq.as_strided({4, 3}, {2, 1}, 1);
  CHECK(windows.to_vector<float>() == std::vector<float>{1, 2, 3, 3, 4, 5, 5, 6, 7, 7, 8, 9});
  // One element too far is refused, with the numbers that show why.
  REQUIRE_THROWS_AS(seq.as_strided({4, 3}, {2, 1}, 2), ddp::Error);
  REQUIRE_THROWS_WITH(seq.as_strided({4, 3}, {2, 1}, 2), Contains("(4, 3)") && Contains("10"));
  // A stride so large that (size - 1) * stride wraps around int64 to a small reach.
  const std::int64_t huge = (std::int64_t{1} << 62) + (std::int64_t{1} << 40);
  CHECK_THROWS_WITH(seq.as_strided({3}, {huge}, 0), Contains("int64 overflow"));
  CHECK(seq.as_strided({0}, {huge}, 0).numel() == 0);  // empty: reaches nothing
  CHECK_THROWS_AS(seq.as_strided({2}, {1, 1}, 0), ddp::Error);
  CHECK_THROWS_AS(seq.as_strided({2}, {1}, -1), ddp::Error);
  CHECK(seq.as_strided({0, 5}, {7, 7}, 9).numel() == 0);
}

TEST_CASE("is_contiguous means row-major without gaps, ignoring size-1 dimensions",
          "[ch01][views]") {
  const Tensor m = ddp::arange(12).view({3, 4});
  CHECK(m.is_contiguous());
  CHECK_FALSE(m.t().is_contiguous());
  CHECK_FALSE(m.slice(1, 0, 4, 2).is_contiguous());
  CHECK(m.narrow(0, 1, 2).is_contiguous());        // whole rows: no gaps
  CHECK_FALSE(m.narrow(1, 1, 2).is_contiguous());  // part rows: gaps
  CHECK(m.unsqueeze(1).is_contiguous());
  CHECK(m.select(0, 1).is_contiguous());
  CHECK_FALSE(m.select(1, 1).is_contiguous());
  // (1, 4) transposed is (4, 1) with strides (1, 4): the size-1 stride does not matter.
  CHECK(ddp::zeros({1, 4}).t().is_contiguous());
  CHECK_FALSE(ddp::zeros({4, 1}).expand({4, 3}).is_contiguous());
  CHECK(ref::make_tensor(ref::Array{{2, 1, 3}, {1, 2, 3, 4, 5, 6}}, {3, 99, 1}, 2).is_contiguous());
  CHECK(ddp::scalar_tensor(1.0).is_contiguous());
}

TEST_CASE("contiguous copies only when needed, clone always copies", "[ch01][views]") {
  std::mt19937 rng(206);
  for (int trial = 0; trial < 30; ++trial) {
    const Shape shape = ref::random_shape(rng, 0, 4, 5);
    Base base = random_base(rng, shape, trial);
    INFO("shape " << ref::shape_text(shape) << ", trial " << trial);
    const Tensor c = base.tensor.contiguous();
    CHECK(c.is_contiguous());
    CHECK(c.shape() == shape);
    CHECK(ref::mismatch(c, base.values, ref::kExact) == "");
    if (base.tensor.is_contiguous()) {
      CHECK(c.storage() == base.tensor.storage());
    } else {
      CHECK(c.storage() != base.tensor.storage());
      CHECK(c.strides() == ref::row_major_strides(shape));
    }
    const Tensor k = base.tensor.clone();
    CHECK(k.storage() != base.tensor.storage());
    CHECK(k.is_contiguous());
    CHECK(k.strides() == ref::row_major_strides(shape));
    CHECK(ref::mismatch(k, base.values, ref::kExact) == "");
  }
  // int64 clones too.
  const Tensor labels = ddp::from_data(std::vector<std::int64_t>{4, 5, 6, 7}, {2, 2}).t();
  CHECK(labels.clone().to_vector<std::int64_t>() == std::vector<std::int64_t>{4, 6, 5, 7});
}

TEST_CASE("copying a Tensor handle aliases and views of views compose", "[ch01][views][aliasing]") {
  Tensor a = ddp::zeros({3, 4});
  Tensor b = a;  // the same tensor, another name
  b.fill_(2.0);
  CHECK(a.to_vector<float>() == std::vector<float>(12, 2.0f));
  // Row 1 of the transpose of rows 1..2 = column 1 of rows 1..2 of a.
  Tensor v = a.narrow(0, 1, 2).t().select(0, 1);
  CHECK(v.shape() == Shape{2});
  v.fill_(-1.0);
  const auto values = a.to_vector<float>();
  for (std::size_t k = 0; k < 12; ++k) {
    const bool hit = k == 5 || k == 9;
    CHECK(values[k] == (hit ? -1.0f : 2.0f));
  }
}
