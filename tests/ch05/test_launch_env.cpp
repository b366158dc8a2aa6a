// Chapter 05, who am I: discover_launch_env under synthetic environments, one per launcher
// (torchrun, srun on 2 nodes x 2 tasks, mpirun, PMI, PMIx, PBS with a generated node file,
// nothing), the precedence when launchers nest, the master's port derived from the job id,
// and each bad input failing with a message that names the variable at fault.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "dist/launch_env.hpp"
#include "base/error.hpp"

using Catch::Contains;
using ddp::Environment;
using ddp::LaunchEnv;
using ddp::Launcher;

namespace {

// A node file in the system's temporary folder, removed at the end of the test.
class NodeFile {
 public:
  NodeFile(const std::string& tag, const std::string& contents)
      : path_(std::filesystem::temp_directory_path() /
              ("ddp_ch05_nodefile_" + tag + "_" + std::to_string(::getpid()))) {
    std::ofstream(path_) << contents;
  }
  ~NodeFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// What srun gives task `procid` of a 2-node x 2-task step of job 123456 on gpu07, gpu08.
Environment slurm_task(int procid) {
  return {{"SLURM_JOB_ID", "123456"},
          {"SLURM_STEP_ID", "0"},
          {"SLURM_PROCID", std::to_string(procid)},
          {"SLURM_NTASKS", "4"},
          {"SLURM_STEP_NUM_TASKS", "4"},
          {"SLURM_LOCALID", std::to_string(procid % 2)},
          {"SLURM_NODEID", std::to_string(procid / 2)},
          {"SLURM_NNODES", "2"},
          {"SLURM_TASKS_PER_NODE", "2(x2)"},
          {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
          {"SLURM_JOB_NODELIST", "gpu[07-08]"},
          {"SLURM_STEP_NODELIST", "gpu[07-08]"}};
}

// What an sbatch script itself sees (no srun yet): SLURM_PROCID=0 but no step.
Environment slurm_batch_script(int ntasks) {
  return {{"SLURM_JOB_ID", "777"},
          {"SLURM_PROCID", "0"},
          {"SLURM_LOCALID", "0"},
          {"SLURM_NODEID", "0"},
          {"SLURM_NTASKS", std::to_string(ntasks)},
          {"SLURM_JOB_NODELIST", "cn[1-2]"}};
}

Environment with(Environment env, const Environment& more) {
  for (const auto& [name, value] : more) env[name] = value;
  return env;
}

Environment without(Environment env, const std::vector<std::string>& names) {
  for (const std::string& name : names) env.erase(name);
  return env;
}

void check_ranks(const LaunchEnv& le, int rank, int world, int local_rank, int local_world,
                 int node) {
  CHECK(le.rank == rank);
  CHECK(le.world_size == world);
  CHECK(le.local_rank == local_rank);
  CHECK(le.local_world_size == local_world);
  CHECK(le.node_rank == node);
}

}  // namespace

// ---- One launcher at a time ------------------------------------------------------------------
TEST_CASE("launch env: nothing set is rank 0 of 1 on 127.0.0.1", "[ch05][launch_env]") {
  const LaunchEnv le = ddp::discover_launch_env(Environment{{"HOME", "/root"}});
  CHECK(le.launcher == Launcher::None);
  check_ranks(le, 0, 1, 0, 1, 0);
  CHECK(le.master_addr == "127.0.0.1");
  CHECK(le.master_port == 29500);
  CHECK(le.job_id.empty());
  CHECK(le.hosts.empty());
  CHECK(le.describe() == "rank 0/1 (local 0/1, node 0) via none, master 127.0.0.1:29500");
}

TEST_CASE("launch env: torchrun's six variables", "[ch05][launch_env]") {
  const LaunchEnv le = ddp::discover_launch_env({{"RANK", "3"},
                                                 {"WORLD_SIZE", "8"},
                                                 {"LOCAL_RANK", "1"},
                                                 {"LOCAL_WORLD_SIZE", "2"},
                                                 {"GROUP_RANK", "1"},
                                                 {"MASTER_ADDR", "10.0.0.1"},
                                                 {"MASTER_PORT", "29501"}});
  CHECK(le.launcher == Launcher::Torchrun);
  check_ranks(le, 3, 8, 1, 2, 1);
  CHECK(le.master_addr == "10.0.0.1");
  CHECK(le.master_port == 29501);
}

TEST_CASE("launch env: RANK and WORLD_SIZE by hand mean one machine", "[ch05][launch_env]") {
  const LaunchEnv le = ddp::discover_launch_env({{"RANK", "1"}, {"WORLD_SIZE", "2"}});
  CHECK(le.launcher == Launcher::Torchrun);
  check_ranks(le, 1, 2, 1, 2, 0);
  CHECK(le.master_addr == "127.0.0.1");
  CHECK(le.master_port == 29500);
  // Without GROUP_RANK the node is rank / local world size; NODE_RANK is read too.
  const LaunchEnv blocks = ddp::discover_launch_env({{"RANK", "5"},
                                                     {"WORLD_SIZE", "8"},
                                                     {"LOCAL_RANK", "1"},
                                                     {"LOCAL_WORLD_SIZE", "4"},
                                                     {"MASTER_ADDR", "h0"}});
  CHECK(blocks.node_rank == 1);
  const LaunchEnv node_rank = ddp::discover_launch_env({{"RANK", "5"},
                                                        {"WORLD_SIZE", "8"},
                                                        {"LOCAL_RANK", "1"},
                                                        {"LOCAL_WORLD_SIZE", "4"},
                                                        {"NODE_RANK", "3"},
                                                        {"MASTER_ADDR", "h0"}});
  CHECK(node_rank.node_rank == 3);
}

TEST_CASE("launch env: srun, 2 nodes x 2 tasks", "[ch05][launch_env]") {
  for (int procid = 0; procid < 4; ++procid) {
    INFO("SLURM_PROCID=" << procid);
    const LaunchEnv le = ddp::discover_launch_env(slurm_task(procid));
    CHECK(le.launcher == Launcher::Slurm);
    check_ranks(le, procid, 4, procid % 2, 2, procid / 2);
    CHECK(le.hosts == std::vector<std::string>{"gpu07", "gpu08"});
    CHECK(le.master_addr == "gpu07");
    CHECK(le.master_port == 20000 + 3456);  // 123456 mod 10000
    CHECK(le.job_id == "123456");
  }
  CHECK(ddp::discover_launch_env(slurm_task(3)).describe() ==
        "rank 3/4 (local 1/2, node 1) via slurm, master gpu07:23456, job 123456, 2 hosts");
}

TEST_CASE("launch env: srun with uneven nodes or only --ntasks-per-node", "[ch05][launch_env]") {
  // 3 tasks: two on gpu07, one on gpu08.
  const Environment uneven = with(slurm_task(2), {{"SLURM_NTASKS", "3"},
                                                  {"SLURM_STEP_NUM_TASKS", "3"},
                                                  {"SLURM_LOCALID", "0"},
                                                  {"SLURM_TASKS_PER_NODE", "2,1"},
                                                  {"SLURM_STEP_TASKS_PER_NODE", "2,1"}});
  check_ranks(ddp::discover_launch_env(uneven), 2, 3, 0, 1, 1);
  const Environment per_node =
      with(without(slurm_task(1), {"SLURM_TASKS_PER_NODE", "SLURM_STEP_TASKS_PER_NODE"}),
           {{"SLURM_NTASKS_PER_NODE", "2"}});
  check_ranks(ddp::discover_launch_env(per_node), 1, 4, 1, 2, 0);
  const Environment longer = with(slurm_task(5), {{"SLURM_NTASKS", "6"},
                                                  {"SLURM_STEP_NUM_TASKS", "6"},
                                                  {"SLURM_NODEID", "2"},
                                                  {"SLURM_LOCALID", "1"},
                                                  {"SLURM_STEP_TASKS_PER_NODE", "2(x3)"},
                                                  {"SLURM_STEP_NODELIST", "gpu[07-09]"}});
  const LaunchEnv le = ddp::discover_launch_env(longer);
  check_ranks(le, 5, 6, 1, 2, 2);
  CHECK(le.hosts.size() == 3);  // the step's list, not the job's
}

TEST_CASE("launch env: the sbatch script itself, with one task", "[ch05][launch_env]") {
  const LaunchEnv le =
      ddp::discover_launch_env(with(slurm_batch_script(1), {{"SLURM_JOB_NODELIST", "cn1"}}));
  CHECK(le.launcher == Launcher::Slurm);
  check_ranks(le, 0, 1, 0, 1, 0);
  CHECK(le.master_addr == "cn1");
  CHECK(le.master_port == 20777);
}

TEST_CASE("launch env: Open MPI's mpirun", "[ch05][launch_env]") {
  const LaunchEnv le = ddp::discover_launch_env(
      {{"OMPI_COMM_WORLD_RANK", "2"},
       {"OMPI_COMM_WORLD_SIZE", "4"},
       {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
       {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
       {"OMPI_COMM_WORLD_NODE_RANK", "7"}});  // not the node's index: ignored
  CHECK(le.launcher == Launcher::OpenMpi);
  check_ranks(le, 2, 4, 2, 4, 0);
  CHECK(le.master_addr == "127.0.0.1");
  const LaunchEnv two_nodes = ddp::discover_launch_env({{"OMPI_COMM_WORLD_RANK", "5"},
                                                        {"OMPI_COMM_WORLD_SIZE", "8"},
                                                        {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                                        {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                                                        {"MASTER_ADDR", "head"}});
  check_ranks(two_nodes, 5, 8, 1, 4, 1);
  CHECK(two_nodes.master_addr == "head");
}

TEST_CASE("launch env: PMI from MPICH's hydra and from Cray", "[ch05][launch_env]") {
  const LaunchEnv hydra = ddp::discover_launch_env({{"PMI_RANK", "3"},
                                                    {"PMI_SIZE", "4"},
                                                    {"MPI_LOCALRANKID", "1"},
                                                    {"MPI_LOCALNRANKS", "2"},
                                                    {"MASTER_ADDR", "n0"}});
  CHECK(hydra.launcher == Launcher::Pmi);
  check_ranks(hydra, 3, 4, 1, 2, 1);
  const LaunchEnv cray = ddp::discover_launch_env({{"PMI_RANK", "6"},
                                                   {"PMI_SIZE", "8"},
                                                   {"PMI_LOCAL_RANK", "2"},
                                                   {"PMI_LOCAL_SIZE", "4"},
                                                   {"MASTER_ADDR", "n0"}});
  check_ranks(cray, 6, 8, 2, 4, 1);
  const LaunchEnv bare = ddp::discover_launch_env({{"PMI_RANK", "1"}, {"PMI_SIZE", "3"}});
  check_ranks(bare, 1, 3, 1, 3, 0);
}

TEST_CASE("launch env: PMIx rank with PMI_SIZE", "[ch05][launch_env]") {
  const LaunchEnv le = ddp::discover_launch_env({{"PMIX_RANK", "2"}, {"PMI_SIZE", "3"}});
  CHECK(le.launcher == Launcher::Pmi);
  check_ranks(le, 2, 3, 2, 3, 0);
}

TEST_CASE("launch env: PBS with pbsdsh and a node file", "[ch05][launch_env]") {
  const NodeFile nodes("pbs", "n1\nn1\n  n2 \n\nn2\n");
  for (int vnode = 0; vnode < 4; ++vnode) {
    INFO("PBS_VNODENUM=" << vnode);
    const LaunchEnv le = ddp::discover_launch_env({{"PBS_JOBID", "4242.pbs01"},
                                                   {"PBS_NODEFILE", nodes.path()},
                                                   {"PBS_VNODENUM", std::to_string(vnode)}});
    CHECK(le.launcher == Launcher::Pbs);
    check_ranks(le, vnode, 4, vnode % 2, 2, vnode / 2);
    CHECK(le.hosts == std::vector<std::string>{"n1", "n2"});
    CHECK(le.master_addr == "n1");
    CHECK(le.master_port == 24242);
    CHECK(le.job_id == "4242.pbs01");
  }
  const NodeFile one("pbs_one", "solo\n");
  const LaunchEnv single =
      ddp::discover_launch_env({{"PBS_JOBID", "17.srv"}, {"PBS_NODEFILE", one.path()}});
  check_ranks(single, 0, 1, 0, 1, 0);
  CHECK(single.master_addr == "solo");
}

TEST_CASE("launch env: the port follows the job id, in 20000-29999", "[ch05][launch_env]") {
  const auto port = [](const std::string& id) {
    return ddp::discover_launch_env({{"SLURM_JOB_ID", id}}).master_port;
  };
  CHECK(port("9999") == 29999);
  CHECK(port("10000") == 20000);
  CHECK(port("123456789012345678901234") == 20000 + 1234);
  const int hashed = port("job-abc");  // no leading digits: hashed, the same for every rank
  CHECK(hashed >= 20000);
  CHECK(hashed < 30000);
  CHECK(port("job-abc") == hashed);
  CHECK(port("job-abd") != hashed);
  CHECK(ddp::discover_launch_env(
            with(slurm_task(0), {{"MASTER_PORT", "31337"}, {"MASTER_ADDR", "10.1.2.3"}}))
            .master_port == 31337);
}

TEST_CASE("launch env: current_environment reads this process's variables", "[ch05][launch_env]") {
  ::setenv("DDP_CH05_PROBE", "a=b", 1);
  const Environment env = ddp::current_environment();
  ::unsetenv("DDP_CH05_PROBE");
  REQUIRE(env.count("DDP_CH05_PROBE") == 1);
  CHECK(env.at("DDP_CH05_PROBE") == "a=b");
}

// ---- Nested launchers: the innermost wins ----------------------------------------------------
TEST_CASE("launch env: torchrun under srun reads torchrun's", "[ch05][launch_env]") {
  // srun started one torchrun per node (SLURM_PROCID = node); torchrun started 2 workers.
  const Environment env = with(with(slurm_task(1), {{"SLURM_NTASKS", "2"},
                                                    {"SLURM_STEP_NUM_TASKS", "2"},
                                                    {"SLURM_LOCALID", "0"},
                                                    {"SLURM_NODEID", "1"},
                                                    {"SLURM_STEP_TASKS_PER_NODE", "1(x2)"}}),
                               {{"RANK", "3"},
                                {"WORLD_SIZE", "4"},
                                {"LOCAL_RANK", "1"},
                                {"LOCAL_WORLD_SIZE", "2"},
                                {"GROUP_RANK", "1"}});
  const LaunchEnv le = ddp::discover_launch_env(env);
  CHECK(le.launcher == Launcher::Torchrun);
  check_ranks(le, 3, 4, 1, 2, 1);
  CHECK(le.master_addr == "gpu07");  // no MASTER_ADDR: the job's first host
  CHECK(le.job_id == "123456");
}

TEST_CASE("launch env: mpirun inside an sbatch script reads Open MPI's", "[ch05][launch_env]") {
  const Environment env = with(slurm_batch_script(4), {{"OMPI_COMM_WORLD_RANK", "3"},
                                                       {"OMPI_COMM_WORLD_SIZE", "4"},
                                                       {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                                       {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  const LaunchEnv le = ddp::discover_launch_env(env);
  CHECK(le.launcher == Launcher::OpenMpi);
  check_ranks(le, 3, 4, 1, 2, 1);
  CHECK(le.master_addr == "cn1");
  CHECK(le.master_port == 20777);
}

TEST_CASE("launch env: PMI over SLURM, SLURM over PMIx, SLURM over PBS", "[ch05][launch_env]") {
  // MPICH's mpiexec inside a SLURM step: its proxies' SLURM_PROCID is a node index.
  const LaunchEnv hydra = ddp::discover_launch_env(with(
      slurm_task(1),
      {{"PMI_RANK", "3"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "2"}}));
  CHECK(hydra.launcher == Launcher::Pmi);
  CHECK(hydra.rank == 3);
  // srun --mpi=pmix: PMIX_RANK next to SLURM's full set.
  const LaunchEnv pmix = ddp::discover_launch_env(with(slurm_task(2), {{"PMIX_RANK", "2"}}));
  CHECK(pmix.launcher == Launcher::Slurm);
  CHECK(pmix.rank == 2);
  const NodeFile nodes("pbs_slurm", "p1\np2\n");
  const LaunchEnv both = ddp::discover_launch_env(
      with(slurm_task(0), {{"PBS_NODEFILE", nodes.path()}, {"PBS_VNODENUM", "1"}}));
  CHECK(both.launcher == Launcher::Slurm);
  CHECK(both.master_addr == "gpu07");
}

// ---- Bad input: every error names the variable -----------------------------------------------
namespace {

// Discovery must fail, and its message contain every one of `parts`, the list of variables
// looked at and a hint.
void expect_error(const Environment& env, const std::vector<std::string>& parts) {
  try {
    const LaunchEnv le = ddp::discover_launch_env(env);
    FAIL("no error; discovered " << le.describe());
  } catch (const ddp::Error& e) {
    const std::string message = e.what();
    INFO(message);
    for (const std::string& part : parts) CHECK_THAT(message, Contains(part));
    CHECK_THAT(message, Contains("looked at:"));
    CHECK_THAT(message, Contains("hint:"));
  }
}

}  // namespace

TEST_CASE("launch env errors: torchrun variables", "[ch05][launch_env]") {
  expect_error({{"RANK", "3"}}, {"WORLD_SIZE is not set", "RANK=3", "WORLD_SIZE=(unset)"});
  expect_error({{"WORLD_SIZE", "4"}}, {"RANK is not set"});
  expect_error({{"RANK", "4"}, {"WORLD_SIZE", "4"}}, {"RANK=4 is not in [0, WORLD_SIZE=4)"});
  expect_error({{"RANK", "-1"}, {"WORLD_SIZE", "4"}}, {"RANK=-1 is not in"});
  expect_error({{"RANK", "0"}, {"WORLD_SIZE", "0"}}, {"WORLD_SIZE=0"});
  expect_error({{"RANK", "3x"}, {"WORLD_SIZE", "4"}}, {"RANK='3x' is not an integer"});
  expect_error({{"RANK", " 3"}, {"WORLD_SIZE", "4"}}, {"RANK=' 3' is not an integer"});
  expect_error({{"RANK", ""}, {"WORLD_SIZE", "4"}}, {"RANK='' is not an integer"});
  expect_error({{"RANK", "1"}, {"WORLD_SIZE", "99999999999"}},
               {"WORLD_SIZE='99999999999' is not an integer (out of range)"});
  expect_error({{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}},
               {"LOCAL_RANK is set but LOCAL_WORLD_SIZE is not"});
  expect_error({{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}},
               {"LOCAL_RANK=2 is not in [0, LOCAL_WORLD_SIZE=2)"});
  expect_error({{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "8"}},
               {"LOCAL_WORLD_SIZE=8 is not in [1, WORLD_SIZE=4]"});
  expect_error({{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"GROUP_RANK", "0"}, {"NODE_RANK", "1"}},
               {"GROUP_RANK=0 and NODE_RANK=1 disagree"});
}

TEST_CASE("launch env errors: SLURM variables", "[ch05][launch_env]") {
  // The batch script itself with 4 tasks: no srun started this process.
  expect_error(slurm_batch_script(4), {"no srun started this process", "srun ./program",
                                       "SLURM_STEP_ID=(unset)", "SLURM_NTASKS=4"});
  // SLURM_JOB_ID but no SLURM_PROCID (an salloc shell on 2 nodes).
  expect_error({{"SLURM_JOB_ID", "5"}, {"SLURM_NNODES", "2"}},
               {"no srun started this process", "SLURM_PROCID=(unset)"});
  // srun, but SLURM_NTASKS=1 while the job asks for 4 per node, or the step has 4.
  expect_error(
      with(slurm_task(0),
           {{"SLURM_NTASKS", "1"}, {"SLURM_STEP_NUM_TASKS", "1"}, {"SLURM_NTASKS_PER_NODE", "4"}}),
      {"SLURM_NTASKS=1, but SLURM_NTASKS_PER_NODE=4",
       "launched with srun but SLURM_NTASKS=1 and --ntasks-per-node=4?"});
  expect_error(with(slurm_task(0), {{"SLURM_NTASKS", "1"}}),
               {"SLURM_NTASKS=1, but SLURM_STEP_NUM_TASKS=4"});
  expect_error(with(slurm_task(0), {{"SLURM_NTASKS", "8"}}),
               {"SLURM_NTASKS=8 but SLURM_STEP_NUM_TASKS=4"});
  expect_error(with(slurm_task(0), {{"SLURM_PROCID", "4"}}),
               {"SLURM_PROCID=4 is not in [0, SLURM_NTASKS=4)"});
  expect_error(without(slurm_task(0), {"SLURM_NTASKS"}), {"SLURM_NTASKS is not set"});
  expect_error(without(slurm_task(0), {"SLURM_LOCALID"}), {"SLURM_LOCALID is not set"});
  expect_error(with(slurm_task(0), {{"SLURM_LOCALID", "2"}}),
               {"SLURM_LOCALID=2 is not in [0, SLURM_STEP_TASKS_PER_NODE[SLURM_NODEID]=2)"});
  expect_error(with(slurm_task(0), {{"SLURM_STEP_TASKS_PER_NODE", "2(y2)"}}),
               {"SLURM_STEP_TASKS_PER_NODE='2(y2)' is not a list like 2(x3),1"});
  expect_error(with(slurm_task(0), {{"SLURM_STEP_TASKS_PER_NODE", "2(x2),"}}),
               {"SLURM_STEP_TASKS_PER_NODE='2(x2),' is not a list"});
  expect_error(with(slurm_task(0), {{"SLURM_NODEID", "2"}}),
               {"SLURM_NODEID=2 but SLURM_STEP_TASKS_PER_NODE lists 2 nodes"});
  expect_error(with(slurm_task(0), {{"SLURM_STEP_NODELIST", "gpu[07-"}}),
               {"SLURM_STEP_NODELIST is not a hostlist", "\"gpu[07-\" at position 7"});
  expect_error(with(slurm_task(0), {{"SLURM_PROCID", "one"}}),
               {"SLURM_PROCID='one' is not an integer"});
}

TEST_CASE("launch env errors: Open MPI, PMI, PMIx", "[ch05][launch_env]") {
  expect_error({{"OMPI_COMM_WORLD_RANK", "1"},
                {"OMPI_COMM_WORLD_SIZE", "2"},
                {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}},
               {"OMPI_COMM_WORLD_LOCAL_SIZE is not set"});
  // Two nodes (local 4 < world 8) and nothing names rank 0's host.
  expect_error({{"OMPI_COMM_WORLD_RANK", "5"},
                {"OMPI_COMM_WORLD_SIZE", "8"},
                {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}},
               {"nothing names the master's host", "MASTER_ADDR=(unset)", "export MASTER_ADDR="});
  expect_error({{"PMIX_RANK", "1"}}, {"PMI_SIZE is not set", "PMIx keeps the world size"});
  expect_error({{"PMI_RANK", "1"}, {"PMIX_RANK", "2"}, {"PMI_SIZE", "4"}},
               {"PMI_RANK=1 and PMIX_RANK=2 disagree"});
  expect_error({{"PMI_SIZE", "4"}}, {"neither PMI_RANK nor PMIX_RANK"});
  expect_error({{"PMI_RANK", "1"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "0"}},
               {"MPI_LOCALRANKID is set but MPI_LOCALNRANKS is not"});
}

TEST_CASE("launch env errors: PBS and the master", "[ch05][launch_env]") {
  const NodeFile nodes("pbs_bad", "n1\nn1\nn2\nn2\n");
  expect_error({{"PBS_JOBID", "9.s"}, {"PBS_NODEFILE", nodes.path()}},
               {"the job has 4 slots", "PBS_VNODENUM=(unset)", "pbsdsh"});
  expect_error({{"PBS_JOBID", "9.s"}, {"PBS_NODEFILE", nodes.path()}, {"PBS_VNODENUM", "4"}},
               {"PBS_VNODENUM=4 is not in [0, lines of PBS_NODEFILE=4)"});
  expect_error({{"PBS_JOBID", "9.s"}, {"PBS_NODEFILE", "/nonexistent/ddp_nodefile"}},
               {"cannot open PBS_NODEFILE /nonexistent/ddp_nodefile"});
  const NodeFile empty("pbs_empty", "\n\n");
  expect_error({{"PBS_NODEFILE", empty.path()}}, {"lists no hosts"});
  expect_error({{"PBS_JOBID", "9.s"}}, {"PBS_JOBID is set but PBS_NODEFILE is not"});
  expect_error({{"MASTER_ADDR", ""}}, {"MASTER_ADDR is set but empty"});
  expect_error({{"MASTER_PORT", "70000"}}, {"MASTER_PORT=70000 is not a port"});
  expect_error({{"MASTER_PORT", "0"}}, {"MASTER_PORT=0 is not a port"});
  expect_error({{"MASTER_PORT", "29500/tcp"}}, {"MASTER_PORT='29500/tcp' is not an integer"});
}

TEST_CASE("a rank's GPU is its local rank, or device 0 when it sees one GPU",
          "[ch05][launch_env]") {
  // srun --gpus-per-node=4 (or torchrun): every rank sees all four.
  for (int local = 0; local < 4; ++local) CHECK(ddp::gpu_for_local_rank(local, 4) == local);
  CHECK(ddp::gpu_for_local_rank(4, 4) == -1);  // more ranks than GPUs
  // srun --gpus-per-task=1: each task sees its own GPU, as device 0.
  for (int local = 0; local < 4; ++local) CHECK(ddp::gpu_for_local_rank(local, 1) == 0);
  CHECK(ddp::gpu_for_local_rank(0, 0) == -1);  // no GPU at all
}

TEST_CASE("launch env: a SLURM batch script is told apart from a task that srun started",
          "[ch05][launch_env]") {
  // The batch script of a 2-task job: the job's variables, no step. Chapter 06's
  // ddp-train trains alone there; discover_launch_env refuses it.
  const Environment script = {{"SLURM_JOB_ID", "7"}, {"SLURM_PROCID", "0"},
                              {"SLURM_NTASKS", "2"}, {"SLURM_TASKS_PER_NODE", "2"}};
  CHECK(ddp::in_slurm_batch_shell(script));
  CHECK_THROWS_WITH(ddp::discover_launch_env(script), Contains("no srun started this process"));
  Environment step = script;
  step["SLURM_STEP_ID"] = "0";
  CHECK_FALSE(ddp::in_slurm_batch_shell(step));
  Environment torchrun = script;  // torchrun inside the script: its variables decide
  torchrun["RANK"] = "0";
  torchrun["WORLD_SIZE"] = "1";
  CHECK_FALSE(ddp::in_slurm_batch_shell(torchrun));
  CHECK_FALSE(ddp::in_slurm_batch_shell({}));
}
