// ddp::Work, the handle an asynchronous collective returns. Chapter 05 introduces it.
//
// A collective is queued and its Work returned at once; wait() blocks until it has
// finished (or throws: the collective failed, or the timeout expired first);
// block_stream() only orders the GPU's compute stream after it, where the backend can.
// Given no timeout, either waits the deadline of the group that made the Work
// (ProcessGroup::timeout(), set once from InitOptions::timeout). This file holds the
// interface and FutureWork, the implementation for backends whose collectives finish on a
// host thread (tcp, mpi): that thread calls finish() or fail(). The NCCL backend has its
// own Work that polls a CUDA event and the communicator's async error.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>

namespace ddp {

class Work {
 public:
  virtual ~Work() = default;
  // `timeout`: the group's deadline (ProcessGroup::timeout()), what wait() and
  // block_stream() wait when their caller names no other.
  explicit Work(std::chrono::milliseconds timeout) : timeout_(timeout) {}
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  // True once the collective has finished, successfully or not. Never blocks.
  virtual bool is_completed() = 0;

  // Blocks until the collective has finished. Throws ddp::Error when it failed (the
  // message of the failure) or when `timeout` expires first (naming the collective).
  // wait(): the group's deadline, timeout(). A caller names another only where it means
  // one (a report made while failing, a test that expects a hang).
  void wait() { wait(timeout_); }
  virtual void wait(std::chrono::milliseconds timeout) = 0;

  // The failure, once completed; nullptr when it succeeded or is still running.
  virtual std::exception_ptr exception() = 0;

  // Orders the compute stream of the tensors' GPU after the collective: kernels queued
  // there after this call see its result. Where the backend can do that on the GPU (nccl:
  // the compute stream waits for the collective's done event, cudaStreamWaitEvent), the
  // host does not wait: it goes on queuing kernels, and only a failure already known
  // throws. Where the collective finishes on a host thread (tcp, mpi: FutureWork) this is
  // wait(timeout), which that backend's staging makes enough (its copy back to the GPU is
  // done before the Work finishes). Chapter 07's Reducer ends backward with it.
  // The timeout bounds the host wait where there is one. On nccl nothing waits on the host,
  // so it is not enforced here: a collective that never finishes holds the compute stream,
  // and a later host wait on that stream (reading a loss) would not return. Call
  // wait(timeout) instead where that matters more than the host's head start.
  void block_stream() { block_stream(timeout_); }
  virtual void block_stream(std::chrono::milliseconds timeout);

  // The deadline of the group that made this Work.
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  std::chrono::milliseconds timeout_;
};

// A Work's implementations override wait(timeout) and block_stream(timeout); C++ hides the
// base's wait() and block_stream() behind an override of the same name, so each says
// `using Work::wait;` (and block_stream) to keep them callable on its own type.

// A Work completed by another thread: the backend's communication thread calls
// finish() or fail(ex) exactly once.
class FutureWork final : public Work {
 public:
  FutureWork(std::string description, std::chrono::milliseconds timeout)
      : Work(timeout), description_(std::move(description)) {}

  bool is_completed() override;
  using Work::wait;
  void wait(std::chrono::milliseconds timeout) override;
  std::exception_ptr exception() override;

  void finish();
  void fail(std::exception_ptr error);

  const std::string& description() const { return description_; }

 private:
  std::string description_;  // "all_reduce of 1048576 float32 (sum)", for messages
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

}  // namespace ddp
