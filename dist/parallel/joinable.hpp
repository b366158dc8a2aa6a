// Joinable: what chapter 08's Join (join.hpp) asks of the object it keeps in step, and all
// it sees of it. Chapter 08. PyTorch's torch.distributed.algorithms.Joinable and JoinHook,
// with their names. DistributedDataParallel implements it in a file of its own
// (distributed_data_parallel_join.cpp), so chapters 06 and 07 read DDP without the Join,
// and the Join reads no DDP member. Declares; does not count, shadow or sync anything.
//
//   Join join(ddp);  // join.hpp: takes ddp as a Joinable&, asks it for its JoinHook
//   ddp(x)           // each forward with grad on: Join::notify_join_context (the count)
//   join.finish()    // per iteration of the others: hook.main_hook(round); at the end:
//                    // hook.post_hook(final_root)
#pragma once

#include <memory>

#include "tensor/device.hpp"

namespace ddp {

class Join;
class ProcessGroup;
struct JoinRound;  // join.hpp: what one iteration's count says

// What a rank that has joined does in place of the others' training (PyTorch's JoinHook).
// A Joinable hands one to each Join (join_hook); the Join calls it from finish().
class JoinHook {
 public:
  virtual ~JoinHook() = default;
  // Once per iteration of the ranks still training: the same collectives as their
  // iteration, in the same order, with zeros from this rank (it shadows them). `round`
  // says what their iteration holds: a buffer broadcast (and its root), gradient
  // collectives, their divisor.
  virtual void main_hook(const JoinRound& round) = 0;
  // Once, when every rank has joined: the final sync, from `final_root`, the highest rank
  // among those that trained in the last iteration in which any did (-1: none did, there
  // is nothing to sync). PyTorch passes is_last_joiner and lets the hook agree on the root
  // with one more all-reduce; here the count has told every rank already.
  virtual void post_hook(int final_root) = 0;
};

class Joinable {
 public:
  virtual ~Joinable() = default;
  // Not copyable, so not movable either: a Join holds the object by reference (and so
  // does its hook), and a move would leave both on the moved-from object. So neither is
  // DistributedDataParallel (test_join_parts.cpp checks it at compile time).
  Joinable(const Joinable&) = delete;
  Joinable& operator=(const Joinable&) = delete;

  // Join's constructor asks for the hook of that Join. May refuse with ddp::Error an
  // object whose collectives a joined rank cannot shadow (DDP: a model with SyncBatchNorm2d).
  virtual std::unique_ptr<JoinHook> join_hook() = 0;
  // Where the join count lives (NCCL moves GPU memory only) and the group it is
  // all-reduced in (PyTorch's name; not the trainer's join_process_group, which joins
  // one). The count waits that group's deadline, as in PyTorch.
  virtual Device join_device() const = 0;
  virtual ProcessGroup& join_process_group() const = 0;

 protected:
  Joinable() = default;

 private:
  friend class Join;      // registers and unregisters itself here; nobody else reads it
  Join* join_ = nullptr;  // the Join this object is in, if any
};

}  // namespace ddp
