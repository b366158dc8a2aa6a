// ch09_timeline: one training step of DDP, ZeRO-1, ZeRO-2 and FSDP, drawn as timelines.
//
//   DDP_TCP_LINK=1gbit,50us ddprun --nproc-per-node 2 build/release/bin/ch09_timeline
//   ddprun --nproc-per-node 2 build/release/bin/ch09_timeline --width 4
//
// Every rank trains the ResNet (channels x --width, default 2) with AdamW and a batch of
// 32, four times from the same start: under DDP (chapter 07's Reducer, buckets of 0.5 MiB),
// ZeRO-1 (DDP and a ZeroRedundancyOptimizer), ZeRO-2 (ShardedDataParallel, buckets of 0.5
// MiB) and FSDP (FullyShardedDataParallel, a unit per child of the ResNet). After two
// untimed steps of each, rank 0 records a third (base/trace.hpp) and prints it as chapter
// 07's ch07_timeline does: the main thread (F forward, B backward, w waiting for the
// network, O optimizer), the tcp backend's communication thread (= a collective running),
// and under them where each flat buffer's all-gather and reduce-scatter was launched
// (dist/parallel/shard_trace.hpp), as the buffer's number.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "autograd/functions.hpp"
#include "base/error.hpp"
#include "base/exit_codes.hpp"
#include "base/text.hpp"
#include "base/trace.hpp"
#include "base/units.hpp"
#include "dist/init.hpp"
#include "dist/parallel/distributed_data_parallel.hpp"
#include "dist/parallel/fully_sharded_data_parallel.hpp"
#include "dist/parallel/reducer.hpp"
#include "dist/parallel/shard_trace.hpp"
#include "dist/parallel/sharded_data_parallel.hpp"
#include "dist/parallel/zero_redundancy_optimizer.hpp"
#include "nn/adamw.hpp"
#include "nn/resnet_mnist.hpp"
#include "tensor/random.hpp"
#include "tensor/threads.hpp"

using namespace ddp;

namespace {

constexpr std::int64_t kBatch = 32;
constexpr std::int64_t kBucketBytes = kMiB / 2;

std::unique_ptr<nn::Optimizer> adamw(std::vector<Variable> parameters) {
  return std::make_unique<nn::AdamW>(std::move(parameters), nn::AdamWOptions{.lr = 1e-3});
}

// One way to train, behind the three calls of a step.
struct Stage {
  std::string title;
  std::function<Variable(const Variable&)> forward;
  std::function<void()> step;       // after backward: the optimizer (and its collectives)
  std::function<void()> zero_grad;
};

struct Recorded {
  std::vector<trace::Event> events;
  std::int64_t begin_ns = 0, end_ns = 0;
};

// Two untimed steps, then one recorded.
Recorded one_step(const Stage& stage, ProcessGroup& group) {
  Generator gen(2);
  const std::vector<std::int64_t> labels(kBatch, 7);
  const Tensor y = from_data(std::span<const std::int64_t>(labels), {kBatch});
  Recorded r;
  for (int step = 0; step < 3; ++step) {
    const Tensor x = randn({kBatch, 1, 28, 28}, gen);
    group.barrier()->wait();
    if (step == 2) trace::start(group.rank());
    r.begin_ns = trace::now_ns();
    stage.zero_grad();
    Variable loss;
    {
      trace::Span span("forward", "forward + loss");
      loss = cross_entropy(stage.forward(Variable(x)), y);
    }
    {
      trace::Span span("backward", "backward");
      loss.backward();
    }
    {
      trace::Span span("optimizer", "AdamW step");
      stage.step();
    }
    r.end_ns = trace::now_ns();
  }
  trace::stop();
  r.events = trace::events();
  return r;
}

std::shared_ptr<nn::ResNetMnist> resnet(int width) {
  Generator gen(1);
  return std::make_shared<nn::ResNetMnist>(gen, width);
}

DDPOptions small_buckets() {
  DDPOptions options;
  options.reducer.bucket_cap_bytes = options.reducer.first_bucket_bytes = kBucketBytes;
  return options;
}

// Each stage's step, recorded on rank 0; the wrappers live only while their step runs.
std::vector<Recorded> record_stages(ProcessGroup& group, int width) {
  std::vector<Recorded> runs;
  {
    DistributedDataParallel ddp(resnet(width), group, small_buckets());
    auto opt = adamw(ddp.module().parameters());
    runs.push_back(one_step({"DDP", [&](const Variable& x) { return ddp(x); },
                             [&] { opt->step(); }, [&] { opt->zero_grad(); }}, group));
  }
  {
    DistributedDataParallel ddp(resnet(width), group, small_buckets());
    ZeroRedundancyOptimizer opt(ddp.module().parameters(), group, adamw);
    runs.push_back(one_step({"ZeRO-1", [&](const Variable& x) { return ddp(x); },
                             [&] { opt.step(); }, [&] { opt.zero_grad(); }}, group));
  }
  {
    const ShardedOptions options{.bucket_cap_bytes = kBucketBytes,
                                 .first_bucket_bytes = kBucketBytes};
    ShardedDataParallel zero2(resnet(width), group, adamw, options);
    runs.push_back(one_step({"ZeRO-2", [&](const Variable& x) { return zero2(x); },
                             [&] { zero2.step(); }, [&] { zero2.zero_grad(); }}, group));
  }
  {
    FullyShardedDataParallel fsdp(resnet(width), group, adamw);
    runs.push_back(one_step({"FSDP", [&](const Variable& x) { return fsdp(x); },
                             [&] { fsdp.step(); }, [&] { fsdp.zero_grad(); }}, group));
  }
  return runs;
}

// --width K, the only flag; anything else is refused, naming it.
int parse_width(int argc, char** argv) {
  int width = 2;
  for (int i = 1; i < argc; i += 2) {
    const std::string_view flag = argv[i];
    DDP_CHECK(flag == "--width" && i + 1 < argc,
              "unknown flag or missing value '", flag, "' (only --width K)");
    const std::optional<int> k = to_integer<int>(argv[i + 1]);
    DDP_CHECK(k && *k >= 1, "--width expects a whole number >= 1, got '",
              argv[i + 1], "'");
    width = *k;
  }
  return width;
}

void print_timelines(const std::vector<Recorded>& runs, int world, int width) {
  std::int64_t longest = 0;  // one time scale for all: the longest step fills the width
  for (const Recorded& r : runs) longest = std::max(longest, r.end_ns - r.begin_ns);
  const char* titles[] = {"DDP: all-reduces during backward",
                          "ZeRO-1: DDP's all-reduces, then AdamW on a shard and one all-gather",
                          "ZeRO-2: reduce-scatters during backward, AdamW on a shard, all-gathers",
                          "FSDP: each unit gathered before its forward and its backward"};
  const trace::InstantRow buckets = Reducer::launches_row();
  const trace::InstantRow scatters = shard_row("reduce-scatter", "reduce-scatter");
  const trace::InstantRow gathers = shard_row("gather", "all-gather");
  const trace::InstantRow frees = shard_row("free", "free");
  const std::vector<trace::InstantRow> rows[] = {
      {buckets}, {buckets, gathers}, {scatters, gathers}, {gathers, scatters, frees}};
  for (std::size_t k = 0; k < runs.size(); ++k) {
    const Recorded& r = runs[k];
    const trace::Summary s = trace::summarize(r.events, r.begin_ns, r.end_ns);
    std::printf("\n%s: step %.1f ms, communication %.1f ms, exposed %.1f ms\n", titles[k],
                (r.end_ns - r.begin_ns) / 1e6, s.communication_ms, s.exposed_ms);
    const std::string timeline =
        trace::render_text(r.events, r.begin_ns, r.begin_ns + longest, rows[k]);
    std::printf("%s", timeline.c_str());
  }
  std::printf("\nok: %d ranks, width %d\n", world, width);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int width = parse_width(argc, argv);
    set_num_threads(1);
    auto group = init_process_group(InitOptions{});
    const std::vector<Recorded> runs = record_stages(*group, width);
    if (group->rank() == 0) print_timelines(runs, group->size(), width);
    group->barrier()->wait();
    return kExitOk;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ch09_timeline: %s\n", e.what());
    return kExitError;
  }
}
