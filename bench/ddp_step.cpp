// bench_ddp_step: one data-parallel training step of the ResNet, chapter 06's DDP, timed
// the way bench/torch/bench_ddp.py times PyTorch's DDP over Gloo, so the two can be put
// side by side (bench/ddp.sh runs both in one session and prints the ratio).
//
//   ddprun --nproc-per-node 2 build/release/bin/bench_ddp_step [--steps 50] [--warmup 10]
//
// Every rank: 1 thread (as bench_ddp.py), local batch = 128 / world size, the same seeded
// model, random training images. Modes, interleaved round-robin so that slow drifts of a
// shared machine hit all alike; before each step the ranks meet in a barrier (untimed),
// and a step's time is the maximum over the ranks:
//   flat           DDP step: forward (buffers broadcast), backward, one all-reduce, SGD
//   per-parameter  the same with one all-reduce per parameter (GradientSync)
//   no-sync        no gradient averaging: what the step costs without communication
//   flat-nobuf     flat without broadcast_buffers
// Prints one line per mode, "min / median ms" (and the time spent in average_gradients,
// max over ranks), then what communication adds: flat minus no-sync.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "autograd/functions.hpp"
#include "bench/bench_args.hpp"
#include "bench/timing.hpp"
#include "data/mnist.hpp"
#include "dist/init.hpp"
#include "dist/parallel/distributed_data_parallel.hpp"
#include "nn/resnet_mnist.hpp"
#include "nn/sgd.hpp"
#include "tensor/random.hpp"
#include "tensor/threads.hpp"

namespace {

using namespace ddp;
using bench::now_seconds;

constexpr std::int64_t kGlobalBatch = 128;

struct Mode {
  std::string name;
  bool sync = true;
  DDPOptions options;
  std::shared_ptr<nn::ResNetMnist> model;
  std::unique_ptr<DistributedDataParallel> ddp;
  std::unique_ptr<nn::SGD> sgd;
  std::vector<double> step_s, comm_s;
};

// The slowest rank's value of each entry (the step is as slow as its slowest rank).
std::vector<double> max_over_ranks(ProcessGroup& group, const std::vector<double>& values) {
  std::vector<float> narrowed(values.begin(), values.end());
  Tensor t =
      from_data(std::span<const float>(narrowed), {static_cast<std::int64_t>(narrowed.size())});
  group.all_reduce(t, ReduceOp::Max)->wait();
  const auto out = t.to_vector<float>();
  return {out.begin(), out.end()};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    int steps = 50, warmup = 10;
    for (int i = 1; i + 1 < argc; i += 2) {
      const std::string flag = argv[i];
      if (flag == "--steps") {
        steps = bench::parse_int(flag, argv[i + 1], 1);
      } else if (flag == "--warmup") {
        warmup = bench::parse_int(flag, argv[i + 1], 0);
      } else {
        DDP_FAIL("bench_ddp_step: unknown flag ", flag, " (--steps N, --warmup N)");
      }
    }
    set_num_threads(1);
    auto group = init_process_group(InitOptions{});
    const int rank = group->rank(), world = group->size();
    const std::int64_t local_batch = kGlobalBatch / world;
    const MnistDataset train(MnistSplit::Train, default_mnist_folder());

    std::vector<Mode> modes(4);
    modes[0].name = "flat";
    modes[1].name = "per-parameter";
    modes[1].options.gradient_sync = GradientSync::PerParameter;
    modes[2].name = "no-sync";
    modes[2].sync = false;
    modes[3].name = "flat-nobuf";
    modes[3].options.broadcast_buffers = false;
    for (Mode& m : modes) {
      Generator gen(0);
      m.model = std::make_shared<nn::ResNetMnist>(gen);
      m.ddp = std::make_unique<DistributedDataParallel>(m.model, *group, m.options);
      m.sgd = std::make_unique<nn::SGD>(
          m.model->parameters(), nn::SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 5e-4});
    }
    Generator pick(1000 + static_cast<std::uint64_t>(rank));
    for (int i = 0; i < warmup + steps; ++i) {
      // One random local batch per step, the same for every mode.
      const Tensor order = randperm(train.size(), pick).narrow(0, 0, local_batch);
      const std::vector<std::int64_t> indices = order.to_vector<std::int64_t>();
      const Batch batch = train.get_batch(indices);
      for (Mode& m : modes) {
        group->barrier()->wait();
        const double start = now_seconds();
        m.sgd->zero_grad();
        cross_entropy((*m.ddp)(Variable(batch.images)), batch.labels).backward();
        const double comm_start = now_seconds();
        if (m.sync) m.ddp->average_gradients();
        const double comm = now_seconds() - comm_start;
        m.sgd->step();
        if (i >= warmup) {
          m.step_s.push_back(now_seconds() - start);
          m.comm_s.push_back(comm);
        }
      }
    }
    if (rank == 0) {
      std::printf(
          "bench_ddp_step: %d ranks (%s), 1 thread each, batch %lld per rank = %lld, "
          "%d steps after %d warm-up\n",
          world, group->backend_name().c_str(), static_cast<long long>(local_batch),
          static_cast<long long>(kGlobalBatch), steps, warmup);
    }
    std::vector<bench::Timing> steps_of(modes.size());
    for (std::size_t k = 0; k < modes.size(); ++k) {
      Mode& m = modes[k];
      steps_of[k] = bench::summarize(max_over_ranks(*group, m.step_s));
      const auto comm = bench::summarize(max_over_ranks(*group, m.comm_s));
      if (rank != 0) continue;
      std::printf("np=%d %-13s: step min %.1f ms, median %.1f ms", world, m.name.c_str(),
                  steps_of[k].min_s * 1e3, steps_of[k].median_s * 1e3);
      if (m.sync) std::printf("; in average_gradients %.2f ms (median)", comm.median_s * 1e3);
      std::printf("\n");
    }
    // What communication adds to a step: the DDP step minus the step without it. The time
    // inside average_gradients is larger: it includes waiting for the slowest rank to
    // finish its backward (the ranks' compute times differ from step to step).
    if (rank == 0) {
      const double added = steps_of[0].median_s - steps_of[2].median_s;
      std::printf("np=%d communication: flat - no-sync = %.1f ms of the median step (%.1f%%)\n",
                  world, added * 1e3, 100.0 * added / steps_of[0].median_s);
    }
    group->barrier()->wait();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_ddp_step: error: %s\n", e.what());
    return 1;
  }
}
