// Chapter 06, ddp-train's --backend auto on made-up GPU nodes: each rank's view of the GPUs
// (their UUIDs, in CUDA order) goes through the trainer's own device rule (training_gpu,
// dist/launch_env.hpp) to the GPU it would train on, and choose_backend
// (dist/backend_choice.hpp) picks nccl only when no two ranks hold one GPU. No GPU needed.
// The layouts: every rank sees the node's GPUs (--gpus-per-node), every rank sees its own
// as cuda:0 (--gpus-per-task=1, --gpu-bind), more ranks than GPUs, a build without NCCL,
// ranks on the CPU.
#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "dist/backend_choice.hpp"
#include "dist/launch_env.hpp"
#include "tensor/device.hpp"

using ddp::BackendChoice;
using ddp::RankGpu;

namespace {

// GPU `index` of node `node`: "GPU-000n000i-0000-0000-0000-000000000000".
std::string uuid(int node, int index) {
  char text[64];
  std::snprintf(text, sizeof text, "GPU-%04x%04x-0000-0000-0000-000000000000", node, index);
  return text;
}

// What one rank sees: its host, its local rank, the UUIDs of the GPUs CUDA shows it.
struct View {
  std::string host;
  int local_rank = 0;
  std::vector<std::string> visible;
};

// The facts each rank would post: the GPU the trainer's rule gives it, by UUID.
std::vector<RankGpu> facts(const std::vector<View>& views) {
  std::vector<RankGpu> ranks;
  for (const View& v : views) {
    const int n = static_cast<int>(v.visible.size());
    const int gpu = ddp::training_gpu(v.local_rank, n);
    ranks.push_back({v.host, gpu >= 0 ? v.visible[gpu] : std::string(), n});
  }
  return ranks;
}

// `nodes` x `per_node` ranks, every rank sees all `gpus` of its node (--gpus-per-node).
std::vector<View> node_view(int nodes, int per_node, int gpus) {
  std::vector<View> views;
  for (int n = 0; n < nodes; ++n) {
    std::vector<std::string> all;
    for (int g = 0; g < gpus; ++g) all.push_back(uuid(n + 1, g));
    for (int l = 0; l < per_node; ++l) views.push_back({"node" + std::to_string(n + 1), l, all});
  }
  return views;
}

// `nodes` x `per_node` ranks, each sees only its own GPU, as cuda:0 (--gpus-per-task=1).
std::vector<View> per_task(int nodes, int per_node) {
  std::vector<View> views;
  for (int n = 0; n < nodes; ++n) {
    for (int l = 0; l < per_node; ++l) {
      views.push_back({"node" + std::to_string(n + 1), l, {uuid(n + 1, l)}});
    }
  }
  return views;
}

}  // namespace

TEST_CASE("auto: every rank sees the node's GPUs and takes cuda:<local rank> -> nccl",
          "[ch06][backend]") {
  const BackendChoice c = ddp::choose_backend(facts(node_view(2, 4, 4)), true);
  CHECK(c.backend == "nccl");
  CHECK(c.reason == "every rank has a GPU of its own");
}

TEST_CASE("auto: --gpus-per-task=1, every rank's GPU is its cuda:0, yet each is another -> nccl",
          "[ch06][backend]") {
  const std::vector<View> views = per_task(2, 4);
  for (const View& v : views) CHECK(ddp::training_gpu(v.local_rank, 1) == 0);
  // The old rule, "device_count() >= local_world_size" (1 >= 4), chose tcp here.
  const BackendChoice c = ddp::choose_backend(facts(views), true);
  CHECK(c.backend == "nccl");
  CHECK(c.reason == "every rank has a GPU of its own");
}

TEST_CASE("auto: more ranks on a node than GPUs -> tcp, naming the two ranks and the GPU",
          "[ch06][backend]") {
  // 4 ranks, 2 GPUs: ranks 0 and 2 share GPU 0, ranks 1 and 3 GPU 1.
  const BackendChoice c = ddp::choose_backend(facts(node_view(1, 4, 2)), true);
  CHECK(c.backend == "tcp");
  CHECK(c.reason == "ranks 0 and 2 on node1 share GPU-00010000 (4 ranks, 2 GPUs in view); "
                    "nccl wants a GPU per rank");
  // The second node of a job can be the one that is short.
  std::vector<View> views = node_view(2, 2, 2);
  for (View& v : views) {
    if (v.host == "node2") v.visible.resize(1);
  }
  const BackendChoice second = ddp::choose_backend(facts(views), true);
  CHECK(second.backend == "tcp");
  CHECK(second.reason == "ranks 2 and 3 on node2 share GPU-00020000 (2 ranks, 1 GPU in view); "
                         "nccl wants a GPU per rank");
}

TEST_CASE("auto: two ranks bound to one GPU (each seeing one) -> tcp", "[ch06][backend]") {
  std::vector<View> views = per_task(1, 2);
  views[1].visible = views[0].visible;  // a --gpu-bind that hands out GPU 0 twice
  const BackendChoice c = ddp::choose_backend(facts(views), true);
  CHECK(c.backend == "tcp");
  CHECK(c.reason == "ranks 0 and 1 on node1 share GPU-00010000 (2 ranks, 1 GPU in view); "
                    "nccl wants a GPU per rank");
}

TEST_CASE("auto: every rank on the same --device cuda:1 of a shared view -> tcp",
          "[ch06][backend]") {
  std::vector<RankGpu> ranks = facts(node_view(1, 2, 4));
  for (RankGpu& r : ranks) r.gpu_uuid = uuid(1, 1);
  const BackendChoice c = ddp::choose_backend(ranks, true);
  CHECK(c.backend == "tcp");
  // Enough GPUs in view: no "(2 ranks, 4 GPUs in view)", the ranks chose to share.
  CHECK(c.reason == "ranks 0 and 1 on node1 share GPU-00010001; nccl wants a GPU per rank");
}

TEST_CASE("auto: a GPU each, but a build without NCCL -> tcp, and how to get NCCL",
          "[ch06][backend]") {
  for (const std::vector<View>& views : {node_view(2, 4, 4), per_task(2, 4)}) {
    const BackendChoice c = ddp::choose_backend(facts(views), /*nccl_built=*/false);
    CHECK(c.backend == "tcp");
    CHECK_THAT(c.reason, Catch::StartsWith("every rank has a GPU of its own, but this build "
                                           "has no NCCL") &&
                             Catch::Contains("NCCL_HOME") && Catch::Contains("reconfigure"));
  }
  // Ranks that share a GPU would not get nccl anyway: that is the reason given.
  const BackendChoice shared = ddp::choose_backend(facts(node_view(1, 4, 2)), false);
  CHECK_THAT(shared.reason, Catch::Contains("share GPU-00010000"));
}

TEST_CASE("auto: ranks on the CPU -> tcp", "[ch06][backend]") {
  const BackendChoice all = ddp::choose_backend(facts(node_view(2, 2, 0)), true);
  CHECK(all.backend == "tcp");
  CHECK(all.reason == "the ranks train on the CPU");
  std::vector<RankGpu> ranks = facts(node_view(1, 4, 4));
  ranks[1].gpu_uuid.clear();
  ranks[3].gpu_uuid.clear();
  const BackendChoice some = ddp::choose_backend(ranks, true);
  CHECK(some.backend == "tcp");
  CHECK(some.reason == "ranks 1 and 3 train on the CPU");
}

TEST_CASE("auto: the facts travel through the store as one line each", "[ch06][backend]") {
  for (const RankGpu& r : {RankGpu{"node7", uuid(7, 3), 4}, RankGpu{"node7", "", 0}}) {
    const RankGpu back = ddp::decode_rank_gpu(ddp::encode(r));
    CHECK(back.host == r.host);
    CHECK(back.gpu_uuid == r.gpu_uuid);
    CHECK(back.visible_gpus == r.visible_gpus);
  }
  CHECK_THROWS_AS(ddp::decode_rank_gpu("node7\tGPU-1"), ddp::Error);
  CHECK_THROWS_AS(ddp::decode_rank_gpu("node7\tGPU-1\tmany"), ddp::Error);
}

TEST_CASE("a GPU's UUID is written as nvidia-smi writes it", "[ch06][backend]") {
  std::array<unsigned char, 16> bytes{};
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 17);
  CHECK(ddp::gpu_uuid_text(bytes) == "GPU-00112233-4455-6677-8899-aabbccddeeff");
}
