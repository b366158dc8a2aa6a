// ch06_equivalence: N ranks of DistributedDataParallel against one process, step by step.
// Chapter 06's proof that data parallelism computes what one process would.
//
//   ddprun --nproc-per-node 3 build/<dir>/tests/ch06_equivalence --backend tcp
//   mpirun -np 4 --oversubscribe build/<dir>/tests/ch06_equivalence --backend mpi
//   ddprun --nproc-per-node 2 build/<dir>/tests/ch06_equivalence --device cuda
//
// Every rank trains the ResNet for 5 SGD-with-momentum steps (lr 0.01, momentum 0.9) on its shard
// of a global batch of 12 synthetic images, and alongside it, with no communication at all, the
// single-process reference for the same steps:
//   syncbn  DDP + SyncBatchNorm2d  vs  one process with the whole batch of 12 and plain
//           BatchNorm2d: the same math, only the float32 summation order differs;
//   bn      DDP + BatchNorm2d      vs  one process that runs each rank's shard separately
//           and averages the shards' gradients (gradient accumulation): with ordinary
//           BatchNorm each rank normalises its own shard, and so does the reference.
// After every step: parameters within the tolerance of Note [The equivalence tolerance],
// and bitwise equal on all ranks. Both gradient paths (flat, per-parameter) are run.
// --plant makes a known bug so that the scripts can watch the checks fail. --device cuda
// runs both models on GPU 0 (the tcp and mpi groups stage CUDA tensors through host
// memory); every rank exits 77 (ctest: Skipped) where no GPU is usable.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "autograd/functions.hpp"
#include "dist/init.hpp"
#include "dist/parallel/distributed_data_parallel.hpp"
#include "dist/parallel/replica_check.hpp"
#include "dist/parallel/sync_batch_norm.hpp"
#include "nn/linear.hpp"
#include "nn/resnet_mnist.hpp"
#include "nn/sequential.hpp"
#include "nn/sgd.hpp"
#include "base/error.hpp"
#include "tensor/random.hpp"
#include "tests/support/no_gpu.hpp"
#include "tests/support/rank_args.hpp"
#include "tests/support/replicas.hpp"

namespace {

using namespace ddp;

constexpr std::int64_t kGlobalBatch = 12;  // splits evenly over 1, 2, 3 and 4 ranks
constexpr int kSteps = 5;
constexpr std::uint64_t kSeed = 7;

// Note [The equivalence tolerance]
// The DDP run and its reference compute the same sums in different orders: a conv's
// weight gradient sums over b images per rank and then over ranks, instead of over all B
// at once; SyncBatchNorm's statistics likewise. Reordering a float32 sum of n terms moves
// it by about sqrt(n) * 2^-24 relative (random-walk rounding): for the largest sums here,
// 3x3-conv weight gradients over B * 28 * 28 = 9,408 products, 6e-6 relative, so a step
// of lr 0.01 moves a weight differently by ~1e-8 (|gradient| < 0.2 here). Measured: 0 to
// 3e-8 after every step, on every backend and world size. One more effect is discrete: a
// ReLU whose input lies within rounding of 0 can fall on the other side in one of the two
// runs, and then the gradient it passes back changes by that element's full value, not
// by a rounding; the weights it reaches move by lr * |g| * |x| ~ 1e-5 (seen: 5e-6 and
// 1.6e-5 at step 5, in some runs). The tolerance is 1e-4, above both; a real bug is far
// above it: gradients summed instead of averaged over 2 ranks (--plant sum) are 1.1e-3
// off after the first step. With lr 0.1 such flips come earlier and grow through the
// steps to ~1e-3 (the loss on random images is rough), which is why this check uses 0.01.
constexpr double kTolerance = 1e-4;

constexpr double kLearningRate = 0.01;  // Note [The equivalence tolerance]

using Args = test::RankArgs;

struct Data {
  Tensor images;  // (kSteps * B, 1, 28, 28)
  Tensor labels;  // (kSteps * B)
};

Data make_data(Device device) {
  Generator gen(99);
  std::vector<std::int64_t> labels(kSteps * kGlobalBatch);
  for (std::size_t i = 0; i < labels.size(); ++i)
    labels[i] = static_cast<std::int64_t>((i * 7 + 3) % 10);
  return {randn({kSteps * kGlobalBatch, 1, 28, 28}, gen).to(device),
          from_data(std::span<const std::int64_t>(labels), {kSteps * kGlobalBatch}).to(device)};
}

// Rows [first, first + count) of step s's global batch.
Tensor rows(const Tensor& t, int step, std::int64_t first, std::int64_t count) {
  return t.narrow(0, step * kGlobalBatch + first, count).contiguous();
}

nn::SGD make_sgd(const nn::Module& m) {
  return nn::SGD(m.parameters(),
                 nn::SGDOptions{.lr = kLearningRate, .momentum = 0.9, .weight_decay = 5e-4});
}

using test::identical_on_all_ranks;
using test::max_difference;

// One scenario; returns the number of failed checks on this rank.
int run(const std::string& norm, GradientSync sync, const Args& args, const Data& data,
        ProcessGroup& group) {
  const int world = group.size(), rank = group.rank();
  const std::int64_t b = kGlobalBatch / world;
  Generator g1(kSeed), g2(kSeed);
  auto model = std::make_shared<nn::ResNetMnist>(g1);
  auto reference = std::make_shared<nn::ResNetMnist>(g2);
  if (norm == "syncbn") convert_sync_batchnorm(*model, group);
  model->to(args.device);
  reference->to(args.device);
  DistributedDataParallel ddp(model, group, DDPOptions{.gradient_sync = sync});
  nn::SGD sgd = make_sgd(*model), ref_sgd = make_sgd(*reference);

  int failures = 0;
  std::string line;
  for (int s = 0; s < kSteps; ++s) {
    // DDP: this rank's shard.
    sgd.zero_grad();
    cross_entropy(ddp(Variable(rows(data.images, s, rank * b, b))),
                  rows(data.labels, s, rank * b, b))
        .backward();
    ddp.average_gradients();
    if (args.plant == "sum") {  // the bug: gradients summed over the ranks, not averaged
      for (const Variable& p : model->parameters())
        Tensor(p.grad()).mul_(static_cast<float>(world));
    }
    sgd.step();
    if (args.plant == "drift" && s == 2 && rank == world - 1) {  // a rank that updates alone
      model->parameters().back().data().add_(1e-3f);
    }

    // The reference, in this process alone.
    ref_sgd.zero_grad();
    if (norm == "syncbn") {  // one process, the whole global batch
      cross_entropy((*reference)(Variable(rows(data.images, s, 0, kGlobalBatch))),
                    rows(data.labels, s, 0, kGlobalBatch))
          .backward();
    } else {  // each shard separately; gradients accumulate, then / world
      for (int r = 0; r < world; ++r) {
        cross_entropy((*reference)(Variable(rows(data.images, s, r * b, b))),
                      rows(data.labels, s, r * b, b))
            .backward();
      }
      for (const Variable& p : reference->parameters()) {
        Tensor(p.grad()).mul_(1.0f / static_cast<float>(world));  // a handle: in place
      }
    }
    ref_sgd.step();

    const double difference = max_difference(*model, *reference);
    line += detail::concat(" ", difference);
    if (!(difference <= kTolerance)) {
      std::fprintf(stderr,
                   "rank %d: %s %s: step %d: parameters differ from the reference by %g > %g\n",
                   rank, norm.c_str(), to_string(sync), s + 1, difference, kTolerance);
      ++failures;
    }
    if (!identical_on_all_ranks(*model, group)) {
      std::fprintf(stderr, "rank %d: %s %s: step %d: parameters differ between ranks\n", rank,
                   norm.c_str(), to_string(sync), s + 1);
      ++failures;
    }
    if (args.plant == "drift") ddp.check_in_sync(s + 1);  // must throw after step 3
  }
  std::printf("rank %d/%d (%s): %s, gradients %s: max |ddp - reference| after steps 1..%d:%s\n",
              rank, world, group.backend_name().c_str(), norm.c_str(), to_string(sync), kSteps,
              line.c_str());
  std::fflush(stdout);
  return failures;
}

// Rank 1 builds a wider last layer: DDP's constructor must refuse on every rank.
int run_different_model(ProcessGroup& group) {
  Generator gen(kSeed);
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Linear>(4, 8, true, gen));
  model->push_back(std::make_shared<nn::Linear>(8, group.rank() == 1 ? 3 : 2, true, gen));
  DistributedDataParallel ddp(model, group);
  return 0;  // not reached when the check works
}

}  // namespace

int main(int argc, char** argv) {
  int rank = -1;
  try {
    const Args args = test::parse_rank_args(argc, argv, "ch06_equivalence");
    DDP_CHECK(args.scenario == "all", "ch06_equivalence has no --scenario (got ", args.scenario,
              ")");
    if (args.device.is_cuda() && cuda::device_count() == 0) return test::skip_without_gpu();
    InitOptions init;
    init.backend = args.backend;
    init.timeout = std::chrono::seconds(60);
    auto group = init_process_group(init);
    rank = group->rank();
    if (args.plant == "different-model") return run_different_model(*group);
    const Data data = make_data(args.device);
    int failures = 0;
    for (const char* norm : {"syncbn", "bn"}) {
      for (GradientSync sync : {GradientSync::Flat, GradientSync::PerParameter}) {
        failures += run(norm, sync, args, data, *group);
      }
    }
    group->barrier()->wait();
    if (failures == 0 && rank == 0)
      std::printf("PASS: %d ranks match one process\n", group->size());
    return failures == 0 ? 0 : 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ch06_equivalence rank %d: error: %s\n", rank, e.what());
    return 1;
  }
}
