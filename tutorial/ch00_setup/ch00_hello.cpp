// ch00_hello: "hello, cluster". Every rank prints who it is and which launcher told it
// so; rank 0 gathers every rank's line through a TCPStore and prints them as one table.
// Chapter 00 (the cluster section of README.md); started by launch/ch00_hello.*.
// No MPI and no collectives: only the rendezvous every later chapter begins with.
//
//   srun -N2 --ntasks-per-node=2 build/release/bin/ch00_hello [--timeout SECONDS]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "dist/launch_env.hpp"
#include "dist/tcp_store.hpp"
#include "base/error.hpp"
#include "base/text.hpp"  // split
#include "tools/flags.hpp"

namespace {

// One rank's row of the table, tab-separated so that rank 0 can split it again:
// rank, local rank/size, node, host, launcher, pid.
std::string row(const ddp::LaunchEnv& env, const std::string& host) {
  std::ostringstream os;
  os << env.rank << '\t' << env.local_rank << '/' << env.local_world_size << '\t'
     << env.node_rank << '\t' << host << '\t' << ddp::to_string(env.launcher) << '\t'
     << getpid();
  return os.str();
}

int run(int argc, char** argv) {
  std::chrono::seconds timeout{60};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    DDP_CHECK(arg == "--timeout" && i + 1 < argc, "usage: ch00_hello [--timeout SECONDS]");
    timeout = std::chrono::seconds(ddp::parse_int_flag("--timeout", argv[++i], 1, 86400));
  }
  const ddp::LaunchEnv env = ddp::discover_launch_env();
  const std::string host = ddp::host_name();
  std::printf("hello from rank %d of %d (local %d of %d, node %d) on %s, set by %s\n",
              env.rank, env.world_size, env.local_rank, env.local_world_size, env.node_rank,
              host.c_str(), ddp::to_string(env.launcher));
  std::fflush(stdout);

  // Rank 0 serves the store at MASTER_ADDR:MASTER_PORT; the constructor returns once all
  // world_size ranks are connected, so a missing rank is an error after `timeout`.
  const auto options = ddp::TCPStoreOptions::for_rank(
      env.master_addr, env.master_port, env.rank, env.world_size, timeout);
  ddp::TCPStore store(options);
  store.set("hello/" + std::to_string(env.rank), row(env, host));
  if (env.rank != 0) return 0;

  // Rank 0: one get() per rank, in rank order; each waits until that rank has set it.
  std::printf("\nhello, cluster: %d ranks, master %s:%d%s%s\n", env.world_size,
              env.master_addr.c_str(), env.master_port, env.job_id.empty() ? "" : ", job ",
              env.job_id.c_str());
  std::printf("%5s  %-6s %5s  %-16s %-9s %s\n", "rank", "local", "node", "host", "launcher",
              "pid");
  std::set<std::string> hosts;
  for (int r = 0; r < env.world_size; ++r) {
    const std::vector<std::string> f = ddp::split(store.get("hello/" + std::to_string(r)), '\t');
    DDP_CHECK(f.size() == 6, "rank ", r, " sent a malformed line to the store");
    std::printf("%5s  %-6s %5s  %-16s %-9s %s\n", f[0].c_str(), f[1].c_str(), f[2].c_str(),
                f[3].c_str(), f[4].c_str(), f[5].c_str());
    hosts.insert(f[3]);
  }
  std::printf("%d ranks on %zu host(s) said hello\n", env.world_size, hosts.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ch00_hello on %s: %s\n", ddp::host_name().c_str(), e.what());
    return 1;
  }
}
