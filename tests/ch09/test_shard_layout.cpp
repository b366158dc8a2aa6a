// Chapter 09: the shard ranges of a padded flat buffer (ShardLayout), against a naive
// element-by-element assignment, and FlatParameter's flattening and gradient copies
// against the parameters they came from.
#include <catch2/catch.hpp>

#include <vector>

#include "dist/parallel/flat_parameter.hpp"
#include "dist/parallel/shard_layout.hpp"
#include "tensor/ops.hpp"

using Catch::Contains;
using ddp::FlatParameter;
using ddp::ShardLayout;
using ddp::Tensor;
using ddp::Variable;

TEST_CASE("ShardLayout: every element has exactly one owner, shards are even",
          "[shard][ch09][ex09.1]") {
  for (std::int64_t numel : {0, 1, 2, 5, 7, 10, 12, 13, 100, 2785}) {
    for (int world : {1, 2, 3, 4, 5, 8}) {
      INFO("numel " << numel << ", world " << world);
      const ShardLayout l = ddp::make_shard_layout(numel, world);
      // Naive: hand out elements round the padded buffer, shard_numel at a time.
      CHECK(l.padded_numel() % world == 0);
      CHECK(l.padded_numel() >= numel);
      CHECK(l.padded_numel() - numel < world);  // padding: fewer than world elements
      std::vector<int> owners(static_cast<std::size_t>(l.padded_numel()), -1);
      std::int64_t real = 0;
      for (int r = 0; r < world; ++r) {
        CHECK(l.end(r) - l.begin(r) == l.shard_numel);
        for (std::int64_t e = l.begin(r); e < l.end(r); ++e) {
          REQUIRE(owners[e] == -1);
          owners[e] = r;
        }
        std::int64_t counted = 0;  // naive: this rank's elements below numel, one by one
        for (std::int64_t e = l.begin(r); e < l.end(r); ++e) counted += e < numel ? 1 : 0;
        CHECK(l.real_numel(r) == counted);
        real += l.real_numel(r);
      }
      CHECK(real == numel);
      for (int owner : owners) CHECK(owner >= 0);
    }
  }
}

TEST_CASE("ShardLayout: the examples of shard_layout.hpp", "[shard][ch09][ex09.1]") {
  const ShardLayout ten = ddp::make_shard_layout(10, 4);
  CHECK(ten.shard_numel == 3);
  CHECK(ten.padded_numel() == 12);
  CHECK(ten.begin(3) == 9);
  CHECK(ten.real_numel(3) == 1);
  const ShardLayout five = ddp::make_shard_layout(5, 4);
  CHECK(five.shard_numel == 2);
  CHECK(five.begin(3) == 6);
  CHECK(five.real_numel(3) == 0);  // all padding
  CHECK_THROWS_WITH(ddp::make_shard_layout(5, 0), Contains("world must be >= 1"));
  CHECK_THROWS_WITH(ddp::make_shard_layout(-1, 2), Contains("numel must be >= 0"));
}

namespace {

Variable parameter(std::vector<float> values, const ddp::Shape& shape) {
  return Variable(ddp::from_data(values, shape), true);
}

}  // namespace

TEST_CASE("FlatParameter: the parameters become views of one padded buffer",
          "[shard][ch09]") {
  Variable w = parameter({1, 2, 3, 4, 5, 6}, {2, 3});
  Variable b = parameter({7, 8}, {2});
  Variable u = parameter({9}, {1});
  FlatParameter flat({w, b, u}, /*rank=*/1, /*world=*/4);  // 9 elements: S = 3, padded 12
  CHECK(flat.layout().shard_numel == 3);
  CHECK(flat.flat().to_vector<float>() ==
        std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 0, 0});
  CHECK(w.data().to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(w.shape() == ddp::Shape{2, 3});
  CHECK(flat.shard().to_vector<float>() == std::vector<float>{4, 5, 6});
  // Writing the buffer writes the parameters: they are views.
  Tensor(flat.flat()).narrow(0, 6, 2).fill_(-1.0);
  CHECK(b.data().to_vector<float>() == std::vector<float>{-1, -1});

  w.set_grad(ddp::from_data(std::vector<float>{10, 20, 30, 40, 50, 60}, {2, 3}));
  b.set_grad(ddp::from_data(std::vector<float>{70, 80}, {2}));
  u.set_grad(ddp::from_data(std::vector<float>{90}, {1}));
  Tensor padded = ddp::full({12}, 5.0);
  flat.copy_gradients(padded, "test");
  CHECK(padded.to_vector<float>() ==
        std::vector<float>{10, 20, 30, 40, 50, 60, 70, 80, 90, 0, 0, 0});
  Tensor shard = ddp::zeros({3});
  flat.copy_shard_gradients(shard, "test");
  CHECK(shard.to_vector<float>() == std::vector<float>{40, 50, 60});

  // A slice across three parameters and the padding: world 2, S = 5, rank 1 owns [5, 10):
  // w's last element, b, u, then one element of padding.
  FlatParameter across({w, b, u}, /*rank=*/1, /*world=*/2);
  Tensor five = ddp::full({5}, -7.0);
  across.copy_shard_gradients(five, "test");
  CHECK(five.to_vector<float>() == std::vector<float>{60, 70, 80, 90, -7});

  FlatParameter last({parameter({1, 2, 3, 4, 5}, {5})}, /*rank=*/3, /*world=*/4);  // S = 2
  Tensor none = ddp::full({2}, 7.0);
  last.parameters()[0].set_grad(ddp::full({5}, 1.0));
  last.copy_shard_gradients(none, "test");
  CHECK(none.to_vector<float>() == std::vector<float>{7, 7});  // rank 3 owns only padding

  u.zero_grad();
  CHECK_THROWS_WITH(flat.copy_gradients(padded, "ShardedDataParallel on rank 1/4"),
                    Contains("ShardedDataParallel on rank 1/4: parameter 2 has no gradient"));
}
