// ddp::WatchedGroup, a process group that keeps a ledger of its collectives and a
// watchdog over them: a hang ends, within the group's timeout and a few seconds, with one
// diagnosis naming the rank and the collective at fault. Chapter 08.
//
//   init.timeout = std::chrono::seconds(60);  // the group's deadline, and the watchdog's
//   std::unique_ptr<ddp::ProcessGroup> group = ddp::watch(ddp::init_process_group(init));
//   { ddp::ledger::Label step("step 17"); group->all_reduce(t)->wait(); }
//   group->barrier()->wait();
//   group->destroy();
//
// It forwards every collective to the group it wraps (any backend) and records it
// (dist/parallel/ledger.hpp). It does not retry, recover or restart: a watched group that
// fails ends the process, with exit code kExitWatchdog (base/exit_codes.hpp).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "dist/parallel/ledger.hpp"
#include "dist/process_group.hpp"
#include "dist/store.hpp"

namespace ddp {

// The deadline is not an option: a WatchedGroup's timeout() is the wrapped group's
// (InitOptions::timeout). A collective still in flight that long after it was called has
// hung; the watchdog and the wrapped group's own wait see the same deadline, and whichever
// notices first, the failure takes the one path of Note [Failing once].
struct WatchOptions {
  // Where the ranks' ledgers meet; null: the wrapped group's store() (none for mpi:
  // each rank then prints its own ledger, and no diagnosis compares them).
  std::shared_ptr<Store> store;
  std::string prefix = "ledger";  // store keys "<prefix>/tail/<rank>", ...
  std::size_t tail_length = 8;    // entries each rank publishes
  // How long rank 0 waits for the others' tails, and the others for rank 0's diagnosis.
  std::chrono::milliseconds gather{3000};
  // How often the watchdog looks at the collectives in flight, and (every 5th time) at
  // the store: another rank gave up, two processes claim one rank, the store is gone.
  // (A store that is frozen rather than gone, rank 0 stopped with SIGSTOP, holds such a
  // look for up to the store's own timeout: the hang then ends after up to twice it.)
  std::chrono::milliseconds poll{100};
  // Debug mode (as TORCH_DISTRIBUTED_DEBUG=DETAIL; also on when DDP_DISTRIBUTED_DEBUG is
  // DETAIL): before each collective the ranks all-gather its fingerprint (sequence
  // number, op, dtype, count) over the wrapped group and, if they differ, fail at once
  // with the disagreement, instead of when the mismatched collective hangs or breaks.
  // One extra small all-gather per collective: for finding a bug, not for training.
  // tcp and mpi only (the fingerprint is a CPU tensor); watch() refuses it on nccl.
  bool check_calls = false;
};

// Note [Failing once]
// A hang can be noticed in three places at nearly the same moment: the caller's
// Work::wait (the wrapped group's own error or timeout), the watchdog thread (the
// deadline passed; a collective failed; another rank gave up, as the store says), and a
// rank whose store has vanished. All three call fail(), which lets the first caller
// through and parks the rest until the process ends. The first:
//   1. prints "ddp watchdog: rank R/W (backend, host), pid P: <why>" at once (a launcher may stop
//      the job soon after the first rank exits: this line is never lost);
//   2. publishes its ledger tail and "<prefix>/abort" (so that every rank, also one
//      busy outside any collective, gives up within a poll);
//   3. rank 0 waits for the tails (at most `gather`), prints diagnose_desync's one
//      sentence and each rank's place, and sets "<prefix>/diagnosed"; the others wait
//      for that key (at most `gather` + 2 s) so that the launcher does not stop rank 0
//      while it gathers. Without a store (mpi), or when it is gone, every rank prints
//      its own tail instead;
//   4. aborts the wrapped group, flushes stderr, and std::_Exit(exit_code): no
//      destructor runs, none can wait on a peer that is gone.
class WatchedGroup final : public ProcessGroup {
 public:
  using Clock = std::chrono::steady_clock;

  // Publishes this process ("node07, pid 4711") in the store and starts the watchdog.
  WatchedGroup(std::unique_ptr<ProcessGroup> inner, WatchOptions options);
  // destroy(), when nobody called it. Never throws.
  ~WatchedGroup() override;

  std::string backend_name() const override { return inner_->backend_name(); }

  // Each records an entry (op, dtype, element count, ledger::current_label()), forwards
  // to the wrapped group and returns a Work whose wait() and block_stream() end the
  // process through fail() when the collective fails or times out: they never throw
  // a collective's failure back to the caller.
  std::shared_ptr<Work> all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::Sum) override;
  std::shared_ptr<Work> broadcast(Tensor& tensor, int root) override;
  std::shared_ptr<Work> all_gather(Tensor& output, const Tensor& input) override;
  std::shared_ptr<Work> reduce_scatter(Tensor& output, const Tensor& input,
                                       ReduceOp op = ReduceOp::Sum) override;
  std::shared_ptr<Work> barrier() override;

  // Stops the watchdog (after a final barrier nothing is in flight), then destroys the
  // wrapped group (Note [An orderly end], process_group.hpp).
  void destroy() override;
  void abort() noexcept override { inner_->abort(); }
  std::shared_ptr<Store> store() const override { return store_; }

  const ledger::Ledger& ledger() const;
  ProcessGroup& inner() { return *inner_; }

  // Note [Failing once]. For the caller too: a program that hits its own error can end
  // through here, and every rank then says where it was.
  [[noreturn]] void fail(const std::string& why, int exit_code);

  // The shared part: Works hold it, so that one waited on after its group is gone
  // still finds the ledger (and the watchdog's verdict).
  struct State;

 private:
  // Records a collective on `t` (null: barrier) in the ledger, checks it (check_calls),
  // and returns its sequence number.
  std::uint64_t record(ledger::Op op, const Tensor* t);
  std::shared_ptr<Work> track(std::uint64_t seq, std::shared_ptr<Work> work);
  // options.check_calls: all-gathers entry `seq`'s fingerprint; fail()s on a mismatch.
  void check_call(std::uint64_t seq);
  void watch_loop();
  void check_store();

  std::unique_ptr<ProcessGroup> inner_;
  WatchOptions options_;
  std::shared_ptr<Store> store_;  // options.store or inner's; null for mpi
  std::shared_ptr<State> state_;

  struct InFlight {
    std::uint64_t seq;
    std::shared_ptr<Work> work;
    Clock::time_point deadline;
  };
  std::mutex mutex_;  // guards in_flight_ and stop_
  std::condition_variable wake_;
  std::deque<InFlight> in_flight_;
  bool stop_ = false;
  std::atomic<bool> destroyed_ = false;
  std::thread thread_;
};

// Wraps `group` in a WatchedGroup: the usual way in.
std::unique_ptr<WatchedGroup> watch(std::unique_ptr<ProcessGroup> group,
                                    WatchOptions options = {});

}  // namespace ddp
