// Chapter 07's parts, one process: the bucket assignment against hand-made answers, the
// autograd features the Reducer stands on (removable grad-ready hooks, the end-of-backward
// callback), and a Reducer on a world of one (its buckets are the gradients' memory).
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "autograd/engine.hpp"
#include "autograd/functions.hpp"
#include "dist/parallel/distributed_data_parallel.hpp"
#include "dist/parallel/reducer.hpp"
#include "dist/process_group_tcp.hpp"
#include "dist/tcp_store.hpp"
#include "nn/linear.hpp"
#include "nn/resnet_mnist.hpp"
#include "nn/sequential.hpp"
#include "tensor/error.hpp"
#include "tensor/random.hpp"
#include "tests/support/world_of_one.hpp"

using namespace ddp;
using Buckets = std::vector<std::vector<std::size_t>>;

TEST_CASE("assign_buckets closes a bucket once it reaches its cap", "[reducer]") {
  // Sizes in bytes of parameters 0..4; the order is reversed, as backward produces them.
  const std::vector<std::int64_t> bytes{400, 100, 300, 200, 100};
  const std::vector<std::size_t> reverse{4, 3, 2, 1, 0};
  // First cap 250: {4, 3} = 300 >= 250 closes; then cap 350: {2, 1} = 400 closes; {0}.
  CHECK(assign_buckets(bytes, reverse, 250, 350) == Buckets{{4, 3}, {2, 1}, {0}});
  // One huge cap: one bucket, in the given order.
  CHECK(assign_buckets(bytes, reverse, 1 << 30, 1 << 30) == Buckets{{4, 3, 2, 1, 0}});
  // A cap of one byte: a bucket per parameter.
  CHECK(assign_buckets(bytes, reverse, 1, 1) == Buckets{{4}, {3}, {2}, {1}, {0}});
  // A parameter larger than the cap gets a bucket of its own; the cap is reached exactly.
  CHECK(assign_buckets(bytes, {0, 1, 2, 3, 4}, 400, 300) == Buckets{{0}, {1, 2}, {3, 4}});
  CHECK_THROWS_WITH(assign_buckets(bytes, reverse, 0, 100),
                    Catch::Contains("bucket caps must be positive"));
  CHECK_THROWS_WITH(assign_buckets(bytes, {7}, 1, 1), Catch::Contains("out of range"));
}

TEST_CASE("a grad-ready hook can be removed on its own", "[reducer]") {
  Variable w(ones({3}), true);
  std::vector<std::string> calls;
  const auto a = w.register_grad_ready_hook([&](const Variable&) { calls.push_back("a"); });
  w.register_grad_ready_hook([&](const Variable&) { calls.push_back("b"); });
  sum(w * w).backward();
  CHECK(calls == std::vector<std::string>{"a", "b"});
  w.remove_grad_ready_hook(a);
  calls.clear();
  sum(w * w).backward();
  CHECK(calls == std::vector<std::string>{"b"});
  w.remove_grad_ready_hook(12345);  // unknown: ignored
}

TEST_CASE("a queued callback runs after the last node of the backward", "[reducer]") {
  Variable w1(ones({2}), true), w2(ones({2}), true);
  std::vector<std::string> events;
  // w1 is used first in the forward, so its gradient is the last one backward produces.
  w2.register_grad_ready_hook([&](const Variable&) {
    events.push_back("w2 ready");
    queue_backward_callback([&] {
      events.push_back(w1.grad().defined() ? "callback after w1" : "callback before w1");
      queue_backward_callback([&] { events.push_back("queued by a callback"); });
    });
  });
  w1.register_grad_ready_hook([&](const Variable&) { events.push_back("w1 ready"); });
  sum(mul(w1 * 2.0, w2)).backward();
  CHECK(events == std::vector<std::string>{"w2 ready", "w1 ready", "callback after w1",
                                           "queued by a callback"});
  CHECK_THROWS_WITH(queue_backward_callback([] {}), Catch::Contains("outside a backward pass"));
}

using ddp::testing::world_of_one;  // a group of one rank: tests/support

TEST_CASE("the Reducer makes each gradient a view of its bucket", "[reducer]") {
  auto group = world_of_one();
  Generator gen(1);
  auto model = std::make_shared<nn::ResNetMnist>(gen);
  DDPOptions options;
  options.reducer.bucket_cap_bytes = options.reducer.first_bucket_bytes = 100'000;
  DistributedDataParallel ddp(model, *group, options);
  const Tensor x = randn({2, 1, 28, 28}, gen);
  const std::vector<std::int64_t> labels{3, 7};
  const Tensor y = from_data(std::span<const std::int64_t>(labels), {2});
  model->zero_grad();
  cross_entropy(ddp(Variable(x)), y).backward();
  CHECK(ddp.reducer().finished());

  // Every gradient lies inside one of the buckets, in the assignment's order, without gaps.
  const auto named = model->named_parameters();
  const Buckets buckets = ddp.reducer().bucket_assignment();
  CHECK(buckets.size() == 3);
  std::size_t listed = 0;
  for (const auto& bucket : buckets) {
    const Tensor& first = named[bucket[0]].second.grad();
    std::int64_t expected_offset = first.offset();
    for (const std::size_t i : bucket) {
      const Tensor& g = named[i].second.grad();
      INFO(named[i].first);
      CHECK(g.storage() == first.storage());
      CHECK(g.offset() == expected_offset);
      expected_offset += g.numel();
      ++listed;
    }
  }
  CHECK(listed == named.size());

  // And they are the gradients: the same model without DDP gets the same values.
  Generator gen2(1);
  nn::ResNetMnist plain(gen2);
  cross_entropy(plain(Variable(x)), y).backward();
  const auto plain_named = plain.named_parameters();
  for (std::size_t i = 0; i < named.size(); ++i) {
    INFO(named[i].first);
    CHECK(named[i].second.grad().to_vector<float>() ==
          plain_named[i].second.grad().to_vector<float>());
  }
}

TEST_CASE("a backward without a forward through DDP is refused", "[reducer]") {
  auto group = world_of_one();
  Generator gen(2);
  auto model = std::make_shared<nn::Linear>(3, 2, true, gen);
  DistributedDataParallel ddp(model, *group);
  CHECK_THROWS_WITH(sum((*model)(Variable(ones({1, 3})))).backward(),
                    Catch::Contains("no forward through DistributedDataParallel prepared"));
}
