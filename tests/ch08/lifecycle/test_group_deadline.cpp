// Chapter 08, the group's deadline (ProcessGroup::timeout()): set once when the group is
// made (InitOptions::timeout, ddp-train --timeout), carried by every Work it returns, and
// the only deadline of the layers above it. A Work waits exactly that long; two tcp ranks,
// one of which never calls, fail after the group's 1.5 s; and every wait of DDP (each
// GradientSync), the Reducer, SyncBatchNorm, the replica checks, Join's count and chapter
// 09's three wrappers is the group's, not a default of its own (the 300 s that capped
// ddp-train --timeout 420, issue 28). tests/layers/group_deadline.sh checks the source.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "autograd/functions.hpp"
#include "base/deadline.hpp"
#include "dist/parallel/distributed_data_parallel.hpp"
#include "dist/parallel/fully_sharded_data_parallel.hpp"
#include "dist/parallel/join.hpp"
#include "dist/parallel/replica_check.hpp"
#include "dist/parallel/sharded_data_parallel.hpp"
#include "dist/parallel/sync_batch_norm.hpp"
#include "dist/parallel/watchdog.hpp"
#include "dist/parallel/zero_redundancy_optimizer.hpp"
#include "dist/process_group_tcp.hpp"
#include "dist/tcp_store.hpp"
#include "nn/linear.hpp"
#include "nn/relu.hpp"
#include "nn/sequential.hpp"
#include "nn/sgd.hpp"
#include "tensor/random.hpp"
#include "tests/ch05/fork_ranks.hpp"
#include "tests/ch05/local_store.hpp"
#include "tests/support/world_of_one.hpp"

using namespace std::chrono_literals;
using Catch::Contains;
using namespace ddp;

namespace {

// Not the old default, and not a round number a default would be.
constexpr std::chrono::milliseconds kDeadline{1234};

// A group of one that records the timeout of every wait and block_stream on its Works:
// what the layers above the group really wait. It forwards to a tcp group of one made
// with kDeadline, and its own timeout() is that group's, as a WatchedGroup's is.
class RecordingGroup final : public ProcessGroup {
 public:
  struct Waits {
    std::vector<std::chrono::milliseconds> timeouts;
    std::vector<std::string> collectives;  // which collective each wait was on
  };

  explicit RecordingGroup(std::unique_ptr<ProcessGroup> inner)
      : ProcessGroup(0, 1, inner->timeout()), inner_(std::move(inner)) {}

  std::string backend_name() const override { return inner_->backend_name(); }
  std::shared_ptr<Work> all_reduce(Tensor& t, ReduceOp op) override {
    return record("all_reduce", inner_->all_reduce(t, op));
  }
  std::shared_ptr<Work> broadcast(Tensor& t, int root) override {
    return record("broadcast", inner_->broadcast(t, root));
  }
  std::shared_ptr<Work> all_gather(Tensor& out, const Tensor& in) override {
    return record("all_gather", inner_->all_gather(out, in));
  }
  std::shared_ptr<Work> reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op) override {
    return record("reduce_scatter", inner_->reduce_scatter(out, in, op));
  }
  std::shared_ptr<Work> barrier() override { return record("barrier", inner_->barrier()); }

  Waits waits;

 private:
  class RecordingWork final : public Work {
   public:
    RecordingWork(std::shared_ptr<Work> inner, Waits& waits, std::string collective)
        : Work(inner->timeout()), inner_(std::move(inner)), waits_(waits),
          collective_(std::move(collective)) {}
    bool is_completed() override { return inner_->is_completed(); }
    std::exception_ptr exception() override { return inner_->exception(); }
    using Work::wait;
    using Work::block_stream;
    void wait(std::chrono::milliseconds timeout) override {
      waits_.timeouts.push_back(timeout);
      waits_.collectives.push_back(collective_);
      inner_->wait(timeout);
    }
    void block_stream(std::chrono::milliseconds timeout) override {
      waits_.timeouts.push_back(timeout);
      waits_.collectives.push_back(collective_ + " (block_stream)");
      inner_->block_stream(timeout);
    }

   private:
    std::shared_ptr<Work> inner_;
    Waits& waits_;
    std::string collective_;
  };

  std::shared_ptr<Work> record(std::string collective, std::shared_ptr<Work> work) {
    return std::make_shared<RecordingWork>(std::move(work), waits, std::move(collective));
  }

  std::unique_ptr<ProcessGroup> inner_;
};

std::unique_ptr<RecordingGroup> recording_group() {
  return std::make_unique<RecordingGroup>(testing::world_of_one(kDeadline));
}

// Every wait recorded so far was the group's deadline, and there was at least one.
void check_all_waits_are_the_groups(const RecordingGroup& group, const std::string& what) {
  INFO(what);
  REQUIRE_FALSE(group.waits.timeouts.empty());
  for (std::size_t i = 0; i < group.waits.timeouts.size(); ++i) {
    INFO("wait " << i << " on " << group.waits.collectives[i]);
    CHECK(group.waits.timeouts[i] == kDeadline);
  }
}

std::shared_ptr<nn::Sequential> small_model() {
  Generator gen(7);
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Linear>(4, 3, true, gen));
  model->push_back(std::make_shared<nn::ReLU>());
  model->push_back(std::make_shared<nn::Linear>(3, 2, true, gen));
  return model;
}

std::unique_ptr<nn::Optimizer> sgd(std::vector<Variable> ps) {
  return std::make_unique<nn::SGD>(std::move(ps), nn::SGDOptions{.lr = 0.1});
}

Variable input() {
  Generator gen(3);
  return Variable(randn({5, 4}, gen));
}

}  // namespace

// ==== The Work and the group =============================================================

TEST_CASE("a Work waits, when given no timeout, exactly its group's deadline", "[ch08]") {
  FutureWork work("test all_reduce", 150ms);
  CHECK(work.timeout() == 150ms);
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(work.wait(), Contains("test all_reduce did not finish within 150 ms"));
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(took >= 150ms);
  CHECK(took < 150ms + 2s);
  CHECK_THROWS_WITH(work.block_stream(), Contains("did not finish within 150 ms"));
  // A caller that means another deadline still names it.
  CHECK_THROWS_WITH(work.wait(20ms), Contains("did not finish within 20 ms"));
}

TEST_CASE("a group hands its deadline to every Work, and watch() keeps it", "[ch08]") {
  auto group = testing::world_of_one(kDeadline);
  CHECK(group->timeout() == kDeadline);
  Tensor t = ones({3});
  Tensor gathered = empty({3});
  CHECK(group->all_reduce(t)->timeout() == kDeadline);
  CHECK(group->broadcast(t, 0)->timeout() == kDeadline);
  CHECK(group->all_gather(gathered, t)->timeout() == kDeadline);
  CHECK(group->reduce_scatter(gathered, t)->timeout() == kDeadline);
  CHECK(group->barrier()->timeout() == kDeadline);
  // The watched group's deadline is the wrapped group's: the watchdog and wait() agree.
  std::unique_ptr<WatchedGroup> watched = watch(std::move(group));
  CHECK(watched->timeout() == kDeadline);
  CHECK(watched->all_reduce(t)->timeout() == kDeadline);
  watched->barrier()->wait();
  watched->destroy();
}

TEST_CASE("two tcp ranks with a 1.5 s deadline: the one that calls fails after 1.5 s",
          "[ch08]") {
  // Rank 1 joins the group and never calls the all-reduce; rank 0's plain wait() must end
  // after the group's 1.5 s (not a default's minutes), naming them.
  test::ForkedStoreServer server;
  const int port = server.port();
  const auto codes = test::run_forked(2, [port](int rank) {
    TCPStoreOptions o;
    o.port = port;
    o.timeout = 20s;
    ProcessGroupTcp group(std::make_shared<TCPStore>(o), rank, 2, 1500ms, "deadline");
    if (rank == 1) {
      std::this_thread::sleep_for(3s);  // in no collective, past rank 0's deadline
      return 0;
    }
    Tensor t = ones({16});
    const auto start = std::chrono::steady_clock::now();
    std::string message;
    try {
      group.all_reduce(t)->wait();
    } catch (const Error& e) {
      message = e.what();
    }
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start).count();
    const bool ok = message.find("1500 ms") != std::string::npos && ms >= 1500 && ms < 4500;
    if (!ok) std::fprintf(stderr, "rank 0: after %lld ms: \"%s\"\n", (long long)ms, message.c_str());
    group.abort();
    return ok ? 0 : 3;
  });
  CHECK(codes == std::vector<int>{0, 0});
}

// ==== The layers above the group wait its deadline =======================================

TEST_CASE("DDP waits the group's deadline, with every GradientSync", "[ch08]") {
  for (const GradientSync sync :
       {GradientSync::Bucketed, GradientSync::Flat, GradientSync::PerParameter}) {
    auto group = recording_group();
    auto model = small_model();
    DistributedDataParallel ddp(model, *group, DDPOptions{.gradient_sync = sync});
    sum(ddp(input())).backward();  // the Reducer's buckets, block_stream included
    ddp.average_gradients();
    ddp.sync_buffers();
    check_all_waits_are_the_groups(*group, to_string(sync));
  }
}

TEST_CASE("the Reducer with find_unused_parameters and Join's count wait the group's deadline",
          "[ch08]") {
  auto group = recording_group();
  auto model = small_model();
  DDPOptions options;
  options.reducer.find_unused_parameters = true;  // one more all-reduce: the used mask
  DistributedDataParallel ddp(model, *group, options);
  Join join(ddp);
  sum(ddp(input())).backward();
  join.finish();  // the count, and the post-hook's broadcasts
  check_all_waits_are_the_groups(*group, "find_unused_parameters, inside a Join");
}

TEST_CASE("SyncBatchNorm and the replica checks wait the group's deadline", "[ch08]") {
  auto group = recording_group();
  Generator gen(5);
  const Variable x(randn({2, 3, 2, 2}, gen), true);
  const Variable weight(ones({3}), true), bias(zeros({3}), true);
  Tensor mean = zeros({3}), var = ones({3});
  sum(sync_batch_norm(x, weight, bias, mean, var, 0.1, 1e-5, *group)).backward();
  auto model = small_model();
  check_same_model(*model, *group);
  check_parameters_in_sync(*model, *group, /*step=*/1);
  check_all_waits_are_the_groups(*group, "SyncBatchNorm, check_same_model, in sync");
}

TEST_CASE("chapter 09's ZeRO, ShardedDataParallel and FSDP wait the group's deadline",
          "[ch08][ch09]") {
  {
    auto group = recording_group();
    auto model = small_model();
    ZeroRedundancyOptimizer zero(model->parameters(), *group, sgd);
    sum((*model)(input())).backward();
    zero.step();
    check_all_waits_are_the_groups(*group, "ZeroRedundancyOptimizer");
  }
  {
    auto group = recording_group();
    ShardedDataParallel zero2(small_model(), *group, sgd);
    sum(zero2(input())).backward();
    zero2.clip_grad_norm(1.0);
    zero2.step();
    check_all_waits_are_the_groups(*group, "ShardedDataParallel");
  }
  {
    auto group = recording_group();
    FullyShardedDataParallel fsdp(small_model(), *group, sgd);
    sum(fsdp(input())).backward();
    fsdp.clip_grad_norm(1.0);
    fsdp.step();
    check_all_waits_are_the_groups(*group, "FullyShardedDataParallel");
  }
}
