// ddp-doctor's checks (tools/ddp_doctor/checks.hpp) on made-up jobs: a good one passes,
// and each kind of broken setup is named, with its hint. Chapter 00.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "base/error.hpp"
#include "dist/launch_env.hpp"
#include "tools/ddp_doctor/checks.hpp"

using ddp::doctor::RankReport;

namespace {

// `nodes` x `per_node` ranks placed in blocks, as srun does; GPUs when `gpus`.
std::vector<RankReport> job(int nodes, int per_node, bool gpus) {
  std::vector<RankReport> reports;
  for (int n = 0; n < nodes; ++n) {
    for (int l = 0; l < per_node; ++l) {
      RankReport r;
      r.rank = n * per_node + l;
      r.world_size = nodes * per_node;
      r.local_rank = l;
      r.local_world_size = per_node;
      r.host = "node" + std::to_string(n + 1);
      r.launcher = "slurm";
      r.device = gpus ? "cuda:" + std::to_string(l) : "cpu";
      r.gpu = gpus ? std::to_string(l) : "";
      r.gpu_uuid = gpus ? "GPU-000" + std::to_string(n + 1) + "000" + std::to_string(l) +
                              "-0000-0000-0000-000000000000"
                        : "";
      r.visible_gpus = gpus ? per_node : 0;
      reports.push_back(r);
    }
  }
  return reports;
}

bool mentions(const std::vector<std::string>& problems, const std::string& text) {
  for (const std::string& p : problems) {
    if (p.find(text) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("ddp-doctor finds nothing wrong with a good 2x2 job, CPU or GPU") {
  CHECK(ddp::doctor::find_problems(job(2, 2, false)).empty());
  CHECK(ddp::doctor::find_problems(job(2, 2, true)).empty());
}

TEST_CASE("ddp-doctor names a rank that disagrees on the world size") {
  auto reports = job(2, 2, false);
  reports[3].world_size = 8;
  const auto problems = ddp::doctor::find_problems(reports);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("rank 3 on node2 has world size 8, rank 0 on node1 has 4") !=
        std::string::npos);
  CHECK(problems[0].find("hint:") != std::string::npos);
}

TEST_CASE("ddp-doctor names two ranks on one host that would share a GPU") {
  auto reports = job(2, 2, true);
  reports[3].gpu = reports[2].gpu;  // rank 3 on node2 lands on rank 2's GPU (0)
  reports[3].gpu_uuid = reports[2].gpu_uuid;
  const auto problems = ddp::doctor::find_problems(reports);
  REQUIRE(problems.size() == 1);
  CHECK(mentions(problems, "ranks 2 and 3 on node2 would share GPU 0 (GPU-00020000-"));
  // Without UUIDs (an older report), the physical index decides.
  for (RankReport& r : reports) r.gpu_uuid.clear();
  CHECK(mentions(ddp::doctor::find_problems(reports), "ranks 2 and 3 on node2 would share GPU 0"));
  // The same GPU number on two different hosts is two different GPUs: fine.
  CHECK(ddp::doctor::find_problems(job(2, 1, true)).empty());
}

TEST_CASE("ddp-doctor: --gpus-per-task=1 gives every rank 'GPU 0', yet each its own") {
  auto reports = job(2, 4, true);
  for (RankReport& r : reports) {  // each task sees one GPU, as cuda:0, listed as "0"
    r.device = "cuda:0";
    r.gpu = "0";
    r.visible_gpus = 1;
  }
  CHECK(ddp::doctor::find_problems(reports).empty());
  const ddp::BackendChoice pick = ddp::doctor::auto_backend(reports, true);
  CHECK(pick.backend == "nccl");
  CHECK(pick.reason == "every rank has a GPU of its own");
  // Two tasks bound to one GPU are caught by the UUID.
  reports[1].gpu_uuid = reports[0].gpu_uuid;
  CHECK(mentions(ddp::doctor::find_problems(reports), "ranks 0 and 1 on node1 would share GPU 0"));
  CHECK(ddp::doctor::auto_backend(reports, true).backend == "tcp");
}

TEST_CASE("ddp-doctor shows each rank's GPU UUID and what --backend auto would pick") {
  const auto reports = job(1, 2, true);
  const std::string table = ddp::doctor::format_table(reports);
  CHECK(table.find("gpu uuid") != std::string::npos);
  CHECK(table.find("GPU-00010001-0000-0000-0000-000000000000") != std::string::npos);
  CHECK(ddp::doctor::auto_backend(reports, true).backend == "nccl");
  const ddp::BackendChoice no_nccl = ddp::doctor::auto_backend(reports, false);
  CHECK(no_nccl.backend == "tcp");
  CHECK(no_nccl.reason.find("no NCCL") != std::string::npos);
  CHECK(ddp::doctor::auto_backend(job(1, 2, false), true).reason == "the ranks train on the CPU");
}

TEST_CASE("ddp-doctor spots duplicated local ranks, the srun + ddprun mistake") {
  auto reports = job(1, 4, false);
  reports[2].local_rank = 0;  // a second launcher on the node started its own local rank 0
  const auto problems = ddp::doctor::find_problems(reports);
  REQUIRE(problems.size() == 1);
  CHECK(mentions(problems, "ranks 0 and 2 both have local rank 0 on node1"));
  CHECK(mentions(problems, "--ntasks-per-node=1"));
}

TEST_CASE("ddp-doctor names a rank set up by another launcher") {
  auto reports = job(1, 2, false);
  reports[1].launcher = "torchrun";
  CHECK(mentions(ddp::doctor::find_problems(reports), "rank 1 on node1 was set up by torchrun"));
}

TEST_CASE("ddp-doctor reports survive encode and decode, and a bad one throws") {
  RankReport r = job(2, 2, true)[3];
  r.connect_ms = 17;
  const RankReport back = ddp::doctor::decode(ddp::doctor::encode(r));
  CHECK(back.rank == 3);
  CHECK(back.world_size == 4);
  CHECK(back.local_rank == 1);
  CHECK(back.host == "node2");
  CHECK(back.device == "cuda:1");
  CHECK(back.gpu == "1");
  CHECK(back.connect_ms == 17);
  CHECK(back.gpu_uuid == "GPU-00020001-0000-0000-0000-000000000000");
  CHECK(back.visible_gpus == 2);
  RankReport cpu = job(1, 1, false)[0];
  CHECK(ddp::doctor::decode(ddp::doctor::encode(cpu)).gpu.empty());
  CHECK_THROWS_AS(ddp::doctor::decode("1\t2\tthree"), ddp::Error);
}

TEST_CASE("ddp-doctor maps a local GPU index to the physical GPU") {
  CHECK(ddp::doctor::physical_gpu(1, "", "") == "1");
  CHECK(ddp::doctor::physical_gpu(1, "", "4,5") == "5");
  CHECK(ddp::doctor::physical_gpu(0, "6", "0") == "6");  // Slurm's numbering wins
}

TEST_CASE("ddp-doctor places a rank where ddp-train trains it: one rule, training_gpu") {
  // The rule on its own: cuda:<local rank>; cuda:0 for a rank that sees one GPU; with more
  // ranks than GPUs, local rank modulo the GPUs; the CPU when there are none.
  CHECK(ddp::training_gpu(0, 0) == -1);
  for (int local = 0; local < 4; ++local) {
    CHECK(ddp::training_gpu(local, 4) == local);
    CHECK(ddp::training_gpu(local, 1) == 0);
  }
  CHECK(ddp::training_gpu(2, 2) == 0);
  CHECK(ddp::training_gpu(3, 2) == 1);
  // The doctor's report says the same, for every local rank and GPU count.
  for (int gpus = 0; gpus <= 4; ++gpus) {
    std::vector<std::string> uuids;
    for (int g = 0; g < gpus; ++g) uuids.push_back("GPU-" + std::to_string(g));
    for (int local = 0; local < 6; ++local) {
      RankReport r;
      r.local_rank = local;
      ddp::doctor::place_rank(r, uuids, "", "");
      const int gpu = ddp::training_gpu(local, gpus);
      CHECK(r.device == (gpu < 0 ? "cpu" : "cuda:" + std::to_string(gpu)));
      CHECK(r.gpu_uuid == (gpu < 0 ? "" : uuids[gpu]));
      CHECK(r.visible_gpus == gpus);
    }
  }
}

TEST_CASE("ddp-doctor: 3 ranks on a node with 2 GPUs share them as ddp-train does, and say so") {
  auto reports = job(1, 3, false);
  const std::vector<std::string> uuids = {"GPU-00010000-0000-0000-0000-000000000000",
                                          "GPU-00010001-0000-0000-0000-000000000000"};
  for (RankReport& r : reports) ddp::doctor::place_rank(r, uuids, "4,5", "");
  const std::string out = ddp::doctor::format_findings(reports, ddp::doctor::find_problems(reports),
                                                       /*nccl_built=*/true);
  // Rank 2 trains on cuda:0 with rank 0 (it threw "sees only 2 GPU(s)" before); the table,
  // the backend auto would pick, and the problem.
  CHECK(out ==
        " rank  local  host             launcher  device   gpu  connect    gpu uuid\n"
        "    0  0/3    node1            slurm     cuda:0   4    0 ms       "
        "GPU-00010000-0000-0000-0000-000000000000\n"
        "    1  1/3    node1            slurm     cuda:1   5    0 ms       "
        "GPU-00010001-0000-0000-0000-000000000000\n"
        "    2  2/3    node1            slurm     cuda:0   4    0 ms       "
        "GPU-00010000-0000-0000-0000-000000000000\n"
        "ddp-doctor: --backend auto would pick tcp: ranks 0 and 2 on node1 share "
        "GPU-00010000 (3 ranks, 2 GPUs in view); nccl wants a GPU per rank\n"
        "ddp-doctor: PROBLEM: ranks 0 and 2 on node1 would share GPU 4 "
        "(GPU-00010000-0000-0000-0000-000000000000)\n"
        "hint: one task per GPU: --gpus-per-task=1, or --gpus-per-node equal to "
        "--ntasks-per-node with each rank on cuda:<local rank>\n");
}
