// ch06_sharded: data parallelism in three prints. Chapter 06.
//
//   ddprun --nproc-per-node 3 build/release/bin/ch06_sharded
//   mpirun -np 3 --oversubscribe build/release/bin/ch06_sharded --backend mpi
//
// Each rank shows (1) its shard of a 10-sample epoch (DistributedSampler: padded to a
// multiple of the ranks, so that on 3 ranks each gets 4), (2) one gradient before and after DDP
// averages it over the ranks, and (3) that after an SGD step every rank holds the same weights.
// Rank by rank, in order (a barrier between turns keeps the lines of different ranks apart).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "autograd/functions.hpp"
#include "data/distributed_sampler.hpp"
#include "dist/init.hpp"
#include "dist/parallel/distributed_data_parallel.hpp"
#include "dist/parallel/replica_check.hpp"
#include "nn/linear.hpp"
#include "nn/sgd.hpp"
#include "base/error.hpp"
#include "tensor/random.hpp"

namespace {

using namespace ddp;

// Runs `say` on rank 0, then rank 1, ...: one rank at a time.
template <typename Say>
void in_turn(ProcessGroup& group, Say say) {
  for (int r = 0; r < group.size(); ++r) {
    if (r == group.rank()) {
      say();
      std::fflush(stdout);
    }
    group.barrier()->wait();
  }
}

// "[a, b, c]" of the first `n` values.
template <typename T>
std::string list(const std::vector<T>& v, std::size_t n = SIZE_MAX) {
  std::string out;
  for (std::size_t i = 0; i < v.size() && i < n; ++i) out += detail::concat(i ? ", " : "", v[i]);
  return "[" + out + "]";
}

}  // namespace

int main(int argc, char** argv) {
  int rank = -1;
  try {
    InitOptions init;
    if (argc == 3 && std::string(argv[1]) == "--backend") init.backend = argv[2];
    auto group = init_process_group(init);
    rank = group->rank();
    const int world = group->size();

    // (1) The shards of one epoch.
    DistributedSampler sampler(10, world, rank, /*shuffle=*/true, /*seed=*/0);
    sampler.set_epoch(0);
    in_turn(*group, [&] {
      std::printf("rank %d/%d: my shard of 10 samples: %s (%lld each; %lld in all, %s)\n", rank,
                  world, list(sampler.indices()).c_str(), static_cast<long long>(sampler.size()),
                  static_cast<long long>(sampler.total_size()),
                  sampler.total_size() > 10 ? "the head repeated as padding" : "no padding");
    });

    // (2) A tiny model, 4 inputs -> 2 outputs; every rank a different input.
    Generator gen(0);
    auto model = std::make_shared<nn::Linear>(4, 2, /*bias=*/true, gen);
    // Rank 0's weights everywhere; chapter 06's averaging, after backward (the default,
    // chapter 07's, averages inside backward and there would be no "before" to show).
    DistributedDataParallel ddp(model, *group, DDPOptions{.gradient_sync = GradientSync::Flat});
    nn::SGD sgd(model->parameters(), nn::SGDOptions{.lr = 0.1});
    Tensor x = full({1, 4}, static_cast<double>(rank + 1));  // rank r sees (r+1, r+1, ...)
    sum(ddp(Variable(x))).backward();
    const auto before = model->weight().grad().to_vector<float>();
    ddp.average_gradients();
    const auto after = model->weight().grad().to_vector<float>();
    in_turn(*group, [&] {
      std::printf("rank %d: d(loss)/d(weight[0]) mine %s -> averaged %s\n", rank,
                  list(before, 4).c_str(), list(after, 4).c_str());
    });

    // (3) The same step everywhere: the same weights everywhere.
    sgd.step();
    ddp.check_in_sync(1);  // throws on every rank if any rank differs
    // The demonstration's claim, checked on every rank: d(loss)/d(weight) is the input,
    // r + 1 on rank r, so the average over the ranks is (1 + ... + W) / W = (W + 1) / 2 in
    // every element; their sum, W times that, would fail here too (a float sum of small
    // integers times 1/W lands within a rounding step of the exact value).
    const float average = static_cast<float>(world + 1) / 2.0f;
    const auto near = [](float x, float want) { return std::fabs(x - want) <= 1e-6f * want; };
    for (std::size_t i = 0; i < after.size(); ++i) {
      const bool summed = world > 1 && near(after[i], average * static_cast<float>(world));
      DDP_CHECK(before[i] == static_cast<float>(rank + 1) && near(after[i], average), "rank ",
                rank, ": d(loss)/d(weight) element ", i, " is ", before[i], " -> ", after[i],
                " after averaging; expected ", rank + 1, " -> ", average, " = (1 + ... + ",
                world, ") / ", world,
                summed ? " (the sum over the ranks: the division by the world size is missing)"
                       : "");
    }
    if (rank == 0) {
      std::printf(
          "the average is (1 + ... + %d) / %d = %g per input; after the step all %d ranks "
          "hold the same weights (hash %016llx)\n",
          world, world, (world + 1) / 2.0, world,
          static_cast<unsigned long long>(parameter_hash(*model)));
      std::printf("ok: %d ranks trained one model\n", world);
    }
    group->barrier()->wait();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ch06_sharded: rank %d: error: %s\n", rank, e.what());
    return 1;
  }
}
