// bench_sharded_step: chapter 09's step time and memory per rank, for DDP and the three
// sharded ways, with AdamW (K = 8 bytes of state per parameter), under a launcher:
//
//   ddprun --nproc-per-node 2 build/release/bin/bench_sharded_step [--width K] [--steps N]
//
// For each of ddp (DDP, chapter 07's Reducer), zero1 (DDP + ZeroRedundancyOptimizer), zero2
// (ShardedDataParallel) and fsdp (FullyShardedDataParallel), one after the other, each
// with a model of its own from the same seed: `--warmup` untimed and `--steps` timed steps
// of a global batch of 128 random digits of the bundled set (one thread per rank). A
// step's time is the slowest rank's, between two barriers. Memory, rank 0's
// (tensor/memory.hpp): what it holds after the timed steps, beside Note [The memory
// prediction] (dist/parallel/memory_prediction.hpp), and the peaks over those steps (under
// zero2 and fsdp a bucket's or unit's full gradients exist until its reduce-scatter has
// them; FSDP's parameters peak at the shards + two units).
// bench/sharded.sh runs it beside PyTorch's ZeroRedundancyOptimizer and prints ratios.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "autograd/functions.hpp"
#include "base/units.hpp"
#include "bench/bench_args.hpp"
#include "bench/timing.hpp"
#include "data/mnist.hpp"
#include "dist/init.hpp"
#include "dist/parallel/distributed_data_parallel.hpp"
#include "dist/parallel/fully_sharded_data_parallel.hpp"
#include "dist/parallel/memory_prediction.hpp"
#include "dist/parallel/sharded_data_parallel.hpp"
#include "dist/parallel/zero_redundancy_optimizer.hpp"
#include "nn/adamw.hpp"
#include "nn/resnet_mnist.hpp"
#include "tensor/memory.hpp"
#include "tensor/random.hpp"
#include "tensor/threads.hpp"

using namespace ddp;

namespace {

constexpr std::int64_t kGlobalBatch = 128;

// One way of training, built, stepped and dropped as a whole.
struct Mode {
  std::shared_ptr<nn::ResNetMnist> model;
  std::unique_ptr<DistributedDataParallel> ddp;
  std::unique_ptr<nn::Optimizer> optimizer;  // ddp, zero1
  std::unique_ptr<ShardedDataParallel> zero2;
  std::unique_ptr<FullyShardedDataParallel> fsdp;

  Mode(const std::string& name, int width, ProcessGroup& group) {
    Generator gen(0);
    model = std::make_shared<nn::ResNetMnist>(gen, width);
    const auto adamw = [](std::vector<Variable> ps) -> std::unique_ptr<nn::Optimizer> {
      return std::make_unique<nn::AdamW>(std::move(ps), nn::AdamWOptions{.lr = 1e-3});
    };
    if (name == "ddp" || name == "zero1") {
      ddp = std::make_unique<DistributedDataParallel>(model, group);
      optimizer = name == "ddp" ? adamw(model->parameters())
                                : std::make_unique<ZeroRedundancyOptimizer>(
                                      model->parameters(), group, adamw);
    } else if (name == "zero2") {
      zero2 = std::make_unique<ShardedDataParallel>(model, group, adamw);
    } else {
      fsdp = std::make_unique<FullyShardedDataParallel>(model, group, adamw);
    }
  }
  void step(const Batch& batch) {
    const Variable x(batch.images);
    if (ddp) {
      optimizer->zero_grad();
      cross_entropy((*ddp)(x), batch.labels).backward();
      optimizer->step();
    } else if (zero2) {
      zero2->zero_grad();
      cross_entropy((*zero2)(x), batch.labels).backward();
      zero2->step();
    } else {
      fsdp->zero_grad();
      cross_entropy((*fsdp)(x), batch.labels).backward();
      fsdp->step();
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  try {
    int steps = 20, warmup = 3, width = 1;
    for (int i = 1; i < argc; ++i) {
      const std::string flag = argv[i];
      DDP_CHECK(i + 1 < argc, "bench_sharded_step: ", flag, " needs a value");
      const std::string value = argv[++i];
      if (flag == "--steps") {
        steps = bench::parse_int(flag, value, 1);
      } else if (flag == "--warmup") {
        warmup = bench::parse_int(flag, value, 0);
      } else if (flag == "--width") {
        width = bench::parse_int(flag, value, 1);
      } else {
        DDP_FAIL("bench_sharded_step: unknown flag ", flag, " (--steps N, --warmup N, --width K)");
      }
    }
    set_num_threads(1);
    auto group = init_process_group(InitOptions{});
    const int rank = group->rank(), world = group->size();
    const MnistDataset train(MnistSplit::Train, default_mnist_folder());
    for (const std::string name : {"ddp", "zero1", "zero2", "fsdp"}) {
      Mode mode(name, width, *group);
      std::int64_t largest = 0, second = 0;  // FSDP's two largest units, padded
      for (std::size_t u = 0; mode.fsdp && u < mode.fsdp->num_units(); ++u) {
        const std::int64_t n = mode.fsdp->unit(u).layout().padded_numel();
        second = std::max(second, std::min(n, largest));
        largest = std::max(largest, n);
      }
      const MemoryPrediction predicted =
          predict_memory(name == "ddp" ? "none" : name, *mode.model, world, /*AdamW*/ 8.0);
      // FSDP's parameters at their peak: the shards and the two largest units whole.
      const double bound = predicted.parameters + 4.0 * static_cast<double>(largest + second);
      Generator pick(1000 + static_cast<std::uint64_t>(rank));
      std::vector<float> times;
      for (int i = 0; i < warmup + steps; ++i) {
        const Tensor order = randperm(train.size(), pick).narrow(0, 0, kGlobalBatch / world);
        const Batch batch = train.get_batch(order.to_vector<std::int64_t>());
        if (i == warmup) memory::reset_peaks();  // the timed steps' peaks only
        group->barrier()->wait();
        const double start = bench::now_seconds();
        mode.step(batch);
        if (i >= warmup) times.push_back(static_cast<float>(bench::now_seconds() - start));
      }
      Tensor slowest = from_data(times, {static_cast<std::int64_t>(times.size())});
      group->all_reduce(slowest, ReduceOp::Max)->wait();
      std::vector<double> step_times;
      for (float t : slowest.to_vector<float>()) step_times.push_back(t);
      const bench::Timing t = bench::summarize(step_times);
      const memory::Snapshot m = memory::snapshot();
      const auto mib = [](double bytes) { return bytes / static_cast<double>(kMiB); };
      const auto live = [&](memory::Category c) { return static_cast<double>(m[c].live); };
      const auto peak = [&](memory::Category c) { return static_cast<double>(m[c].peak); };
      using C = memory::Category;
      if (rank == 0) {
        std::printf(
            "np=%d width=%d %-5s: step min %.1f ms, median %.1f ms; rank 0 MiB held "
            "(predicted): parameters %.3f (%.3f), gradients %.3f (%.3f), optimizer state %.3f "
            "(%.3f); peaks: parameters %.3f%s, gradients %.3f, all tensors %.3f\n",
            world, width, name.c_str(), 1e3 * t.min_s, 1e3 * t.median_s,
            mib(live(C::Parameters)), mib(predicted.parameters), mib(live(C::Gradients)),
            mib(predicted.gradients), mib(live(C::OptimizerState)), mib(predicted.optimizer_state),
            mib(peak(C::Parameters)),
            mode.fsdp ? detail::concat(" (bound ", std::lround(1000 * mib(bound)) / 1000.0, ")").c_str()
                      : "",
            mib(peak(C::Gradients)), mib(static_cast<double>(m.total.peak)));
        std::fflush(stdout);
      }
    }
    group->barrier()->wait();
    group->destroy();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_sharded_step: %s\n", e.what());
    return 1;
  }
}
