// ProcessGroupNccl, the nccl backend (see dist/process_group_nccl.hpp). Chapter 05.
//
// Reading order: the error check, the communicator's owner (NcclComm: nonblocking
// creation with a timeout, abort, teardown), the Work that polls a CUDA event
// (NcclWork), the group and its collectives. Compiled only with DDP_HAVE_NCCL. It never
// blocks the host on the GPU except inside Work::wait.
#include "dist/process_group_nccl.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/deadline.hpp"
#include "dist/launch_env.hpp"  // host_name
#include "tensor/cuda/device_info.hpp"
#include "tensor/cuda/runtime.hpp"
#include "tensor/cuda/streams.hpp"  // the compute stream: record on it, make it wait
#include "base/error.hpp"
#include "base/who.hpp"

namespace ddp {
namespace {

using Clock = std::chrono::steady_clock;

// Between two polls of an event or of the communicator's state.
constexpr auto kPollSleep = std::chrono::microseconds(20);

// Throws ddp::Error for an NCCL call that failed, in NCCL's words (the short name of the
// code, and the last error message NCCL logged, which says much more).
void check_nccl(ncclResult_t status, const char* call, const char* file, int line) {
  if (status == ncclSuccess) return;
  detail::throw_error(file, line, call,
                      detail::concat(call, " failed on ", host_name(), ": ",
                                     ncclGetErrorString(status), " (", ncclGetLastError(nullptr),
                                     ")\nhint: NCCL_DEBUG=INFO prints what NCCL tried"));
}

}  // namespace
}  // namespace ddp

// DDP_CHECK_NCCL(ncclGetUniqueId(&id)): throws unless the call returns ncclSuccess.
#define DDP_CHECK_NCCL(call) ::ddp::check_nccl((call), #call, __FILE__, __LINE__)

namespace ddp {
namespace {

// ---- The communicator ----------------------------------------------------------------

// Owns an ncclComm_t made in nonblocking mode (config.blocking = 0): every call returns
// at once, possibly with ncclInProgress, and ncclCommGetAsyncError says when the call
// has really finished. That is what lets creation, and every later step, have a timeout:
// a blocking ncclCommInitRank waits forever for a rank that never shows up.
// Shared (shared_ptr) by the group and its Works, which abort it on failure.
class NcclComm {
 public:
  NcclComm(const ncclUniqueId& id, int rank, int size, int device,
           std::chrono::milliseconds timeout)
      : rank_(rank), size_(size), device_(device), timeout_(timeout) {
    cuda::DeviceGuard guard(device_);  // the communicator belongs to the current GPU
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    const ncclResult_t status = ncclCommInitRankConfig(&comm_, size, id, rank, &config);
    if (status != ncclInProgress) {
      check_nccl(status, "ncclCommInitRankConfig", __FILE__, __LINE__);
    }
    settle("ncclCommInitRankConfig", deadline_after(timeout_));
  }

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)
  // ncclCommSplit (NCCL 2.18 and later), nonblocking like every call here: every rank of
  // this communicator calls it; the members (`key`: the rank each gets) are given the new
  // communicator, the others (member false: NCCL_SPLIT_NOCOLOR) nullptr.
  std::shared_ptr<NcclComm> split(bool member, int key, int size) {
    cuda::DeviceGuard guard(device_);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t child = nullptr;
    ncclResult_t status = ncclSuccess;
    {
      std::lock_guard lock(mutex_);
      DDP_CHECK(!aborted_ && !destroyed_, who(), ": ncclCommSplit: the communicator was ",
                aborted_ ? "aborted" : "destroyed");
      status = ncclCommSplit(comm_, member ? 0 : NCCL_SPLIT_NOCOLOR, key, &child, &config);
    }
    if (status != ncclInProgress) check_nccl(status, "ncclCommSplit", __FILE__, __LINE__);
    settle("ncclCommSplit", deadline_after(timeout_));  // this communicator's part
    if (!member) return nullptr;
    return std::shared_ptr<NcclComm>(new NcclComm(child, key, size, device_, timeout_));
  }
#endif

  // Note [Communicator teardown]
  // Healthy: ncclCommFinalize flushes what was issued and waits (here: polls, bounded by
  // the timeout) until every rank is done with the communicator, then ncclCommDestroy
  // frees it without blocking. After an abort there is nothing left to free. A finalize
  // that does not settle in time (a peer is gone) falls back to ncclCommAbort.
  // destroy() runs it once, at the group's orderly end (Note [An orderly end],
  // process_group.hpp), or the destructor does when nobody called it.
  ~NcclComm() { destroy(); }
  void destroy() noexcept {
    std::lock_guard lock(mutex_);
    if (comm_ == nullptr || aborted_ || destroyed_) return;
    destroyed_ = true;
    cuda::DeviceGuard guard(device_);
    ncclResult_t state = ncclCommFinalize(comm_);
    const Clock::time_point deadline = deadline_after(timeout_);
    while (state == ncclInProgress && Clock::now() < deadline) {
      std::this_thread::sleep_for(kPollSleep);
      ncclCommGetAsyncError(comm_, &state);
    }
    if (state == ncclSuccess) {
      report_if_failed(ncclCommDestroy(comm_), "ncclCommDestroy");
    } else {
      report_if_failed(ncclCommAbort(comm_), "ncclCommAbort");
    }
  }
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  ncclComm_t get() const { return comm_; }
  int device() const { return device_; }

  // "rank 1/8 (nccl, cuda:1, node07)", for messages: ProcessGroup::who() and the GPU. A
  // sub-group's group says so in its own words (set_who): "rank 1/2 of group [2, 3] (nccl,
  // node07, parent rank 3/4) on cuda:3".
  std::string who() const {
    if (!who_.empty()) return who_;
    return rank_label(rank_, size_, detail::concat("nccl, cuda:", device_, ", ", host_name()));
  }
  // Once, before any collective (the group's constructor).
  void set_who(std::string who) { who_ = std::move(who); }

  // Polls ncclCommGetAsyncError until the last call has finished (the state is no longer
  // ncclInProgress). On an error, or when `deadline` passes first, aborts and throws.
  void settle(const char* call, Clock::time_point deadline) {
    for (;;) {
      const ncclResult_t state = async_error();
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) {
        abort();
        DDP_FAIL(who(), ": ", call, " failed: ", ncclGetErrorString(state), " (",
                 ncclGetLastError(nullptr), ")\nhint: a peer rank may have died; look at "
                 "every rank's output (NCCL_DEBUG=INFO says more)");
      }
      if (Clock::now() >= deadline) {
        abort();
        DDP_FAIL(who(), ": ", call, " did not finish within ", timeout_.count(),
                 " ms; communicator aborted\nhint: every rank must create the group and "
                 "call the same collectives in the same order; raise the timeout if the "
                 "job is only slow");
      }
      std::this_thread::sleep_for(kPollSleep);
    }
  }

  // ncclSuccess, ncclInProgress, or the error that broke the communicator.
  ncclResult_t async_error() {
    std::lock_guard lock(mutex_);
    if (aborted_ || destroyed_) return ncclInvalidUsage;
    ncclResult_t state = ncclSuccess;
    DDP_CHECK_NCCL(ncclCommGetAsyncError(comm_, &state));
    return state;
  }

  // Ends every operation in flight on every GPU stream of this communicator, so that
  // nothing waits forever on a dead peer; the communicator cannot be used afterwards.
  void abort() noexcept {
    std::lock_guard lock(mutex_);
    if (aborted_ || destroyed_ || comm_ == nullptr) return;
    aborted_ = true;
    report_if_failed(ncclCommAbort(comm_), "ncclCommAbort");
  }

  bool aborted() {
    std::lock_guard lock(mutex_);
    return aborted_;
  }
  bool destroyed() {
    std::lock_guard lock(mutex_);
    return destroyed_;
  }

 private:
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)
  // A communicator that ncclCommSplit made: waits until it is ready, as the constructor does.
  NcclComm(ncclComm_t comm, int rank, int size, int device, std::chrono::milliseconds timeout)
      : rank_(rank), size_(size), device_(device), timeout_(timeout), comm_(comm) {
    cuda::DeviceGuard guard(device_);
    settle("ncclCommSplit", deadline_after(timeout_));
  }
#endif

  // Teardown cannot throw (a destructor, or an abort on the way to reporting another
  // error), but a failure there may explain what the job does next: it goes to stderr.
  void report_if_failed(ncclResult_t status, const char* call) const noexcept {
    if (status == ncclSuccess) return;
    std::fprintf(stderr, "ddp: %s: %s failed: %s (%s)\n", who().c_str(), call,
                 ncclGetErrorString(status), ncclGetLastError(nullptr));
  }

  int rank_;
  int size_;
  int device_;
  std::chrono::milliseconds timeout_;
  std::string who_;   // set_who's, or "" for the plain one
  std::mutex mutex_;  // guards aborted_ and every use of comm_ from a Work's thread
  ncclComm_t comm_ = nullptr;
  bool aborted_ = false;
  bool destroyed_ = false;  // freed in order by destroy(): nothing to abort any more
};

// ---- The Work -----------------------------------------------------------------------

// One collective queued on the communication stream. `done` is recorded right after it;
// the collective has finished when the GPU has reached that event.
class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<NcclComm> comm, std::string description, cuda::Event done,
           std::vector<Tensor> tensors, std::chrono::milliseconds timeout)
      : Work(timeout),
        comm_(std::move(comm)),
        description_(std::move(description)),
        done_(std::move(done)),
        tensors_(std::move(tensors)) {}

  // A Work dropped before it finished must not let its tensors' memory be reused too
  // early: the caching allocator hands blocks back out in compute-stream order only
  // (tensor/cuda/caching_allocator.hpp). So the compute stream is made to wait for the
  // collective (on the GPU, not the host) before the tensors are released.
  // A failed collective keeps its tensors too (fail_locked): after an abort the kernel
  // stops, but maybe not before the host has moved on.
  ~NcclWork() override {
    std::lock_guard lock(mutex_);
    if (tensors_.empty()) return;  // finished, ordered by block_stream, or never held any
    try {
      cuda::compute_stream_wait(done_, comm_->device());
    } catch (...) {  // a destructor does not throw; a broken context reports itself later
    }
  }

  // Also called from other threads (the watchdog's, dist/parallel/watchdog.hpp): on a
  // thread's first CUDA call the runtime makes device 0's context current, which would cost
  // every rank memory on GPU 0; the guard makes it the communicator's GPU instead.
  bool is_completed() override {
    std::lock_guard lock(mutex_);
    if (finished_) return true;
    cuda::DeviceGuard guard(comm_->device());
    if (done_.query()) return finish_locked();
    poll_error_locked();
    return finished_;
  }

  // Polls the event and the communicator's error until the deadline. Aborting on a
  // timeout is what makes the timeout safe: otherwise the collective would stay queued
  // on the GPU, and the next one would queue behind it and hang there too.
  using Work::wait;
  void wait(std::chrono::milliseconds timeout) override {
    std::unique_lock lock(mutex_);
    cuda::DeviceGuard guard(comm_->device());  // as in is_completed
    const Clock::time_point deadline = deadline_after(timeout);
    while (!finished_) {
      if (done_.query()) {
        finish_locked();
        break;
      }
      poll_error_locked();
      if (finished_) break;
      if (Clock::now() >= deadline) {
        comm_->abort();
        fail_locked(detail::concat(comm_->who(), ": ", description_, " did not finish within ",
                                   timeout.count(), " ms; communicator aborted\nhint: a peer "
                                   "rank may have died or not called the same collective"));
        break;
      }
      lock.unlock();
      std::this_thread::sleep_for(kPollSleep);
      lock.lock();
    }
    if (error_) std::rethrow_exception(error_);
  }

  std::exception_ptr exception() override {
    std::lock_guard lock(mutex_);
    return error_;
  }

  // Chapter 07's ending of backward: the compute stream waits for `done_` on the GPU, and
  // the host only looks, without waiting, for a failure the communicator already knows.
  // The tensors can go once the compute stream is ordered after the collective: a block the
  // allocator hands out again is then used only by kernels queued behind that wait.
  using Work::block_stream;
  void block_stream(std::chrono::milliseconds) override {
    std::lock_guard lock(mutex_);
    if (!finished_) poll_error_locked();
    if (error_) std::rethrow_exception(error_);
    cuda::compute_stream_wait(done_, comm_->device());
    tensors_.clear();
  }

 private:
  bool finish_locked() {
    finished_ = true;
    tensors_.clear();  // the collective is done with them
    return true;
  }

  void poll_error_locked() {
    if (comm_->aborted()) {
      fail_locked(detail::concat(comm_->who(), ": ", description_, " was cut short: the "
                                 "communicator was aborted after another collective failed "
                                 "or timed out"));
      return;
    }
    const ncclResult_t state = comm_->async_error();
    if (state == ncclSuccess || state == ncclInProgress) return;
    comm_->abort();
    fail_locked(detail::concat(comm_->who(), ": ", description_, " failed: ",
                               ncclGetErrorString(state), " (", ncclGetLastError(nullptr),
                               "); communicator aborted\nhint: look at every rank's output "
                               "for the first failure (NCCL_DEBUG=INFO says more)"));
  }

  void fail_locked(const std::string& message) {
    try {
      DDP_FAIL(message);
    } catch (...) {
      error_ = std::current_exception();
    }
    // After an abort the GPU stops the collective, so the tensors may be dropped once
    // the event has been reached: they stay in tensors_ for the destructor's stream wait.
    finished_ = true;
  }

  std::shared_ptr<NcclComm> comm_;
  std::string description_;  // "all_reduce of 1048576 float32 (sum)"
  cuda::Event done_;
  std::vector<Tensor> tensors_;  // kept alive while the GPU may still read or write them
  std::mutex mutex_;
  bool finished_ = false;
  std::exception_ptr error_;
};

// ---- Meeting through the store ---------------------------------------------------------

// Rendezvous: rank 0 makes the id (it names rank 0's bootstrap socket) and sets it at
// `key`; the others read it. The id is a fixed-size byte array, stored as it is.
std::shared_ptr<NcclComm> comm_through_store(Store& store, const std::string& key, int rank,
                                             int size, int device,
                                             std::chrono::milliseconds timeout) {
  ncclUniqueId id{};
  if (rank == 0) {
    DDP_CHECK_NCCL(ncclGetUniqueId(&id));
    store.set(key, std::string(id.internal, sizeof(id.internal)));
  } else {
    const std::string bytes = store.get(key, timeout);
    DDP_CHECK(bytes.size() == sizeof(id.internal), "make_process_group_nccl: rank ", rank,
              ": the store's \"", key, "\" holds ", bytes.size(), " bytes, expected ",
              sizeof(id.internal), "\nhint: use a fresh store (or key prefix) per group");
    std::memcpy(id.internal, bytes.data(), bytes.size());
  }
  return std::make_shared<NcclComm>(id, rank, size, device, timeout);
}

// ---- The group ----------------------------------------------------------------------

ncclDataType_t nccl_type(DType dtype) {
  return dtype == DType::Float32 ? ncclFloat32 : ncclInt64;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg: return ncclAvg;  // sum, then divide; int64 truncates toward zero
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
  }
  DDP_FAIL("unknown ReduceOp ", static_cast<int>(op));
}

// Note [Ordering the communication stream]
// Collectives run on a stream of their own, so that they can overlap with the kernels
// queued after them on the compute stream (chapter 07 overlaps the all-reduce of one
// bucket with the backward pass of the next). But the gradient being all-reduced is
// produced by kernels on the compute stream that may not have run yet: the host only
// queued them. Waiting on the host (cudaStreamSynchronize) would be correct and slow: the
// CPU would sit idle instead of queuing the next kernels. So an event is recorded on the
// compute stream and the communication stream waits for it, on the GPU
// (cudaStreamWaitEvent): the host returns at once, and the collective starts exactly
// when its input is ready.
class ProcessGroupNccl final : public ProcessGroup {
 public:
  // `prefix`: its keys in the store ("nccl", or a sub-group's "nccl/group0"); `in_parent`:
  // for a sub-group (split).
  ProcessGroupNccl(std::shared_ptr<NcclComm> comm, std::shared_ptr<Store> store, int rank,
                   int size, int device, std::chrono::milliseconds timeout,
                   std::string prefix = "nccl", InParent in_parent = {})
      : ProcessGroup(rank, size, timeout, std::move(in_parent)), device_(device),
        store_(std::move(store)), prefix_(std::move(prefix)), stream_(make_stream(device)),
        comm_(std::move(comm)) {
    if (!ProcessGroup::in_parent().ranks.empty()) {
      comm_->set_who(detail::concat(who(), " on cuda:", device));
    }
  }
  ~ProcessGroupNccl() override { destroy(); }

  std::string backend_name() const override { return "nccl"; }

  // Note [An orderly end] (process_group.hpp): ncclCommFinalize + ncclCommDestroy (Note
  // [Communicator teardown]), then "done" in the store. After an abort, only the store
  // is skipped: there is nothing left to free.
  void destroy() override {
    if (destroyed_) return;
    destroyed_ = true;
    const bool healthy = !comm_->aborted();
    comm_->destroy();
    if (healthy) {
      detail::leave_store(*store_, prefix_, rank(), size(), std::min(timeout(), kLeavePatience));
    }
  }
  void abort() noexcept override { comm_->abort(); }
  std::shared_ptr<Store> store() const override { return store_; }

  std::shared_ptr<Work> all_reduce(Tensor& tensor, ReduceOp op) override {
    check_tensor(tensor, "all_reduce", "tensor");
    const auto count = static_cast<std::size_t>(tensor.numel());
    return launch(detail::concat("all_reduce of ", count, " ", dtype_name(tensor.dtype()), " (",
                                 to_string(op), ")"),
                  "ncclAllReduce", {tensor}, [&](ncclComm_t comm, cudaStream_t stream) {
                    return ncclAllReduce(tensor.raw_data(), tensor.raw_data(), count,
                                         nccl_type(tensor.dtype()), nccl_op(op), comm, stream);
                  });
  }

  std::shared_ptr<Work> broadcast(Tensor& tensor, int root) override {
    check_tensor(tensor, "broadcast", "tensor");
    check_root("broadcast", root);
    const auto count = static_cast<std::size_t>(tensor.numel());
    return launch(detail::concat("broadcast of ", count, " ", dtype_name(tensor.dtype()),
                                 " from rank ", root),
                  "ncclBroadcast", {tensor}, [&](ncclComm_t comm, cudaStream_t stream) {
                    return ncclBroadcast(tensor.raw_data(), tensor.raw_data(), count,
                                         nccl_type(tensor.dtype()), root, comm, stream);
                  });
  }

  std::shared_ptr<Work> all_gather(Tensor& output, const Tensor& input) override {
    check_tensor(input, "all_gather", "input");
    check_tensor(output, "all_gather", "output");
    check_all_gather(output, input);
    const auto count = static_cast<std::size_t>(input.numel());
    return launch(detail::concat("all_gather of ", count, " ", dtype_name(input.dtype()),
                                 " per rank"),
                  "ncclAllGather", {input, output}, [&](ncclComm_t comm, cudaStream_t stream) {
                    return ncclAllGather(input.raw_data(), output.raw_data(), count,
                                         nccl_type(input.dtype()), comm, stream);
                  });
  }

  std::shared_ptr<Work> reduce_scatter(Tensor& output, const Tensor& input,
                                       ReduceOp op) override {
    check_tensor(input, "reduce_scatter", "input");
    check_tensor(output, "reduce_scatter", "output");
    check_reduce_scatter(output, input);
    const auto count = static_cast<std::size_t>(output.numel());
    return launch(detail::concat("reduce_scatter of ", count, " ", dtype_name(input.dtype()),
                                 " per rank (", to_string(op), ")"),
                  "ncclReduceScatter", {input, output},
                  [&](ncclComm_t comm, cudaStream_t stream) {
                    return ncclReduceScatter(input.raw_data(), output.raw_data(), count,
                                             nccl_type(input.dtype()), nccl_op(op), comm,
                                             stream);
                  });
  }

  // NCCL has no barrier: an all-reduce of one element completes only once every rank
  // has contributed, which is a barrier.
  std::shared_ptr<Work> barrier() override {
    if (!barrier_buffer_.defined()) {
      barrier_buffer_ = zeros({1}, {DType::Float32, Device::cuda(device_)});
    }
    return launch("barrier (all_reduce of 1 float32)", "ncclAllReduce", {barrier_buffer_},
                  [&](ncclComm_t comm, cudaStream_t stream) {
                    void* p = barrier_buffer_.raw_data();
                    return ncclAllReduce(p, p, 1, ncclFloat32, ncclSum, comm, stream);
                  });
  }

 protected:
  // new_group (dist/new_group.hpp): ncclCommSplit where NCCL has it (2.18 and later),
  // which every rank of this group joins; before that, a communicator of the members
  // alone, met through the store under "<prefix>/group<N>" (N counting this group's
  // new_group calls), whose id the sub-group's rank 0 makes.
  std::unique_ptr<ProcessGroup> split(const std::vector<int>& ranks) override {
    std::string prefix = prefix_ + "/group" + std::to_string(groups_made_++);
    const auto me = std::find(ranks.begin(), ranks.end(), rank());
    const bool member = me != ranks.end();
    const int index = member ? static_cast<int>(me - ranks.begin()) : -1;
    const int size = static_cast<int>(ranks.size());
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)
    std::shared_ptr<NcclComm> comm = comm_->split(member, std::max(index, 0), size);
#else
    std::shared_ptr<NcclComm> comm =
        member ? comm_through_store(*store_, prefix + "/unique_id", index, size, device_, timeout())
               : nullptr;
#endif
    if (!member) return nullptr;
    return std::make_unique<ProcessGroupNccl>(std::move(comm), store_, index, size, device_,
                                              timeout(), std::move(prefix),
                                              InParent{ranks, rank(), this->size()});
  }
  Device own_device() const override { return Device::cuda(device_); }

 private:
  static cuda::Stream make_stream(int device) {
    cuda::DeviceGuard guard(device);
    return cuda::Stream();
  }

  void check_tensor(const Tensor& t, const char* collective, const char* name) const override {
    ProcessGroup::check_tensor(t, collective, name);
    DDP_CHECK(t.device() == Device::cuda(device_), where(collective), ": ", name, " is ",
              t.describe(), " but this rank's group is on cuda:", device_,
              "\nhint: move it with .to(Device::cuda(", device_, "))");
  }

  // Queues one collective (Note [Ordering the communication stream]) and returns its
  // Work. `call` is the NCCL function's name, for messages; `enqueue` makes the call.
  template <typename Enqueue>
  std::shared_ptr<Work> launch(std::string description, const char* call,
                               std::vector<Tensor> tensors, Enqueue enqueue) {
    DDP_CHECK(!comm_->destroyed(), comm_->who(), ": ", description,
              ": the process group was destroyed first");
    DDP_CHECK(!comm_->aborted(), comm_->who(), ": ", description,
              ": the communicator was aborted after an earlier failure\n"
              "hint: a failed collective leaves the ranks out of step; end the job");
    cuda::DeviceGuard guard(device_);
    cuda::record_on_compute_stream(device_)->wait(stream_);  // the GPU waits, not the host

    const ncclResult_t status = enqueue(comm_->get(), stream_.get());
    if (status != ncclInProgress) check_nccl(status, call, __FILE__, __LINE__);
    // Nonblocking mode: the call may return before the kernel is on the stream; the
    // event below must be recorded after it, so wait (briefly) until it is queued.
    cuda::Event done;
    try {
      comm_->settle(call, deadline_after(timeout()));
    } catch (...) {
      // Aborted: whatever was queued stops, but the caller may free the tensors now, and
      // the compute stream must not reuse their memory before it has (as in ~NcclWork).
      try {
        done.record(stream_);
        cuda::compute_stream_wait(done, device_);
      } catch (...) {  // the settle error says what went wrong first: that one goes up
      }
      throw;
    }
    done.record(stream_);
    return std::make_shared<NcclWork>(comm_, std::move(description), std::move(done),
                                      std::move(tensors), timeout());
  }

  // Teardown, in reverse declaration order: the communicator (Note [Communicator
  // teardown]; Works may keep it alive longer), then the stream. Destroying a stream
  // with work still queued is allowed: CUDA frees it once that work is done.
  int device_;
  std::shared_ptr<Store> store_;  // the rendezvous's; rank 0 serves it (destroy())
  std::string prefix_;            // this group's keys in store_
  int groups_made_ = 0;           // new_group calls on this group so far
  bool destroyed_ = false;
  Tensor barrier_buffer_;  // one float on device_, made by the first barrier()
  cuda::Stream stream_;    // the communication stream
  std::shared_ptr<NcclComm> comm_;
};

}  // namespace

// ---- Construction -------------------------------------------------------------------

std::unique_ptr<ProcessGroup> make_process_group_nccl(std::shared_ptr<Store> store, int rank,
                                                      int size, int cuda_device,
                                                      std::chrono::milliseconds timeout) {
  DDP_CHECK(store != nullptr, "make_process_group_nccl: no store");
  DDP_CHECK(size >= 1 && rank >= 0 && rank < size, "make_process_group_nccl: rank ", rank,
            " of ", size, " is not a rank");
  const int gpus = cuda::device_count();
  DDP_CHECK(cuda_device >= 0 && cuda_device < gpus, "make_process_group_nccl: rank ", rank,
            " on ", host_name(), " asks for cuda:", cuda_device, " but ", gpus,
            " GPU(s) are usable\nhint: one rank per GPU (ddprun --nproc-per-node <GPUs>); "
            "check CUDA_VISIBLE_DEVICES");

  auto comm = comm_through_store(*store, "nccl/unique_id", rank, size, cuda_device, timeout);
  return std::make_unique<ProcessGroupNccl>(std::move(comm), std::move(store), rank, size,
                                            cuda_device, timeout);
}

}  // namespace ddp
