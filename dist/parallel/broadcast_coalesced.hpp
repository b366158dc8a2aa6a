// broadcast_coalesced: many tensors from one rank to all in one collective, and the
// module's buffers that way; NoSyncGuard, gradient accumulation's switch. Chapter 06 (DDP's
// start, its buffer sync, no_sync); chapter 09's sharded wrappers use the same.
#pragma once

#include <vector>

#include "dist/process_group.hpp"
#include "nn/module.hpp"

namespace ddp {

// Every rank's `tensors` (one dtype, one device, the same shapes on every rank) take
// root's values. One broadcast of a flat copy: the ResNet's buffers are 18 small tensors,
// and 18 broadcasts would pay 18 latencies (PyTorch coalesces too). Waits the group's
// deadline (ProcessGroup::timeout()).
void broadcast_coalesced(ProcessGroup& group, const std::vector<Tensor>& tensors, int root);

// The module's buffers (BatchNorm's running statistics and counts) take root's values:
// one coalesced broadcast per dtype.
void broadcast_buffers(const nn::Module& module, ProcessGroup& group, int root);

// While it lives, `require_sync` is false: the backwards of that time accumulate local
// gradients without communicating (PyTorch's no_sync). Nested guards: the outer one holds.
class NoSyncGuard {
 public:
  explicit NoSyncGuard(bool& require_sync) : flag_(require_sync), before_(require_sync) {
    flag_ = false;
  }
  ~NoSyncGuard() { flag_ = before_; }
  NoSyncGuard(const NoSyncGuard&) = delete;
  NoSyncGuard& operator=(const NoSyncGuard&) = delete;

 private:
  bool& flag_;
  bool before_;
};

}  // namespace ddp
