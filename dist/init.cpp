// init_process_group (see init.hpp): who am I, where do we meet, which backend.
#include "dist/init.hpp"

#include "dist/file_store.hpp"
#include "dist/launch_env.hpp"
#include "dist/process_group_mpi.hpp"
#include "dist/process_group_tcp.hpp"
#include "dist/tcp_store.hpp"
#include "base/error.hpp"
#ifdef DDP_HAVE_NCCL
#include "dist/process_group_nccl.hpp"
#include "tensor/cuda/device_info.hpp"  // device_count
#endif

namespace ddp {

namespace {

constexpr const char* kBackends = "tcp, mpi, nccl";

struct Rendezvous {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  Launcher launcher = Launcher::None;  // who set rank and world size, if anyone
  std::shared_ptr<Store> store;  // null for mpi, which meets through MPI
};

// "tcp://host:port" -> host, port. IPv6 hosts in brackets: tcp://[::1]:29500.
std::pair<std::string, int> parse_tcp_url(const std::string& url) {
  const std::string rest = url.substr(6);
  const auto colon = rest.rfind(':');
  DDP_CHECK(colon != std::string::npos && colon + 1 < rest.size(), "init_method \"", url,
            "\" has no port\nhint: tcp://host:port, e.g. tcp://10.0.0.1:29500");
  std::string host = rest.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  int port = -1;
  try {
    port = std::stoi(rest.substr(colon + 1));
  } catch (const std::exception&) {
  }
  DDP_CHECK(port > 0 && port < 65536, "init_method \"", url, "\": bad port \"",
            rest.substr(colon + 1), "\"");
  return {host, port};
}

std::shared_ptr<Store> make_tcp_store(const std::string& host, int port, int rank,
                                      int world_size, std::chrono::milliseconds timeout) {
  return std::make_shared<TCPStore>(
      TCPStoreOptions::for_rank(host, port, rank, world_size, timeout));
}

Rendezvous rendezvous(const InitOptions& options, bool need_store) {
  const LaunchEnv env = discover_launch_env();
  Rendezvous r;
  r.rank = options.rank >= 0 ? options.rank : env.rank;
  r.world_size = options.world_size >= 0 ? options.world_size : env.world_size;
  r.local_rank = env.local_rank;
  r.launcher = env.launcher;
  DDP_CHECK(r.world_size >= 1 && r.rank >= 0 && r.rank < r.world_size, "init_process_group: rank ",
            r.rank, " of world size ", r.world_size, " (launcher: ", env.describe(), ")");
  if (!need_store) return r;

  const std::string& url = options.init_method;
  if (url == "env://") {
    r.store = make_tcp_store(env.master_addr, env.master_port, r.rank, r.world_size,
                             options.timeout);
  } else if (url.starts_with("tcp://")) {
    const auto [host, port] = parse_tcp_url(url);
    r.store = make_tcp_store(host, port, r.rank, r.world_size, options.timeout);
  } else if (url.starts_with("file://")) {
    r.store = std::make_shared<FileStore>(url.substr(7), options.timeout);
  } else {
    DDP_FAIL("init_method \"", url, "\" is not one of env://, tcp://host:port, file:///path");
  }
  return r;
}

}  // namespace

std::unique_ptr<ProcessGroup> init_process_group(const InitOptions& options) {
  const std::string& backend = options.backend;
  if (backend == "tcp") {
    const Rendezvous r = rendezvous(options, /*need_store=*/true);
    return std::make_unique<ProcessGroupTcp>(r.store, r.rank, r.world_size, options.timeout);
  }
  if (backend == "mpi") {
    // MPI meets through its own launcher; the environment only serves as a cross-check.
    const Rendezvous r = rendezvous(options, /*need_store=*/false);
    std::unique_ptr<ProcessGroup> group = make_process_group_mpi(options.timeout);
    const bool known = options.rank >= 0 || r.launcher != Launcher::None;
    DDP_CHECK(!known || (group->rank() == r.rank && group->size() == r.world_size),
              "init_process_group(backend=mpi): MPI says rank ", group->rank(), " of ",
              group->size(), ", the environment says rank ", r.rank, " of ", r.world_size,
              "\nhint: start mpi jobs with mpirun/srun alone, not under another launcher");
    return group;
  }
  if (backend == "nccl") {
#ifdef DDP_HAVE_NCCL
    const Rendezvous r = rendezvous(options, /*need_store=*/true);
    // cuda:<local rank>, or cuda:0 for a rank that sees one GPU (gpu_for_local_rank);
    // make_process_group_nccl names the rank when neither is there.
    const int gpu = gpu_for_local_rank(r.local_rank, cuda::device_count());
    return make_process_group_nccl(r.store, r.rank, r.world_size,
                                   gpu >= 0 ? gpu : r.local_rank, options.timeout);
#else
    DDP_FAIL("init_process_group: backend \"nccl\" is not in this build\n",
             "hint: configure with -DDDP_CUDA=ON on a machine with CUDA and NCCL");
#endif
  }
  DDP_FAIL("init_process_group: unknown backend \"", backend, "\"; the choices are ", kBackends);
}

}  // namespace ddp
