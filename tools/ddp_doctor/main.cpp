// ddp-doctor: the preflight every multi-rank launch script runs before the real program,
// under the same launcher. Chapter 00 (cluster section); launch/README.md.
//
// Each rank works out who it is (dist/launch_env.hpp) and which device it would use (and
// that GPU's UUID), reaches the master's TCPStore within --timeout seconds, and sends rank
// 0 a report; rank 0 checks them all (checks.hpp), prints one table, the backend that
// --backend auto would pick and why, and the verdict, and every rank exits 0 (all good)
// or 1 (with the problem and a hint); a bad flag exits 2. It trains nothing.
//
//   srun build/release/bin/ddp-doctor [--timeout SECONDS]

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "dist/launch_env.hpp"
#include "dist/tcp_store.hpp"
#include "tensor/cuda/device_info.hpp"
#include "base/error.hpp"
#include "base/who.hpp"
#include "tools/ddp_doctor/checks.hpp"
#include "tools/flags.hpp"

namespace {

using ddp::doctor::RankReport;

std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// The device ddp-train would pick (place_rank: its rule, training_gpu), with the UUIDs of
// every GPU this rank sees.
void choose_device(RankReport& report) {
  std::vector<std::string> visible;
  for (int i = 0; i < ddp::cuda::device_count(); ++i) visible.push_back(ddp::cuda::device_uuid(i));
  ddp::doctor::place_rank(report, visible, env_or_empty("SLURM_STEP_GPUS"),
                          env_or_empty("CUDA_VISIBLE_DEVICES"));
}

constexpr const char* kUsage = "usage: ddp-doctor [--timeout SECONDS]\n";
constexpr const char* kAbout =
    "Run it under the launcher of the real job (srun, mpirun, ddprun), as the real program\n"
    "would be: every rank reports who it is and which device it would use, rank 0 checks\n"
    "them all and prints a table and the verdict. Exit 0: all good; 1: a problem, named,\n"
    "with a hint. --timeout: how long to wait for every rank (default 30 s).\n";

// The flags; throws ddp::Error for a bad one.
std::chrono::seconds parse_timeout(int argc, char** argv) {
  std::chrono::seconds timeout{30};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    DDP_CHECK(arg == "--timeout", "unknown argument '", arg, "'");
    DDP_CHECK(i + 1 < argc, "--timeout needs a value");
    timeout = std::chrono::seconds(ddp::parse_int_flag("--timeout", argv[++i], 1, 86400));
  }
  return timeout;
}

int run(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      std::fputs(kUsage, stdout);
      std::fputs(kAbout, stdout);
      return 0;
    }
  }
  std::chrono::seconds timeout;
  try {
    timeout = parse_timeout(argc, argv);
  } catch (const ddp::Error& e) {  // one line and the usage, exit 2, as every tool here
    const std::string message = e.what();
    std::fprintf(stderr, "ddp-doctor: %s\n%s", message.substr(0, message.find('\n')).c_str(),
                 kUsage);
    return 2;
  }
  const ddp::LaunchEnv env = ddp::discover_launch_env();
  RankReport me;
  me.rank = env.rank;
  me.world_size = env.world_size;
  me.local_rank = env.local_rank;
  me.local_world_size = env.local_world_size;
  me.host = ddp::host_name();
  me.launcher = ddp::to_string(env.launcher);
  choose_device(me);

  // Reaching the master: rank 0 listens on MASTER_ADDR:MASTER_PORT, the others connect;
  // the constructor returns once all world_size ranks are in, or throws (with a hint)
  // after the timeout saying how many made it.
  const auto options = ddp::TCPStoreOptions::for_rank(
      env.master_addr, env.master_port, env.rank, env.world_size, timeout);
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<ddp::TCPStore> connected;
  try {
    connected = std::make_unique<ddp::TCPStore>(options);
  } catch (const ddp::Error& e) {
    DDP_FAIL(ddp::rank_label(me.rank, me.world_size, me.launcher), " could not ",
             me.rank == 0 ? "serve" : "reach", " the master's store at ", env.master_addr, ":",
             env.master_port, ":\n", e.what(),
             "\nhint (ddp-doctor): a second rank 0, or ranks missing, usually means the "
             "launcher ran twice per slot (srun + ddprun needs --ntasks-per-node=1); a port in "
             "use may be another job's: set MASTER_PORT");
  }
  ddp::TCPStore& store = *connected;
  me.connect_ms = static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::steady_clock::now() - start)
                                        .count());
  store.set("doctor/report/" + std::to_string(me.rank), ddp::doctor::encode(me));

  if (me.rank != 0) {
    // Wait for rank 0's verdict, so that every rank exits with the same code.
    const std::string verdict = store.get("doctor/verdict");
    store.set("doctor/read/" + std::to_string(me.rank), "");
    if (verdict == "ok") return 0;
    std::fprintf(stderr, "ddp-doctor: rank %d on %s: rank 0 found problems (see its output)\n",
                 me.rank, me.host.c_str());
    return 1;
  }

  std::vector<RankReport> reports;
  for (int r = 0; r < env.world_size; ++r) {
    reports.push_back(ddp::doctor::decode(store.get("doctor/report/" + std::to_string(r))));
  }
  const std::vector<std::string> problems = ddp::doctor::find_problems(reports);
  std::printf("ddp-doctor: %d rank(s), master %s:%d%s%s\n%s", env.world_size,
              env.master_addr.c_str(), env.master_port, env.job_id.empty() ? "" : ", job ",
              env.job_id.c_str(),
              ddp::doctor::format_findings(reports, problems, ddp::nccl_built()).c_str());
  if (problems.empty()) {
    std::printf("ddp-doctor: OK: all %d ranks reached %s:%d, agree on world size %d and"
                " launcher %s, no GPU shared\n",
                env.world_size, env.master_addr.c_str(), env.master_port, env.world_size,
                me.launcher.c_str());
  }
  std::fflush(stdout);
  store.set("doctor/verdict", problems.empty() ? "ok" : "problems");
  // The server lives in this process: it must outlive every rank's read of the verdict.
  std::vector<std::string> read_keys;
  for (int r = 1; r < env.world_size; ++r) read_keys.push_back("doctor/read/" + std::to_string(r));
  store.wait(read_keys);
  return problems.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp-doctor on %s: %s\n", ddp::host_name().c_str(), e.what());
    return 1;
  }
}
