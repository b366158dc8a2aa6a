// Chapter 07's parts, one process: the bucket assignment against hand-made answers, the
// autograd features the Reducer stands on (removable grad-ready hooks, the end-of-backward
// callback), and a Reducer on a world of one (its buckets are the gradients' memory, its
// launches a row of the text timeline).
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
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
#include "base/error.hpp"
#include "base/trace.hpp"
#include "tensor/random.hpp"
#include "tests/support/world_of_one.hpp"

using namespace ddp;
using Buckets = std::vector<std::vector<std::size_t>>;

TEST_CASE("assign_buckets closes a bucket once it reaches its cap", "[reducer][ex07.1]") {
  // Sizes in bytes of parameters 0..4; the order is reversed, as backward produces them.
  const std::vector<std::int64_t> bytes{400, 100, 300, 200, 100};
  const std::vector<std::size_t> reverse{4, 3, 2, 1, 0};
  // First cap 250: {4, 3} = 300 >= 250 closes; then cap 350: {2, 1} = 400 closes; {0}.
  CHECK(assign_buckets(bytes, reverse, 250, 350) == Buckets{{4, 3}, {2, 1}, {0}});
  // One huge cap: one bucket, in the given order.
  CHECK(assign_buckets(bytes, reverse, 1 << 30, 1 << 30) == Buckets{{4, 3, 2, 1, 0}});
  // A cap of one byte: a bucket per parameter.
  CHECK(assign_buckets(bytes, reverse, 1, 1) == Buckets{{4}, {3}, {2}, {1}, {0}});
  // A parameter as large as the cap closes its bucket alone; the cap is reached exactly.
  CHECK(assign_buckets(bytes, {0, 1, 2, 3, 4}, 400, 300) == Buckets{{0}, {1, 2}, {3, 4}});
  CHECK_THROWS_WITH(assign_buckets(bytes, reverse, 0, 100),
                    Catch::Contains("bucket caps must be positive"));
  CHECK_THROWS_WITH(assign_buckets(bytes, {7}, 1, 1), Catch::Contains("out of range"));
}

TEST_CASE("assign_buckets: the greedy rule's properties, on many sizes and caps",
          "[reducer][ex07.1]") {
  // The buckets are the order cut into pieces; a bucket is closed by the parameter that
  // brings it to its cap (every bucket but the last reaches it, and none reaches it
  // before its last parameter). These properties leave one assignment: the greedy one.
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    std::uint64_t state = seed;
    auto next = [&](std::int64_t below) {  // a small LCG: deterministic sizes and caps
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      return static_cast<std::int64_t>((state >> 33) % static_cast<std::uint64_t>(below));
    };
    const auto n = static_cast<std::size_t>(1 + next(12));
    std::vector<std::int64_t> bytes(n);
    for (auto& b : bytes) b = 4 * (1 + next(50));
    std::vector<std::size_t> order(n);
    for (std::size_t k = 0; k < n; ++k) order[k] = k;
    for (std::size_t k = n; k-- > 1;) {  // a shuffled order (Fisher-Yates)
      const auto j = static_cast<std::size_t>(next(static_cast<std::int64_t>(k) + 1));
      std::swap(order[k], order[j]);
    }
    const std::int64_t first_cap = 1 + next(300), cap = 1 + next(300);
    CAPTURE(seed, bytes, order, first_cap, cap);
    const Buckets buckets = assign_buckets(bytes, order, first_cap, cap);
    std::vector<std::size_t> joined;
    for (std::size_t b = 0; b < buckets.size(); ++b) {
      REQUIRE(!buckets[b].empty());
      const std::int64_t limit = b == 0 ? first_cap : cap;
      std::int64_t before_last = 0;
      for (std::size_t k = 0; k + 1 < buckets[b].size(); ++k) before_last += bytes[buckets[b][k]];
      CHECK(before_last < limit);  // not closed early
      if (b + 1 < buckets.size()) CHECK(before_last + bytes[buckets[b].back()] >= limit);
      joined.insert(joined.end(), buckets[b].begin(), buckets[b].end());
    }
    CHECK(joined == order);
  }
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

TEST_CASE("the Reducer makes each gradient a view of its bucket", "[reducer][ex07.1][ex07.2]") {
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

TEST_CASE("each bucket is launched once its last gradient is ready, in bucket order",
          "[reducer][ex07.2]") {
  // Four parameters of 1, 2, 4 and 8 floats; reverse registration order and caps of 1 and
  // 20 bytes make the buckets {p3}, {p2, p1}, {p0}, of 8, 6 and 1 floats: a bucket's size
  // says which it is. Backward makes the gradients in the order the loss below uses the
  // parameters, p0 p1 p3 p2: bucket 2 is complete first and must wait for buckets 0 and 1
  // (Note [Launch order] in reducer.cpp); p2 then completes bucket 1, which releases 2.
  auto group = world_of_one();
  Generator gen(3);
  std::vector<std::pair<std::string, Variable>> params;
  for (const char* name : {"p0", "p1", "p2", "p3"}) {
    const std::int64_t n = std::int64_t{1} << params.size();  // 1, 2, 4, 8 floats
    params.push_back({name, Variable(randn({n}, gen), true)});
  }
  ReducerOptions options;
  options.first_bucket_bytes = 1;
  options.bucket_cap_bytes = 20;
  options.rebuild_buckets = false;
  Reducer reducer(params, *group, options);
  const Buckets buckets = reducer.bucket_assignment();
  REQUIRE(buckets == Buckets{{3}, {2, 1}, {0}});

  std::vector<std::string> events;
  CommHook logged = allreduce_hook();
  const auto launch = logged.launch;
  logged.launch = [&](ProcessGroup& g, Tensor& bucket) {
    const std::int64_t floats = bucket.numel();
    events.push_back(floats == 8 ? "launch 0" : floats == 6 ? "launch 1" : "launch 2");
    return launch(g, bucket);
  };
  reducer.set_comm_hook(logged);
  // Registered after the Reducer's hooks, so each runs right after the Reducer's own.
  for (std::size_t i = 0; i < params.size(); ++i) {
    params[i].second.register_grad_ready_hook(
        [&events, &params, i](const Variable&) { events.push_back("ready " + params[i].first); });
  }

  const Variable loss =
      sum(params[0].second * params[0].second) + sum(params[1].second * params[1].second) +
      sum(params[3].second * params[3].second) + sum(params[2].second * params[2].second);
  reducer.prepare_for_backward(loss, /*sync=*/true, /*divisor=*/1);
  loss.backward();
  CHECK(reducer.finished());

  // The reference, from the order the gradients came in: after each one, launch every
  // bucket whose parameters, and every earlier bucket's, are all ready.
  std::vector<std::string> arrivals;
  for (const std::string& e : events) {
    if (e.starts_with("ready")) arrivals.push_back(e);
  }
  REQUIRE(arrivals.size() == 4);
  // The case this test is for: bucket 2 ({p0}) completes before buckets 0 and 1.
  REQUIRE(arrivals.front() == "ready p0");
  std::vector<bool> ready(4, false);
  std::size_t launched = 0;
  std::vector<std::string> expected;
  for (const std::string& e : arrivals) {
    ready[static_cast<std::size_t>(e.back() - '0')] = true;
    while (launched < buckets.size() &&
           std::all_of(buckets[launched].begin(), buckets[launched].end(),
                       [&](std::size_t i) { return ready[i]; })) {
      expected.push_back("launch " + std::to_string(launched++));
    }
    expected.push_back(e);
  }
  CHECK(events == expected);
  // And each gradient is the average over the one rank: 2p.
  for (const auto& [name, p] : params) {
    INFO(name);
    const auto g = p.grad().to_vector<float>(), v = p.data().to_vector<float>();
    for (std::size_t k = 0; k < g.size(); ++k) CHECK(g[k] == 2.0f * v[k]);
  }
}

// A collective that will never finish: each wait is counted, and ends as a timeout does.
class NeverFinishes final : public Work {
 public:
  explicit NeverFinishes(std::chrono::milliseconds timeout) : Work(timeout) {}
  bool is_completed() override { return false; }
  using Work::wait;
  void wait(std::chrono::milliseconds timeout) override {
    ++waits;
    DDP_FAIL("all_reduce (planted) did not finish within ", timeout.count(), " ms");
  }
  std::exception_ptr exception() override { return nullptr; }
  int waits = 0;
};

TEST_CASE("a bucket whose collective failed is waited for once", "[reducer]") {
  // Waiting a second time, on the way out, would cost the job a second timeout before
  // it reports the first.
  auto group = world_of_one();
  Generator gen(4);
  std::vector<std::pair<std::string, Variable>> params{{"w", Variable(randn({4}, gen), true)}};
  ReducerOptions options;
  options.rebuild_buckets = false;
  Reducer reducer(params, *group, options);
  const auto stuck = std::make_shared<NeverFinishes>(group->timeout());
  CommHook hook = allreduce_hook();
  hook.launch = [&](ProcessGroup&, Tensor&) -> std::shared_ptr<Work> { return stuck; };
  reducer.set_comm_hook(hook);
  const Variable loss = sum(params[0].second * params[0].second);
  reducer.prepare_for_backward(loss, /*sync=*/true, /*divisor=*/1);
  CHECK_THROWS_WITH(loss.backward(), Catch::Contains("did not finish within"));
  CHECK(stuck->waits == 1);
  // And the Reducer knows the ranks are out of step now.
  CHECK_THROWS_WITH(reducer.prepare_for_backward(loss, true, 1),
                    Catch::Contains("did not finish its reduction"));
}

TEST_CASE("a backward without a forward through DDP is refused", "[reducer]") {
  auto group = world_of_one();
  Generator gen(2);
  auto model = std::make_shared<nn::Linear>(3, 2, true, gen);
  DistributedDataParallel ddp(model, *group);
  CHECK_THROWS_WITH(sum((*model)(Variable(ones({1, 3})))).backward(),
                    Catch::Contains("no forward through DistributedDataParallel prepared"));
}

TEST_CASE("the Reducer's row on the text timeline draws its launches", "[reducer]") {
  // What launch_bucket records is what launches_row() reads: two buckets of one parameter
  // each, launched {p1} then {p0}, traced through a real backward.
  auto group = world_of_one();
  Generator gen(4);
  std::vector<std::pair<std::string, Variable>> params{{"p0", Variable(randn({2}, gen), true)},
                                                       {"p1", Variable(randn({3}, gen), true)}};
  ReducerOptions options;
  options.first_bucket_bytes = options.bucket_cap_bytes = 1;
  options.rebuild_buckets = false;
  Reducer reducer(params, *group, options);
  const Variable loss = sum(params[0].second * params[0].second) + sum(params[1].second);
  reducer.prepare_for_backward(loss, /*sync=*/true, /*divisor=*/1);
  trace::start(0);
  {
    trace::Span span("backward", "backward");
    loss.backward();
  }
  trace::stop();
  const trace::InstantRow row = Reducer::launches_row();
  const std::vector<trace::Event> events = trace::events();
  std::string marks;
  for (const trace::Event& e : events) {
    if (e.phase == trace::Phase::Instant && e.category == row.category) marks += row.mark(e.name);
  }
  CHECK(marks == "01");
  CHECK_THAT(
      trace::render_text(events, 0, trace::now_ns(), {row}),
      Catch::Matches("(.|\n)*main {16}[^\n]{72}\n  bucket launches   [ 0]*1[ 01]*\n(.|\n)*"));

  // Drawn as chapter 07's page shows it, one column per ms; "bucket 12" by its last digit.
  const auto span = [](const char* category, std::int64_t begin_ms, std::int64_t end_ms) {
    constexpr std::int64_t kMs = 1'000'000;
    return trace::Event{.phase = trace::Phase::Complete,
                        .ts_ns = begin_ms * kMs,
                        .dur_ns = (end_ms - begin_ms) * kMs,
                        .tid = 900,
                        .category = category,
                        .name = category};
  };
  std::vector<trace::Event> step{span("forward", 0, 4), span("backward", 4, 16),
                                 span("wait", 14, 16), span("optimizer", 16, 20),
                                 span("comm", 10, 18)};
  step[4].tid = 901;
  for (const auto& [at_ms, name] : {std::pair{10, "bucket 0: launch"}, {13, "bucket 12: launch"}}) {
    step.push_back(trace::Event{.phase = trace::Phase::Instant,
                                .ts_ns = at_ms * 1'000'000 + 1,
                                .tid = 900,
                                .category = row.category,
                                .name = name});
  }
  CHECK(trace::render_text(step, 0, 20'000'000, {row}, 20) ==
        "thread 900          FFFFBBBBBBBBBBwwOOOO\n"
        "  bucket launches             0  2      \n"
        "thread 901          ..........========..\n");
}
