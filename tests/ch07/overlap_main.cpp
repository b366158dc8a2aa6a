// ch07_overlap: the test that cannot pass without overlap. Chapter 07.
//
//   DDP_TCP_LINK=100mbit,100us ddprun --nproc-per-node 2 build/<dir>/tests/ch07_overlap
//
// Two ranks train the ResNet at width 2 (1.2 MB of gradients... 308,074 floats) for three
// steps with small buckets, over an emulated slow link (the tcp backend's DDP_TCP_LINK:
// each all-reduce takes longer than the backward layers after it), recording a trace
// (base/trace.hpp). In the last step's backward, rank 0's trace must show, as an
// ORDERING of recorded events and not as a timing:
//   1. bucket 0's all-reduce launched before backward's last module finished, and
//   2. that all-reduce in flight (its span on the communication thread) while a later
//      module's backward ran: a module backward span that begins inside it.
// --plant serial launches each bucket and waits for it at once (no overlap): check 2 must
// fail, which shows the test can tell.
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "autograd/functions.hpp"
#include "dist/init.hpp"
#include "dist/parallel/distributed_data_parallel.hpp"
#include "nn/resnet_mnist.hpp"
#include "nn/sgd.hpp"
#include "base/error.hpp"
#include "tensor/random.hpp"
#include "tensor/threads.hpp"
#include "base/trace.hpp"

using namespace ddp;

int main(int argc, char** argv) {
  int rank = -1;
  try {
    const bool plant_serial =
        argc > 2 && std::strcmp(argv[1], "--plant") == 0 && std::strcmp(argv[2], "serial") == 0;
    set_num_threads(1);
    auto group = init_process_group(InitOptions{});
    rank = group->rank();
    Generator gen(0);
    auto model = std::make_shared<nn::ResNetMnist>(gen, /*width=*/2);
    nn::trace_modules(*model, "model");
    DDPOptions options;
    options.reducer.bucket_cap_bytes = options.reducer.first_bucket_bytes = 200'000;
    DistributedDataParallel ddp(model, *group, options);
    if (plant_serial) {  // the bug: every all-reduce waited for inside the hook
      CommHook serial = allreduce_hook();
      serial.launch = [](ProcessGroup& g, Tensor& flat) {
        auto work = g.all_reduce(flat, ReduceOp::Sum);
        work->wait();
        return work;
      };
      ddp.reducer().set_comm_hook(serial);
    }
    nn::SGD sgd(model->parameters(), nn::SGDOptions{.lr = 0.01});
    const std::vector<std::int64_t> labels(16, 3);
    const Tensor y = from_data(std::span<const std::int64_t>(labels), {16});

    trace::start(rank);
    std::int64_t backward_begin = 0, backward_end = 0;
    for (int step = 0; step < 3; ++step) {  // step 0 rebuilds the buckets; look at the last
      sgd.zero_grad();
      Variable loss = cross_entropy(ddp(Variable(randn({16, 1, 28, 28}, gen))), y);
      backward_begin = trace::now_ns();
      loss.backward();
      backward_end = trace::now_ns();
      sgd.step();
    }
    trace::stop();

    // Rank 0's last backward.
    std::int64_t launch = -1, last_module_end = -1;
    std::vector<trace::Event> modules, comms;
    for (const trace::Event& e : trace::events()) {
      if (e.ts_ns < backward_begin || e.ts_ns > backward_end) continue;
      if (e.category == "reducer" && e.name == "bucket 0: launch") launch = e.ts_ns;
      if (e.category == "backward" && e.phase == trace::Phase::Complete) {
        modules.push_back(e);
        last_module_end = std::max(last_module_end, e.ts_ns + e.dur_ns);
      }
      if (e.category == "comm" && e.phase == trace::Phase::Complete) comms.push_back(e);
    }
    DDP_CHECK(launch >= 0 && !comms.empty() && !modules.empty(),
              "the trace lacks bucket 0's launch, the all-reduces or the module spans");
    // Bucket 0's all-reduce: the first collective the communication thread ran after it.
    const trace::Event* first = nullptr;
    for (const trace::Event& c : comms) {
      if (c.ts_ns >= launch && (first == nullptr || c.ts_ns < first->ts_ns)) first = &c;
    }
    DDP_CHECK(first != nullptr, "no collective ran after bucket 0's launch");
    int during = 0;
    std::string example;
    for (const trace::Event& m : modules) {
      if (m.ts_ns > first->ts_ns && m.ts_ns < first->ts_ns + first->dur_ns) {
        if (during++ == 0) example = m.name;
      }
    }
    int failures = 0;
    if (rank == 0) {
      std::printf(
          "bucket 0 launched %.3f ms into backward; backward's last module ended at "
          "%.3f ms; its all-reduce ran %.3f-%.3f ms; %d module backward spans began "
          "inside it (e.g. %s)\n",
          (launch - backward_begin) / 1e6, (last_module_end - backward_begin) / 1e6,
          (first->ts_ns - backward_begin) / 1e6,
          (first->ts_ns + first->dur_ns - backward_begin) / 1e6, during, example.c_str());
      if (!(launch < last_module_end)) {
        std::printf("FAIL: bucket 0 was launched after backward's last module finished\n");
        ++failures;
      }
      if (during == 0) {
        std::printf("FAIL: no module's backward ran while bucket 0's all-reduce was in flight\n");
        ++failures;
      }
      if (failures == 0) std::printf("ok: the first bucket's all-reduce overlapped backward\n");
    }
    group->barrier()->wait();
    return failures == 0 ? 0 : 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ch07_overlap rank %d: error: %s\n", rank, e.what());
    return 1;
  }
}
