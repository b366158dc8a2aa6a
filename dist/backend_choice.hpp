// Which backend `--backend auto` picks, and why: nccl when every rank has a GPU of its
// own, tcp otherwise. Chapter 05 (init_process_group's "auto"; ddp-train's default in
// chapter 06, ddp-doctor shows the pick). A pure function over what each rank says about
// itself, so that tests feed it made-up clusters; init_process_group (dist/init.cpp)
// gathers those facts through the store. A backend the user names is never second-guessed
// here: this only runs for "auto".
#pragma once

#include <string>
#include <vector>

namespace ddp {

// What one rank says about the GPU it would train on. The UUID, not the index: under
// `srun --gpus-per-task=1` every rank sees its own GPU as cuda:0, and two ranks with a
// full view of the node may both pick cuda:1.
struct RankGpu {
  std::string host;
  std::string gpu_uuid;  // "GPU-5d2c3e4f-...", cuda::device_uuid; "" when on the CPU
  int visible_gpus = 0;  // how many GPUs the rank sees (1 under --gpus-per-task=1)
};

struct BackendChoice {
  std::string backend;  // "nccl" or "tcp"
  std::string reason;   // one line: "every rank has a GPU of its own"
};

// ranks: one per rank, in rank order. nccl_built: this build has the nccl group.
//   a rank on the CPU             -> tcp ("the ranks train on the CPU")
//   two ranks on one GPU          -> tcp (NCCL refuses two ranks on one GPU; the tcp group
//                                    stages their CUDA tensors through host memory)
//   a GPU each, no NCCL built     -> tcp, and the reason says how to get NCCL
//   a GPU each                    -> nccl
BackendChoice choose_backend(const std::vector<RankGpu>& ranks, bool nccl_built);

// This build has the nccl group (cmake found NCCL >= 2.14: "Found NCCL" when configuring).
bool nccl_built();

// One line for the store, and back; decode throws ddp::Error on a malformed line.
std::string encode(const RankGpu& rank);
RankGpu decode_rank_gpu(const std::string& line);

}  // namespace ddp
