// bench_ddp_step: one data-parallel training step of the ResNet, timed the way
// bench/torch/bench_ddp.py times PyTorch's DDP over Gloo, so the two can be put side by
// side (bench/ddp.sh runs both in one session and prints the ratio). Chapters 06 and 07.
//
//   ddprun --nproc-per-node 2 build/release/bin/bench_ddp_step [--steps 50] [--warmup 10]
//          [--width K] [--caps 0.25,1,25] [--all]
//
// Every rank: 1 thread (as bench_ddp.py), local batch = 128 / world size, the same seeded
// model (ResNetMnist, channels x --width), random training images. Modes, interleaved
// round-robin so that slow drifts of a shared machine hit all alike; before each step the
// ranks meet in a barrier (untimed), and a step's time is the maximum over the ranks:
//   bucketed C     chapter 07's Reducer with buckets of C MiB (first bucket min(C, 1)),
//                  one mode per --caps value (default 25, PyTorch's)
//   flat           chapter 06's DDP: backward, then one all-reduce of all gradients
//   no-sync        no gradient averaging (DDP's no_sync): the step without communication
//   per-parameter, flat-nobuf   (--all) chapter 06's other variants
// Prints one line per mode: the step (min, median), and from a trace (base/trace.hpp)
// the communication (some collective running) and the exposed part of it (the main
// thread waiting for the network); then, per bucketed mode, exposed communication as a
// share of flat's all-reduce (flat exposes all of it), and the cost model's prediction
// (dist/parallel/cost_model.hpp) from the no-sync step's measured forward / backward /
// optimizer times and the link: the tcp group's emulated one (DDP_TCP_LINK) when set,
// else one measured here (a 4 KiB and an 8 MiB all-reduce).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autograd/functions.hpp"
#include "bench/bench_args.hpp"
#include "bench/timing.hpp"
#include "data/mnist.hpp"
#include "dist/init.hpp"
#include "dist/parallel/cost_model.hpp"
#include "dist/parallel/distributed_data_parallel.hpp"
#include "dist/process_group_tcp.hpp"
#include "nn/resnet_mnist.hpp"
#include "nn/sgd.hpp"
#include "tensor/random.hpp"
#include "tensor/threads.hpp"
#include "base/trace.hpp"
#include "base/units.hpp"

namespace {

using namespace ddp;
using bench::now_seconds;

constexpr std::int64_t kGlobalBatch = 128;

struct Mode {
  std::string name;
  bool sync = true;
  double cap_mib = 0;  // bucketed modes
  DDPOptions options = {};
  std::shared_ptr<nn::ResNetMnist> model = {};
  std::unique_ptr<DistributedDataParallel> ddp = {};
  std::unique_ptr<nn::SGD> sgd = {};
  std::vector<double> step_s = {}, forward_s = {}, backward_s = {}, optimizer_s = {};
  // From the trace (base/trace.hpp), per step: the main thread's waits for the network
  // (exposed), and the time some collective was running (communication).
  std::vector<double> exposed_s = {}, communication_s = {};
};

// Each entry's maximum (or minimum) over the ranks.
std::vector<double> over_ranks(ProcessGroup& group, const std::vector<double>& values,
                               ReduceOp op) {
  std::vector<float> narrowed(values.begin(), values.end());
  Tensor t =
      from_data(std::span<const float>(narrowed), {static_cast<std::int64_t>(narrowed.size())});
  group.all_reduce(t, op)->wait();
  const auto out = t.to_vector<float>();
  return {out.begin(), out.end()};
}

// The slowest rank's value of each entry (the step is as slow as its slowest rank).
std::vector<double> max_over_ranks(ProcessGroup& group, const std::vector<double>& values) {
  return over_ranks(group, values, ReduceOp::Max);
}

// The median time of an all-reduce of `bytes` (max over ranks), after a warm-up.
double all_reduce_seconds(ProcessGroup& group, std::int64_t bytes) {
  Tensor t = zeros({bytes / 4});
  std::vector<double> times;
  for (int i = 0; i < 12; ++i) {
    group.barrier()->wait();
    const double start = now_seconds();
    group.all_reduce(t)->wait();
    if (i >= 2) times.push_back(now_seconds() - start);
  }
  return bench::summarize(max_over_ranks(group, times)).median_s;
}

// The link a tcp group emulates (DDP_TCP_LINK), if any.
std::optional<LinkEmulation> emulated_link(ProcessGroup& group) {
  const auto* tcp = dynamic_cast<const ProcessGroupTcp*>(&group);
  return tcp != nullptr ? tcp->link() : std::nullopt;
}

// The link the cost model assumes: the emulated one, or one measured: a ring all-reduce
// of S bytes takes 2(W-1) steps of latency plus 2(W-1)/W * S / bandwidth, so a tiny one
// gives the latency and a large one the bandwidth.
RingLink link_for_model(ProcessGroup& group) {
  if (const auto link = emulated_link(group)) {
    return RingLink{link->bytes_per_second, std::chrono::duration<double>(link->latency).count()};
  }
  const int w = group.size();
  const double small = all_reduce_seconds(group, 4096);
  const std::int64_t large_bytes = 8 * kMiB;
  const double large = all_reduce_seconds(group, large_bytes);
  RingLink link;
  link.latency_s = small / (2.0 * (w - 1));
  link.bandwidth_bytes_per_s =
      2.0 * (w - 1) / w * static_cast<double>(large_bytes) / std::max(large - small, 1e-9);
  return link;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    int steps = 50, warmup = 10, width = 1;
    bool all = false;
    std::vector<double> caps{25.0};
    for (int i = 1; i < argc; ++i) {
      const std::string flag = argv[i];
      if (flag == "--all") {
        all = true;
        continue;
      }
      DDP_CHECK(i + 1 < argc, "bench_ddp_step: ", flag, " needs a value");
      const std::string value = argv[++i];
      if (flag == "--steps") {
        steps = bench::parse_int(flag, value, 1);
      } else if (flag == "--warmup") {
        warmup = bench::parse_int(flag, value, 0);
      } else if (flag == "--width") {
        width = bench::parse_int(flag, value, 1);
      } else if (flag == "--caps") {
        caps = bench::parse_decimal_list(flag, value);
      } else {
        DDP_FAIL("bench_ddp_step: unknown flag ", flag,
                 " (--steps N, --warmup N, --width K, --caps MIB,..., --all)");
      }
    }
    set_num_threads(1);
    auto group = init_process_group(InitOptions{});
    const int rank = group->rank(), world = group->size();
    const std::int64_t local_batch = kGlobalBatch / world;
    const MnistDataset train(MnistSplit::Train, default_mnist_folder());

    std::vector<Mode> modes;
    for (const double cap : caps) {
      Mode m{.name = detail::concat("bucketed ", cap), .cap_mib = cap};
      m.options.reducer.bucket_cap_bytes = static_cast<std::int64_t>(cap * kMiB);
      m.options.reducer.first_bucket_bytes = std::min(m.options.reducer.bucket_cap_bytes, kMiB);
      modes.push_back(std::move(m));
    }
    modes.push_back(Mode{.name = "flat"});
    modes.back().options.gradient_sync = GradientSync::Flat;
    modes.push_back(Mode{.name = "no-sync", .sync = false});
    if (all) {
      modes.push_back(Mode{.name = "per-parameter"});
      modes.back().options.gradient_sync = GradientSync::PerParameter;
      modes.push_back(Mode{.name = "flat-nobuf"});
      modes.back().options.gradient_sync = GradientSync::Flat;
      modes.back().options.broadcast_buffers = false;
    }
    for (Mode& m : modes) {
      Generator gen(0);
      m.model = std::make_shared<nn::ResNetMnist>(gen, width);
      m.ddp = std::make_unique<DistributedDataParallel>(m.model, *group, m.options);
      m.sgd = std::make_unique<nn::SGD>(
          m.model->parameters(), nn::SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 5e-4});
    }
    trace::start(rank);  // for the waits and the collectives' spans (a few per step)
    Generator pick(1000 + static_cast<std::uint64_t>(rank));
    for (int i = 0; i < warmup + steps; ++i) {
      // One random local batch per step, the same for every mode.
      const Tensor order = randperm(train.size(), pick).narrow(0, 0, local_batch);
      const std::vector<std::int64_t> indices = order.to_vector<std::int64_t>();
      const Batch batch = train.get_batch(indices);
      for (Mode& m : modes) {
        group->barrier()->wait();
        const trace::Mark mark = trace::mark();
        const double start = now_seconds();
        m.sgd->zero_grad();
        std::unique_ptr<NoSyncGuard> local;  // the guard cannot move: made in place
        if (!m.sync) local.reset(new NoSyncGuard(m.ddp->no_sync()));
        Variable loss = cross_entropy((*m.ddp)(Variable(batch.images)), batch.labels);
        const double forward_end = now_seconds();
        loss.backward();                         // the Reducer averages in here
        if (m.sync) m.ddp->average_gradients();  // the flat and per-parameter ones, here
        const double backward_end = now_seconds();
        m.sgd->step();
        if (i >= warmup) {
          const double end = now_seconds();
          m.step_s.push_back(end - start);
          m.forward_s.push_back(forward_end - start);
          m.backward_s.push_back(backward_end - forward_end);
          m.optimizer_s.push_back(end - backward_end);
          const trace::Summary traced = trace::summarize_since(mark);
          m.exposed_s.push_back(traced.exposed_ms / 1e3);
          m.communication_s.push_back(traced.communication_ms / 1e3);
        }
      }
    }
    trace::stop();
    const RingLink link = link_for_model(*group);
    std::int64_t gradient_bytes = 0;
    for (const Variable& p : modes[0].model->parameters()) gradient_bytes += p.numel() * 4;
    if (rank == 0) {
      std::printf(
          "bench_ddp_step: %d ranks (%s), 1 thread each, width %d (%lld bytes of gradients), "
          "batch %lld per rank = %lld, %d steps after %d warm-up; link for the model: %s%s\n",
          world, group->backend_name().c_str(), width, static_cast<long long>(gradient_bytes),
          static_cast<long long>(local_batch), static_cast<long long>(kGlobalBatch), steps, warmup,
          to_string(link).c_str(),
          emulated_link(*group) ? " (DDP_TCP_LINK, emulated)" : " (measured)");
    }
    // Per mode: the step (the slowest rank's), and from the trace the exposed
    // communication (waits) and the communication (collectives running). For those two,
    // each step's MINIMUM over the ranks: a rank that finished backward early also waits
    // for the others to finish theirs, which is their compute, not the network; the last
    // rank to arrive waits for the network alone.
    std::vector<bench::Timing> step(modes.size());
    std::vector<double> exposed(modes.size()), communication(modes.size());
    for (std::size_t k = 0; k < modes.size(); ++k) {
      step[k] = bench::summarize(max_over_ranks(*group, modes[k].step_s));
      exposed[k] = bench::summarize(over_ranks(*group, modes[k].exposed_s, ReduceOp::Min)).median_s;
      communication[k] =
          bench::summarize(over_ranks(*group, modes[k].communication_s, ReduceOp::Min)).median_s;
      if (rank == 0) {
        std::printf(
            "np=%d %-13s: step min %.1f ms, median %.1f ms; communication %.1f ms, "
            "exposed %.1f ms\n",
            world, modes[k].name.c_str(), step[k].min_s * 1e3, step[k].median_s * 1e3,
            communication[k] * 1e3, exposed[k] * 1e3);
      }
    }
    // The bucketed modes: exposed communication against the all-reduce's time (flat's
    // communication: one all-reduce of everything, all of it exposed), and the cost
    // model's prediction from the no-sync step's measured parts.
    const std::size_t flat = caps.size(), none = caps.size() + 1;
    const Mode& local = modes[none];
    const StepTimes times{bench::summarize(local.forward_s).median_s,
                          bench::summarize(local.backward_s).median_s,
                          bench::summarize(local.optimizer_s).median_s};
    if (rank == 0) {
      std::printf(
          "np=%d no-sync parts (median): forward %.1f ms, backward %.1f ms, optimizer "
          "%.1f ms; flat's all-reduce %.1f ms\n",
          world, times.forward_s * 1e3, times.backward_s * 1e3, times.optimizer_s * 1e3,
          communication[flat] * 1e3);
    }
    for (std::size_t k = 0; k < caps.size(); ++k) {
      const Mode& m = modes[k];
      std::vector<std::int64_t> sizes;
      for (const auto& bucket : m.ddp->reducer().bucket_assignment()) {
        std::int64_t bytes = 0;
        for (const std::size_t i : bucket) bytes += m.model->parameters()[i].numel() * 4;
        sizes.push_back(bytes);
      }
      const StepPrediction p =
          predict_step(times, ready_at_uniform_rate(sizes, times.backward_s), world, link);
      if (rank == 0) {
        std::printf(
            "np=%d %-13s: %zu buckets; exposed %.1f ms = %.0f%% of the all-reduce; "
            "step %.1f ms; model: step %.1f ms, exposed %.1f ms (flat: %.1f ms)\n",
            world, m.name.c_str(), sizes.size(), exposed[k] * 1e3,
            100.0 * exposed[k] / std::max(communication[flat], 1e-9), step[k].median_s * 1e3,
            p.step_s * 1e3, p.exposed_comm_s * 1e3, p.naive_step_s * 1e3);
      }
    }
    group->barrier()->wait();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_ddp_step: error: %s\n", e.what());
    return 1;
  }
}
