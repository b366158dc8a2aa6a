// init_process_group (see init.hpp): who am I, where do we meet, which backend.
#include "dist/init.hpp"

#include "dist/backend_choice.hpp"
#include "dist/file_store.hpp"
#include "dist/launch_env.hpp"
#include "dist/process_group_mpi.hpp"
#include "dist/process_group_tcp.hpp"
#include "dist/tcp_store.hpp"
#include "base/error.hpp"
#include "tensor/cuda/device_info.hpp"  // device_count, device_uuid
#ifdef DDP_HAVE_NCCL
#include "dist/process_group_nccl.hpp"
#endif

namespace ddp {

namespace {

constexpr const char* kBackends = "tcp, mpi, nccl, auto";

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

std::unique_ptr<ProcessGroup> make_tcp(const Rendezvous& r, const InitOptions& options) {
  return std::make_unique<ProcessGroupTcp>(r.store, r.rank, r.world_size, options.timeout);
}

// gpu: the rank's GPU, or -1: cuda:<local rank>, or cuda:0 for a rank that sees one GPU
// (gpu_for_local_rank); make_process_group_nccl names the rank when neither is there.
std::unique_ptr<ProcessGroup> make_nccl([[maybe_unused]] const Rendezvous& r,
                                        [[maybe_unused]] const InitOptions& options,
                                        [[maybe_unused]] int gpu = -1) {
#ifdef DDP_HAVE_NCCL
  if (gpu < 0) gpu = gpu_for_local_rank(r.local_rank, cuda::device_count());
  return make_process_group_nccl(r.store, r.rank, r.world_size,
                                 gpu >= 0 ? gpu : r.local_rank, options.timeout);
#else
  DDP_FAIL("init_process_group: backend \"nccl\" is not in this build (cmake found no NCCL)\n",
           "hint: set NCCL_HOME to NCCL's install prefix (>= 2.14; or `module load nccl`), ",
           "reconfigure with -DDDP_CUDA=ON until cmake says 'Found NCCL', rebuild; or run "
           "with --backend tcp");
#endif
}

// "auto": every rank posts which GPU it would train on, reads everyone's, and makes the
// same choice from the same facts; no rank has to announce it.
BackendChoice agree_on_backend(Store& store, const Rendezvous& r, const InitOptions& options) {
  RankGpu me;
  me.host = host_name();
  me.visible_gpus = cuda::device_count();
  if (options.device.is_cuda()) me.gpu_uuid = cuda::device_uuid(options.device.index);
  const std::string prefix = "init/auto_backend/";
  store.set(prefix + std::to_string(r.rank), encode(me));
  std::vector<RankGpu> all;
  for (int rank = 0; rank < r.world_size; ++rank) {
    all.push_back(decode_rank_gpu(store.get(prefix + std::to_string(rank), options.timeout)));
  }
  return choose_backend(all, nccl_built());
}

}  // namespace

std::unique_ptr<ProcessGroup> init_process_group(const InitOptions& options) {
  BackendChoice ignored;
  return init_process_group(options, ignored);
}

std::unique_ptr<ProcessGroup> init_process_group(const InitOptions& options,
                                                 BackendChoice& chosen) {
  const std::string& backend = options.backend;
  chosen = {backend, "asked for"};
  if (backend == "tcp") return make_tcp(rendezvous(options, /*need_store=*/true), options);
  if (backend == "nccl") {
    if (!nccl_built()) return make_nccl({}, options);  // fails before anyone waits for it
    // On the rank's own GPU when it names one (--device cuda:1), as auto does below.
    return make_nccl(rendezvous(options, /*need_store=*/true), options,
                     options.device.is_cuda() ? options.device.index : -1);
  }
  if (backend == "auto") {
    const Rendezvous r = rendezvous(options, /*need_store=*/true);
    chosen = agree_on_backend(*r.store, r, options);
    // nccl on the very GPU whose UUID the ranks compared.
    return chosen.backend == "nccl" ? make_nccl(r, options, options.device.index)
                                    : make_tcp(r, options);
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
  DDP_FAIL("init_process_group: unknown backend \"", backend, "\"; the choices are ", kBackends);
}

}  // namespace ddp
