// ddp::init_process_group: from "I was started by some launcher" to a working process
// group, in one call, as torch.distributed.init_process_group. Chapter 05.
//
//   auto group = ddp::init_process_group({});  // tcp backend, env:// rendezvous
//   group->all_reduce(t)->wait();
//
// It finds rank and world size (dist/launch_env.hpp), makes the store the ranks meet
// through (TCPStore on the master, or a FileStore), and builds the backend on it. No
// global default group: the caller owns what it gets back. Chapter 08: the group keeps
// the store (group->store(), null for mpi: the watchdog publishes its ledger there),
// ends with group->barrier()->wait(); group->destroy(); and two processes started as one
// rank fail at once, naming both (Note [Claiming a rank], dist/tcp_store.cpp).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "base/deadline.hpp"  // kDefaultTimeout
#include "dist/backend_choice.hpp"
#include "dist/process_group.hpp"
#include "tensor/device.hpp"

namespace ddp {

struct InitOptions {
  // "tcp" (ProcessGroupTcp, from scratch), "mpi" (Open MPI), "nccl" (GPUs), or "auto":
  // nccl when every rank's `device` is a GPU of its own, else tcp (choose_backend,
  // dist/backend_choice.hpp; the ranks compare their GPUs' UUIDs through the store).
  std::string backend = "tcp";
  // Where this rank's tensors live; only "auto" asks.
  Device device = Device::cpu();
  // How the ranks meet:
  //   env://            rank, world size, MASTER_ADDR/MASTER_PORT from the launcher
  //                     (discover_launch_env); a TCPStore that rank 0 serves.
  //   tcp://host:port   a TCPStore at host:port (rank 0 serves); rank and world size
  //                     from the fields below, or from the launcher when they are -1.
  //   file:///path      a FileStore at /path on a filesystem every rank sees.
  // The mpi backend meets through MPI itself and only uses the store's rank/world
  // size, when known, to check MPI agrees.
  std::string init_method = "env://";
  int rank = -1;        // -1: from the launcher
  int world_size = -1;  // -1: from the launcher
  std::chrono::milliseconds timeout = kDefaultTimeout;  // rendezvous and collectives
};

// Throws ddp::Error naming the backend or init method at fault (an unknown backend
// lists the choices; a missing variable names it).
std::unique_ptr<ProcessGroup> init_process_group(const InitOptions& options);
// The same, and which backend was chosen and why: for "auto", choose_backend's answer
// (the same on every rank); for a named backend, that name, "asked for".
std::unique_ptr<ProcessGroup> init_process_group(const InitOptions& options,
                                                 BackendChoice& chosen);

}  // namespace ddp
