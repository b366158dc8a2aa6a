// ddp-doctor's checks (tools/ddp_doctor/checks.hpp) on made-up jobs: a good one passes,
// and each kind of broken setup is named, with its hint. Chapter 00.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "base/error.hpp"
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
  const auto problems = ddp::doctor::find_problems(reports);
  REQUIRE(problems.size() == 1);
  CHECK(mentions(problems, "ranks 2 and 3 on node2 would share GPU 0"));
  // The same GPU number on two different hosts is two different GPUs: fine.
  CHECK(ddp::doctor::find_problems(job(2, 1, true)).empty());
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
  RankReport cpu = job(1, 1, false)[0];
  CHECK(ddp::doctor::decode(ddp::doctor::encode(cpu)).gpu.empty());
  CHECK_THROWS_AS(ddp::doctor::decode("1\t2\tthree"), ddp::Error);
}

TEST_CASE("ddp-doctor maps a local GPU index to the physical GPU") {
  CHECK(ddp::doctor::physical_gpu(1, "", "") == "1");
  CHECK(ddp::doctor::physical_gpu(1, "", "4,5") == "5");
  CHECK(ddp::doctor::physical_gpu(0, "6", "0") == "6");  // Slurm's numbering wins
}
