// Chapter 05's program: processes that find each other and all-reduce a tensor.
//
//   build/release/bin/ddprun --nproc-per-node 4 build/release/bin/ch05_rendezvous
//   mpirun -np 4 --oversubscribe build/release/bin/ch05_rendezvous --backend mpi
//   ddprun --nproc-per-node <GPUs> ch05_rendezvous --backend nccl   # tensors on cuda
//
// Every rank says who it is and which launcher told it (dist/launch_env.hpp); the ranks
// meet (dist/init.hpp), rank 0 prints the ring schedule of an all-reduce over this many
// ranks (dist/process_group_tcp.hpp), then all of them all-reduce a tensor whose answer
// is known in closed form, and time a 4 MiB all-reduce in nccl-tests' units. No model,
// no autograd: that is chapter 06.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>

#include "dist/bandwidth.hpp"
#include "dist/init.hpp"
#include "dist/launch_env.hpp"
#include "dist/process_group_tcp.hpp"
#include "tensor/cuda/device_info.hpp"
#include "base/error.hpp"
#include "tensor/tensor.hpp"

namespace {

// The ring schedule for `size` ranks, as the table in the chapter page: at each step,
// which chunk every rank sends to its right neighbour ("r" = reduce into the receiver's
// copy, "c" = copy over it).
void print_ring_schedule(int size) {
  std::printf("ring all-reduce over %d ranks: chunk sent by each rank at each step\n", size);
  std::printf("  step |");
  for (int r = 0; r < size; ++r) std::printf(" rank %d |", r);
  std::printf("\n");
  for (int step = 0; step < 2 * (size - 1); ++step) {
    std::printf("  %4d |", step);
    for (int r = 0; r < size; ++r) {
      const ddp::RingStep s = ddp::ring_all_reduce_step(r, size, step);
      std::printf("   %d %s  |", s.send_chunk, s.reduce ? "r" : "c");
    }
    std::printf("%s\n", step == size - 2 ? "   <- reduce-scatter done" : "");
  }
}

// Where this rank's tensors live, for --device `name` (cpu, cuda or cuda:N; checked by
// Device::parse). cuda means cuda:<local rank>, or cuda:0 for a rank that sees one GPU:
// the GPU init_process_group gives the nccl backend. A rank without a usable GPU fails
// here, before it meets the others; `flags` names what asked for one.
ddp::Device pick_device(const std::string& name, const std::string& flags,
                        const ddp::LaunchEnv& env) {
  ddp::Device device = ddp::Device::parse(name);
  if (!device.is_cuda()) return device;
  const int gpus = ddp::cuda::device_count();
  DDP_CHECK(gpus > 0, flags, ": rank ", env.rank, " on ", ddp::host_name(),
            " has no usable CUDA GPU",
            ddp::cuda::is_built() ? " (no device, no driver, or CUDA_VISIBLE_DEVICES hides them)"
                                  : " (this build has no CUDA: configure with -DDDP_CUDA=ON)",
            "\nhint: run it on GPU nodes (sbatch --gpus-per-node=<ranks per node>), or with "
            "--backend tcp or mpi on the CPU");
  if (name == "cuda") {
    device.index = ddp::gpu_for_local_rank(env.local_rank, gpus);
    DDP_CHECK(device.index >= 0, flags, ": local rank ", env.local_rank, " on ",
              ddp::host_name(), " has no GPU of its own (", gpus, " usable)",
              "\nhint: one rank per GPU (--ntasks-per-node = --gpus-per-node)");
  }
  DDP_CHECK(device.index < gpus, flags, ": ", ddp::host_name(), " has ", gpus, " usable GPU(s)");
  return device;
}

int run(int argc, char** argv) {
  std::string backend = "tcp";
  std::string device_name;  // default: cuda for nccl, which reduces GPU memory only; else cpu
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--backend" && i + 1 < argc) {
      backend = argv[++i];
    } else if (arg == "--device" && i + 1 < argc) {
      device_name = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--backend tcp|mpi|nccl] [--device cpu|cuda|cuda:N]\n",
                   argv[0]);
      return 2;
    }
  }
  if (device_name.empty()) device_name = backend == "nccl" ? "cuda" : "cpu";
  if (device_name != "cpu" && !device_name.starts_with("cuda")) {
    std::fprintf(stderr, "ch05_rendezvous: --device expects cpu, cuda or cuda:N, got '%s'\n",
                 device_name.c_str());
    return 2;
  }
  if (backend == "nccl" && device_name == "cpu") {
    std::fprintf(stderr, "ch05_rendezvous: --backend nccl reduces GPU tensors: use --device "
                         "cuda (or cuda:N), not cpu\n");
    return 2;
  }

  // 1. Who am I? Read from whichever launcher started us.
  const ddp::LaunchEnv env = ddp::discover_launch_env();
  std::printf("%s\n", env.describe().c_str());
  std::fflush(stdout);
  const std::string flags = "--backend " + backend + " --device " + device_name;
  const ddp::TensorOptions on{.device = pick_device(device_name, flags, env)};

  // 2. Meet the others: rank 0 serves a TCPStore at MASTER_ADDR:MASTER_PORT, everyone
  //    connects, and the backend wires itself up through it.
  ddp::InitOptions options;
  options.backend = backend;
  options.timeout = std::chrono::seconds(60);
  auto group = ddp::init_process_group(options);
  const int rank = group->rank();
  const int world = group->size();

  if (rank == 0) print_ring_schedule(world);

  // 3. A collective whose answer we know: every rank contributes rank + 1, so each
  //    element of the sum is 1 + 2 + ... + world = world (world + 1) / 2.
  ddp::Tensor t = ddp::full({10}, rank + 1.0, on);
  group->all_reduce(t, ddp::ReduceOp::Sum)->wait();
  const float expected = world * (world + 1) / 2.0f;
  for (float v : t.to_vector<float>()) {
    DDP_CHECK(v == expected, "rank ", rank, ": all_reduce gave ", v, ", expected ", expected);
  }
  if (rank == 0) std::printf("all_reduce(sum) of rank+1 over %d ranks = %g, as expected\n",
                             world, static_cast<double>(expected));

  // 4. How fast? 4 MiB of float32, a few times; algbw and busbw as nccl-tests defines
  //    them (dist/bandwidth.hpp).
  ddp::Tensor big = ddp::ones({1 << 20}, on);
  group->all_reduce(big)->wait();  // warm-up
  group->barrier()->wait();
  constexpr int kIters = 10;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kIters; ++i) group->all_reduce(big)->wait();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kIters;
  if (rank == 0) {
    const std::int64_t bytes = big.numel() * 4;
    std::printf("all_reduce of 4 MiB (%s, %s): %.0f us, algbw %.2f GB/s, busbw %.2f GB/s\n",
                group->backend_name().c_str(), on.device.str().c_str(), seconds * 1e6,
                ddp::algbw(bytes, seconds) / 1e9,
                ddp::all_reduce_busbw(bytes, seconds, world) / 1e9);
  }

  // 5. Leave together: nobody tears down its sockets while a peer still talks to it.
  group->barrier()->wait();
  if (rank == 0) std::printf("ok: %d ranks met, reduced and left together\n", world);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    // The group's destructor has closed our sockets, so peers waiting on us fail fast
    // instead of hanging until their timeout.
    std::fprintf(stderr, "ch05_rendezvous: %s\n", e.what());
    return 1;
  }
}
