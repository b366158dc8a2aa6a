// ch07_timeline: chapter 06's DDP and chapter 07's, one step each, drawn as timelines.
//
//   DDP_TCP_LINK=1gbit,50us ddprun --nproc-per-node 2 build/release/bin/ch07_timeline
//   ddprun --nproc-per-node 2 build/release/bin/ch07_timeline --width 4 --cap-mb 1
//
// Both ranks train the ResNet (channels x --width, default 2) with a batch of 32 each,
// first with GradientSync::Flat (backward, THEN one all-reduce), then with the Reducer
// (buckets of --cap-mb MiB, default 0.5, all-reduced DURING backward). After two
// untimed steps of each (the Reducer rebuilds its buckets after the first), rank 0
// records one step of each (base/trace.hpp) and prints it as text: a row for the main
// thread (F forward, B backward, w waiting for the network, O optimizer), under it where
// each bucket was launched (the Reducer's row, Reducer::launches_row), and one for the
// tcp backend's communication thread (= an all-reduce), on one time scale. With the link
// emulation (DDP_TCP_LINK, the tcp backend's) the network is slow enough to see.
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "autograd/functions.hpp"
#include "dist/init.hpp"
#include "dist/parallel/distributed_data_parallel.hpp"
#include "dist/parallel/reducer.hpp"
#include "nn/resnet_mnist.hpp"
#include "nn/sgd.hpp"
#include "tensor/random.hpp"
#include "tensor/threads.hpp"
#include "base/trace.hpp"
#include "base/units.hpp"

using namespace ddp;

namespace {

struct Recorded {
  std::vector<trace::Event> events;
  std::int64_t begin_ns = 0, end_ns = 0;
};

// Two untimed steps, then one recorded step of `ddp`.
Recorded one_step(DistributedDataParallel& ddp, ProcessGroup& group, Generator& gen) {
  nn::SGD sgd(ddp.module().parameters(), nn::SGDOptions{.lr = 0.01});
  const std::vector<std::int64_t> labels(32, 7);
  const Tensor y = from_data(std::span<const std::int64_t>(labels), {32});
  Recorded r;
  for (int step = 0; step < 3; ++step) {
    const Tensor x = randn({32, 1, 28, 28}, gen);
    group.barrier()->wait();
    if (step == 2) trace::start(group.rank());
    r.begin_ns = trace::now_ns();
    sgd.zero_grad();
    Variable loss;
    {
      trace::Span span("forward", "forward + loss");
      loss = cross_entropy(ddp(Variable(x)), y);
    }
    {
      trace::Span span("backward", "backward");
      loss.backward();
      ddp.average_gradients();  // Flat: the all-reduce, here; bucketed: done already
    }
    {
      trace::Span span("optimizer", "SGD step");
      sgd.step();
    }
    r.end_ns = trace::now_ns();
  }
  trace::stop();
  r.events = trace::events();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int width = 2;
  double cap_mb = 0.5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--width") == 0) width = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--cap-mb") == 0) cap_mb = std::atof(argv[i + 1]);
  }
  set_num_threads(1);
  auto group = init_process_group(InitOptions{});
  const bool speaker = group->rank() == 0;

  std::vector<Recorded> runs;
  for (const GradientSync sync : {GradientSync::Flat, GradientSync::Bucketed}) {
    Generator gen(1);
    auto model = std::make_shared<nn::ResNetMnist>(gen, width);
    DDPOptions options{.gradient_sync = sync};
    options.reducer.bucket_cap_bytes = options.reducer.first_bucket_bytes =
        static_cast<std::int64_t>(cap_mb * kMiB);
    DistributedDataParallel ddp(model, *group, options);
    runs.push_back(one_step(ddp, *group, gen));
    if (speaker && sync == GradientSync::Bucketed) {
      std::printf("%s", ddp.reducer().describe_buckets().c_str());
    }
  }
  if (speaker) {
    // One time scale for both: the longer step fills the width.
    std::int64_t longest = 0;
    for (const Recorded& r : runs) longest = std::max(longest, r.end_ns - r.begin_ns);
    const char* titles[] = {"chapter 06, flat: backward, then the all-reduce",
                            "chapter 07, bucketed: all-reduces during backward"};
    for (std::size_t k = 0; k < runs.size(); ++k) {
      const Recorded& r = runs[k];
      const trace::Summary s = trace::summarize(r.events, r.begin_ns, r.end_ns);
      std::printf("\n%s: step %.1f ms, communication %.1f ms, exposed %.1f ms\n", titles[k],
                  (r.end_ns - r.begin_ns) / 1e6, s.communication_ms, s.exposed_ms);
      const std::string timeline =
          trace::render_text(r.events, r.begin_ns, r.begin_ns + longest, {Reducer::launches_row()});
      std::printf("%s", timeline.c_str());
    }
    std::printf("\nok: %d ranks, width %d\n", group->size(), width);
  }
  group->barrier()->wait();
  return 0;
}
