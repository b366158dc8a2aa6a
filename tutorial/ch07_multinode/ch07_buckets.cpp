// ch07_buckets: the Reducer at work, one event per line. Chapter 07.
//
//   build/release/bin/ddprun --nproc-per-node 2 build/release/bin/ch07_buckets
//   mpirun -np 2 --oversubscribe build/release/bin/ch07_buckets --backend mpi
//
// Rank 0 prints the bucket table of the ResNet with 100 kB buckets, then, during one
// backward, each gradient as it becomes ready and each bucket's all-reduce as it is
// launched (a communication hook that wraps the default one and prints), and what is
// still to do when backward returns: nothing. The second step shows the buckets rebuilt
// in the order the gradients really came.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "autograd/functions.hpp"
#include "dist/init.hpp"
#include "dist/parallel/distributed_data_parallel.hpp"
#include "nn/resnet_mnist.hpp"
#include "nn/sgd.hpp"
#include "tensor/random.hpp"

using namespace ddp;

int main(int argc, char** argv) {
  InitOptions init;
  init.backend = argc > 2 && std::string(argv[1]) == "--backend" ? argv[2] : "tcp";
  auto group = init_process_group(init);
  const bool speaker = group->rank() == 0;  // rank 0 speaks for all

  Generator gen(0);
  auto model = std::make_shared<nn::ResNetMnist>(gen);
  // Print each gradient as backward produces it: our own grad-ready hooks, registered
  // before DDP's, so they run first (a parameter may have several hooks; they run in
  // registration order).
  int ready = 0;
  bool printing = true;  // step 1 only
  for (const auto& [name, p] : model->named_parameters()) {
    p.register_grad_ready_hook([&, name = name](const Variable&) {
      ++ready;
      if (speaker && printing) std::printf("  ready: %s\n", name.c_str());
    });
  }
  DDPOptions options;
  options.reducer.bucket_cap_bytes = 100'000;  // small, to get a few buckets of 311 kB
  options.reducer.first_bucket_bytes = 100'000;
  DistributedDataParallel ddp(model, *group, options);
  if (speaker) {
    std::printf("buckets (reverse registration order):\n%s",
                ddp.reducer().describe_buckets().c_str());
  }

  // And each bucket's launch: the default hook, wrapped.
  CommHook print_launch = allreduce_hook();
  print_launch.name = "all-reduce, printed";
  int bucket = 0;
  print_launch.launch = [&, plain = allreduce_hook()](ProcessGroup& g, Tensor& flat) {
    if (speaker && printing) {
      std::printf("  launch: bucket %d, %lld floats, after %d gradients were ready\n", bucket,
                  static_cast<long long>(flat.numel()), ready);
    }
    ++bucket;
    return plain.launch(g, flat);
  };
  ddp.reducer().set_comm_hook(print_launch);

  nn::SGD sgd(model->parameters(), nn::SGDOptions{.lr = 0.1});
  const std::vector<std::int64_t> labels{1, 2, 3, 4};
  const Tensor y = from_data(std::span<const std::int64_t>(labels), {4});
  for (int step = 1; step <= 2; ++step) {
    ready = 0;
    bucket = 0;
    if (speaker) std::printf("step %d: backward\n", step);
    sgd.zero_grad();
    cross_entropy(ddp(Variable(randn({4, 1, 28, 28}, gen))), y).backward();
    if (speaker) {
      std::printf("  backward returned: all %d buckets averaged (finished: %s)\n", bucket,
                  ddp.reducer().finished() ? "yes" : "no");
    }
    sgd.step();
    printing = false;
  }
  if (speaker) {
    std::printf("rebuilt at step 2's forward, in the order step 1's gradients came:\n%s",
                ddp.reducer().describe_buckets().c_str());
    std::printf("ok: %d ranks, %zu buckets\n", group->size(),
                ddp.reducer().bucket_assignment().size());
  }
  return 0;
}
