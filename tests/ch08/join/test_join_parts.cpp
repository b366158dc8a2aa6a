// Chapter 08's Join, one process: the arithmetic of the join count (read_join_round: who
// trains, the buffer and final-sync roots, the divisor, ranks that disagree), and a Join on
// a world of one (finish() with nothing to shadow; the registration rules; SyncBatchNorm2d
// refused; a Joinable that cannot move). The Join across ranks is join_main.cpp's.
#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "autograd/functions.hpp"
#include "dist/parallel/distributed_data_parallel.hpp"
#include "dist/parallel/join.hpp"
#include "dist/parallel/sync_batch_norm.hpp"
#include "dist/process_group_tcp.hpp"
#include "dist/tcp_store.hpp"
#include "nn/linear.hpp"
#include "nn/resnet_mnist.hpp"
#include "base/error.hpp"
#include "tensor/random.hpp"
#include "tests/support/world_of_one.hpp"

using namespace ddp;
using Counts = std::vector<std::int64_t>;

TEST_CASE("read_join_round: who trains, the roots and both divisors", "[join][ex08.2]") {
  // World 4; ranks 1 and 2 train, all-reduce gradients and broadcast buffers.
  const Counts summed{0, 1, 1, 0, 2, 2};
  const JoinRound by_world = read_join_round(summed, true, "test");
  CHECK(by_world.training == 2);
  CHECK(by_world.lowest == 1);   // the buffers come from rank 1 (rank 0 has joined)
  CHECK(by_world.highest == 2);  // the final sync's root, should this be the last round
  CHECK(by_world.syncs_gradients);
  CHECK(by_world.broadcasts_buffers);
  CHECK(by_world.divisor == 4);                                // divide_by_initial_world_size
  CHECK(read_join_round(summed, false, "test").divisor == 2);  // the ranks that contributed

  // Everyone trains: both rules divide by the world size (plain DDP).
  CHECK(read_join_round(Counts{1, 1, 1, 3, 0}, false, "test").divisor == 3);
  CHECK_FALSE(read_join_round(Counts{1, 1, 1, 3, 0}, false, "test").broadcasts_buffers);
  // Under no_sync on every training rank: nothing to all-reduce in this iteration.
  CHECK_FALSE(read_join_round(Counts{1, 0, 0, 0, 1}, true, "test").syncs_gradients);
}

TEST_CASE("read_join_round: a count of zero means every rank has joined", "[join][ex08.2]") {
  const JoinRound done = read_join_round(Counts{0, 0, 0, 0, 0}, true, "test");
  CHECK(done.training == 0);
  CHECK(done.lowest == -1);
  CHECK(done.highest == -1);
}

TEST_CASE("read_join_round: ranks that disagree are an error, not a hang", "[join][ex08.2]") {
  // Of 3 training ranks, 2 all-reduce gradients and 1 is under no_sync.
  CHECK_THROWS_WITH(read_join_round(Counts{1, 1, 1, 2, 3}, true, "Join on rank 0/3"),
                    Catch::Contains("Join on rank 0/3") && Catch::Contains("no_sync()"));
  CHECK_THROWS_WITH(read_join_round(Counts{1, 1, 0, 2, 1}, true, "test"),
                    Catch::Contains("broadcast buffers"));
  // Two Joins counting into one all-reduce: an entry of 2.
  CHECK_THROWS_WITH(read_join_round(Counts{2, 1, 3, 3}, true, "test"),
                    Catch::Contains("one Join at a time"));
  CHECK_THROWS_WITH(read_join_round(Counts{1, 1}, true, "test"), Catch::Contains("world + 2"));
}

TEST_CASE("read_join_round: every subset of 5 ranks, as the ranks would count it",
          "[join][ex08.2]") {
  // The count as the ranks build it (each training rank adds 1 at its index and to the
  // two counts), for every set of training ranks: bit r of `trains` says rank r trains.
  const int world = 5;
  for (int trains = 0; trains < (1 << world); ++trains) {
    for (const bool sync : {false, true}) {
      for (const bool broadcast : {false, true}) {
        Counts summed(world + 2, 0);
        int training = 0, lowest = -1, highest = -1;
        for (int r = 0; r < world; ++r) {
          if (!(trains & (1 << r))) continue;
          summed[r] = 1;
          summed[world] += sync ? 1 : 0;
          summed[world + 1] += broadcast ? 1 : 0;
          ++training;
          if (lowest < 0) lowest = r;
          highest = r;
        }
        CAPTURE(trains, sync, broadcast);
        for (const bool by_world : {false, true}) {
          const JoinRound round = read_join_round(summed, by_world, "test");
          CHECK(round.training == training);
          CHECK(round.lowest == lowest);
          CHECK(round.highest == highest);
          CHECK(round.syncs_gradients == (sync && training > 0));
          CHECK(round.broadcasts_buffers == (broadcast && training > 0));
          CHECK(round.divisor == (by_world ? world : training));
        }
      }
    }
  }
}

using ddp::testing::world_of_one;  // a group of one rank: tests/support

// A Join holds its Joinable, and the Joinable's hook holds the DDP, by reference: a DDP that
// could move would leave them on the moved-from object. Joinable forbids it (joinable.hpp).
static_assert(!std::is_move_constructible_v<DistributedDataParallel> &&
                  !std::is_move_assignable_v<DistributedDataParallel>,
              "a DistributedDataParallel must not move: a Join may hold it");

TEST_CASE("a Join on a world of one: nothing to shadow, the model stays", "[join]") {
  auto group = world_of_one();
  Generator gen(3);
  auto model = std::make_shared<nn::Linear>(3, 2, true, gen);
  DistributedDataParallel ddp(model, *group);
  const auto before = model->parameters()[0].data().to_vector<float>();
  {
    Join join(ddp);
    CHECK_THROWS_WITH(Join(ddp), Catch::Contains("already in a Join"));
    for (int i = 0; i < 2; ++i) {
      model->zero_grad();
      sum(ddp(Variable(ones({1, 3})))).backward();
      ddp.average_gradients();
    }
    join.finish();
    CHECK(join.finished());
    CHECK(join.shadowed_iterations() == 0);
    CHECK(join.final_root() == 0);
    CHECK_THROWS_WITH(join.finish(), Catch::Contains("finish() called twice"));
  }
  // No optimizer stepped: the final sync (from rank 0, to itself) changed nothing.
  CHECK(model->parameters()[0].data().to_vector<float>() == before);
  Join again(ddp);  // the first one unregistered
  again.finish();
  CHECK(again.final_root() == -1);  // no forward inside it: nobody trained
}

TEST_CASE("a Join refuses a model with SyncBatchNorm2d, whose forward it cannot shadow", "[join]") {
  auto group = world_of_one();
  Generator gen(4);
  auto model = std::make_shared<nn::ResNetMnist>(gen);
  convert_sync_batchnorm(*model, *group);
  DistributedDataParallel ddp(model, *group);
  CHECK_THROWS_WITH(Join(ddp), Catch::Contains("SyncBatchNorm2d") && Catch::Contains("hint:"));
}
