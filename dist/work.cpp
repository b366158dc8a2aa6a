// Work's default block_stream, and FutureWork: a Work finished by a communication thread
// (see dist/work.hpp).
#include "dist/work.hpp"

#include "base/deadline.hpp"
#include "base/error.hpp"

namespace ddp {

// A collective that finishes on the host has nothing to hand the GPU: the host waits.
void Work::block_stream(std::chrono::milliseconds timeout) { wait(timeout); }

bool FutureWork::is_completed() {
  std::lock_guard lock(mutex_);
  return done_;
}

void FutureWork::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!done_cv_.wait_until(lock, deadline_after(timeout), [this] { return done_; })) {
    DDP_FAIL(description_, " did not finish within ", timeout.count(), " ms\n",
             "hint: a peer rank may have died or not called the same collective; raise the "
             "timeout if the job is only slow");
  }
  if (error_) std::rethrow_exception(error_);
}

std::exception_ptr FutureWork::exception() {
  std::lock_guard lock(mutex_);
  return error_;
}

void FutureWork::finish() {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
  }
  done_cv_.notify_all();
}

void FutureWork::fail(std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    error_ = std::move(error);
    done_ = true;
  }
  done_cv_.notify_all();
}

}  // namespace ddp
