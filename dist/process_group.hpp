// ddp::ProcessGroup, the collectives every backend offers. Chapter 05 introduces it.
//
// A process group is `size()` processes, each knowing its `rank()`, that call the same
// collectives in the same order, each within the group's `timeout()`. Every collective
// returns a Work at once; the data in
// the tensors may only be read after Work::wait() (or, by kernels queued after it,
// Work::block_stream(): chapter 07). Backends: tcp (from scratch, a ring;
// dist/process_group_tcp.hpp), mpi (Open MPI; dist/process_group_mpi.hpp) and nccl
// (GPUs; dist/process_group_nccl.hpp). Which one is made, and how the ranks meet, is
// dist/init.hpp's job. A group does not know about autograd or models (chapter 06/07).
// Chapter 08 adds the end of a group's life: destroy() (an orderly end, as
// torch.distributed.destroy_process_group) and abort() (the way out after a failure).
// A group of some of a group's ranks is made by new_group (dist/new_group.hpp).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dist/store.hpp"
#include "dist/work.hpp"
#include "tensor/cuda/streams.hpp"
#include "tensor/tensor.hpp"

namespace ddp {

enum class ReduceOp { Sum, Avg, Max, Min };
const char* to_string(ReduceOp op);

class ProcessGroup;
// dist/new_group.hpp: a sub-group of `parent`'s ranks `ranks`.
std::unique_ptr<ProcessGroup> new_group(ProcessGroup& parent, const std::vector<int>& ranks);

// Where a sub-group sits in the group it was made from (new_group): its ranks there, in
// order (rank i of the sub-group is the parent's rank ranks[i]), and this process's rank
// in the parent. `ranks` is empty for a group of its own (init_process_group).
struct InParent {
  std::vector<int> ranks;
  int rank = -1;
  int size = 0;
};

class ProcessGroup {
 public:
  // `timeout`: the group's deadline, see timeout(). `in_parent`: for a sub-group.
  ProcessGroup(int rank, int size, std::chrono::milliseconds timeout, InParent in_parent = {});
  virtual ~ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  // A rank of the parent that is not in a sub-group holds a stand-in whose rank() is -1
  // (new_group); its collectives throw.
  int rank() const { return rank_; }
  int size() const { return size_; }
  // For a group made by new_group, its place in the parent; otherwise empty ranks.
  const InParent& in_parent() const { return in_parent_; }
  virtual std::string backend_name() const = 0;  // "tcp", "mpi", "nccl"

  // The group's deadline, set once when it is made (InitOptions::timeout, ddp-train
  // --timeout): how long one collective may take. Every Work this group returns waits
  // this long in wait() and block_stream() when its caller names no other; the
  // backend's set-up and destroy() are bounded by it too. Nothing above the group (DDP,
  // the Reducer, SyncBatchNorm, the sharded wrappers, ddp-train) keeps a deadline of its own.
  std::chrono::milliseconds timeout() const { return timeout_; }

  // Who is speaking, for every message about this rank (rank_label, base/who.hpp):
  // "rank 3/4 (tcp, node07)"; with the part that speaks, "Reducer on rank 3/4 (tcp,
  // node07)". The backends, the Reducer, Join and SyncBatchNorm all say it this way.
  // A sub-group names itself and this rank in the parent: "rank 1/2 of group [2, 3]
  // (tcp, node07, parent rank 3/4)"; its stand-in on the other ranks says "rank 0/4
  // (tcp, node07), not in group [2, 3]".
  std::string who() const;
  std::string who(std::string_view speaker) const;

  // Every rank passes a tensor of the same shape and dtype (float32 or int64,
  // contiguous). Afterwards each holds the element-wise reduction over all ranks.
  // Avg on int64 divides with truncation toward zero.
  virtual std::shared_ptr<Work> all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::Sum) = 0;

  // Afterwards every rank's tensor holds `root`'s.
  virtual std::shared_ptr<Work> broadcast(Tensor& tensor, int root) = 0;

  // input: (n) on every rank -> output: (size() * n), rank r's input at [r*n, (r+1)*n).
  // (Shapes are checked by element count; output may have any shape of that count.)
  virtual std::shared_ptr<Work> all_gather(Tensor& output, const Tensor& input) = 0;

  // input: (size() * n) on every rank -> output: (n) holding, on rank r, the reduction
  // over all ranks of their input[r*n, (r+1)*n).
  virtual std::shared_ptr<Work> reduce_scatter(Tensor& output, const Tensor& input,
                                               ReduceOp op = ReduceOp::Sum) = 0;

  // Completes once every rank has entered it.
  virtual std::shared_ptr<Work> barrier() = 0;

  // ---- The end of a group (chapter 08) ----
  // Note [An orderly end]
  // Ends the group in order, as torch.distributed.destroy_process_group: the backend's
  // connections close the way a peer expects (tcp: a plain close after the last
  // collective, never a reset; mpi: MPI_Comm_free and MPI_Finalize; nccl:
  // ncclCommFinalize + ncclCommDestroy), and, where the ranks met through a TCPStore,
  // every rank says "done" in the store and rank 0, whose process serves it, waits
  // (at most the group's timeout, capped at kLeavePatience) until all have: the store
  // outlives every client that still needs it. Call it once on every rank, after a final
  // barrier()->wait(); a second call does nothing; the destructor calls it when nobody
  // did. Collectives after it fail. Throws nothing: a peer that never says "done" is
  // reported on stderr, and rank 0 goes on.
  virtual void destroy() {}
  // The way out after a failure, for a watchdog that is about to exit the process:
  // unblocks whatever waits on the group (tcp: shuts the ring sockets; nccl:
  // ncclCommAbort; mpi: nothing, mpirun ends the job when a rank exits without
  // MPI_Finalize). Never blocks, never throws; the group cannot be used afterwards.
  virtual void abort() noexcept {}
  // The store the group's ranks met through, where there is one (tcp, nccl); nullptr for
  // mpi, which meets through MPI. The watchdog (dist/parallel/watchdog.hpp) publishes
  // its ledger there.
  virtual std::shared_ptr<Store> store() const { return nullptr; }
  // How long destroy() waits, at most, for the others to say "done".
  static constexpr std::chrono::milliseconds kLeavePatience{std::chrono::seconds(30)};
  // A report made while failing (a failure, a ledger tail, written to the store or read
  // from it) is best effort: the store may be on the rank that failed us, and frozen
  // rather than closed. Such a store call waits this long (and TCPStore's grace of 1 s),
  // not the group's timeout.
  static constexpr std::chrono::milliseconds kReportTimeout{1000};

 protected:
  // new_group's part that each backend does its own way (dist/new_group.hpp): every rank
  // of this group calls it, in the same order relative to the collectives, with the same
  // `ranks`, already checked (sorted, unique, in range, the same on every rank). Returns
  // the sub-group on its members (rank i is ranks[i]), nullptr on the others once they
  // have done their share (mpi and nccl split collectively). The default refuses: a
  // wrapper (WatchedGroup) is not split, the group it wraps is.
  virtual std::unique_ptr<ProcessGroup> split(const std::vector<int>& ranks);
  // Where new_group's check of the ranks lists runs its all_gather: the CPU, or nccl's GPU.
  virtual Device own_device() const { return Device::cpu(); }
  friend std::unique_ptr<ProcessGroup> new_group(ProcessGroup& parent,
                                                 const std::vector<int>& ranks);

  // The argument checks every backend makes before it queues a collective. The errors
  // name this rank, the backend and the collective: "rank 1/4 (tcp, node07) all_gather:
  // output has 7 elements, expected size() * input.numel() = 4 * 2".
  // check_tensor: `name` ("tensor", "input", "output") is defined and contiguous. A
  // backend that asks more (tcp: the dtypes it reduces; nccl: its GPU) overrides it and
  // calls this one first.
  virtual void check_tensor(const Tensor& t, const char* collective, const char* name) const;
  void check_root(const char* collective, int root) const;
  void check_all_gather(const Tensor& output, const Tensor& input) const;
  void check_reduce_scatter(const Tensor& output, const Tensor& input) const;

  // "rank 3/4 (tcp, node07) all_gather": who, in which collective.
  std::string where(const char* collective) const;

 private:
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  InParent in_parent_;
  std::string host_;  // this host's name, for who()
};

namespace detail {
// destroy()'s last part for groups that met through a store (see Note [An orderly
// end]): this rank counts itself done under "<prefix>/done"; rank 0 then waits until
// all `size` have (at most `patience`) and names on stderr the ranks that never did.
void leave_store(Store& store, const std::string& prefix, int rank, int size,
                 std::chrono::milliseconds patience) noexcept;

// Note [Staging CUDA tensors off the compute stream]
// Backends that move bytes through host memory (tcp, mpi) stage CUDA tensors there, in
// page-locked memory (empty_pinned), which the copy engine reads and writes directly. The
// copies must not run on the compute stream: chapter 07 queues a bucket's all-reduce from
// inside backward while the host keeps queuing the rest of backward, and a copy queued
// behind all of that would start only once backward is over. So:
//   1. the caller's thread, when it queues the collective, marks the end of the compute
//      stream (mark_compute_stream): the kernels that produce the input are all before it;
//   2. the communication thread copies down on the GPU's copy stream, which first waits
//      (on the GPU) for that mark, and waits for the copy stream alone (host_copy);
//   3. after the collective, it copies the result up on the same stream and waits for it
//      (copy_back) before the Work finishes, so that Work::wait() still means "done".
// The task holds the tensors until then (tensor/cuda/caching_allocator.hpp).
// Kernels queued after the collective run meanwhile: that is the overlap chapter 07 is for.
// They must not touch the tensor before Work::wait(), as with every backend.
using ComputeMark = std::shared_ptr<cuda::Event>;  // null: no GPU work to wait for

// Caller's thread. An event at the end of the compute stream of the GPU that `a` (or else
// `b`) is on; null when neither is a CUDA tensor.
ComputeMark mark_compute_stream(const Tensor& a, const Tensor& b = Tensor());
// The tensor itself if it is on the CPU, else a page-locked copy of it, made once `ready`
// is reached (step 2 above).
Tensor host_copy(const Tensor& t, const ComputeMark& ready);
// The tensor itself if it is on the CPU, else page-locked memory of its shape and dtype,
// contents undefined.
Tensor host_buffer_like(const Tensor& t);
// dst.copy_(src) where one of them may be a CUDA tensor and the other host memory: on the
// copy stream once `ready` is reached, for a CUDA tensor (steps 2 and 3 above); a plain
// copy_ between host tensors.
void staged_copy(const Tensor& src, const Tensor& dst, const ComputeMark& ready);
// t.copy_(host) when t is a CUDA tensor (step 3 above); nothing when t is `host` itself.
void copy_back(const Tensor& t, const Tensor& host, const ComputeMark& ready);
// All of these are for the communication thread (except mark_compute_stream): for a CUDA
// tensor they make its GPU the thread's device for good (cuda::use_device).
// "\n  rank <peer> had failed first:" and `report` under it, each line indented by four:
// how a group quotes, under its own error, the report of the rank that failed first.
std::string quote_failure_report(int peer, const std::string& report);

}  // namespace detail

}  // namespace ddp
