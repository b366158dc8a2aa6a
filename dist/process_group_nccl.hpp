// The nccl process group: ddp::ProcessGroup over NCCL, for tensors on GPUs. Chapter 05.
//
// One NCCL communicator per group, on one GPU per rank, running every collective on a
// communication stream of its own, ordered after the compute stream by an event (Note
// [Ordering the communication stream] in the .cpp). Built only when NCCL is found
// (DDP_HAVE_NCCL); dist/init.cpp decides availability with #ifdef. Sub-groups
// (new_group, dist/new_group.hpp) split the communicator (ncclCommSplit, NCCL 2.18 and
// later; before, a communicator of their own through the store). It does not do
// point-to-point messages or several GPUs per process.
#pragma once

#include <chrono>
#include <memory>

#include "dist/process_group.hpp"
#include "dist/store.hpp"

namespace ddp {

// Rank `rank` of `size`, on GPU `cuda_device` (tensors must live there). Rank 0 makes
// the NCCL unique id and publishes it in `store` under "nccl/unique_id" (so one nccl
// group per store); every rank then joins the communicator. `timeout` bounds the
// communicator's creation and is the group's default for everything after; on expiry or
// on an NCCL error the communicator is aborted and ddp::Error names the rank.
std::unique_ptr<ProcessGroup> make_process_group_nccl(
    std::shared_ptr<Store> store, int rank, int size, int cuda_device,
    std::chrono::milliseconds timeout = kDefaultTimeout);

}  // namespace ddp
