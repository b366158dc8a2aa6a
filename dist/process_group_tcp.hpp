// ddp::ProcessGroupTcp, collectives over plain TCP sockets, written from scratch: the
// ring all-reduce with nothing hidden. Chapter 05.
//
// The ranks sit on a ring: each one sends to its right neighbour (rank + 1) and receives
// from its left (rank - 1), one connection each way, made through the store at start-up.
// all_reduce is a reduce-scatter followed by an all-gather around that ring (Note [Ring
// schedule]); one communication thread runs the queued collectives in order, moving
// bytes both ways at once (Note [One stream]). Small all-reduces take a path of half the
// steps (Note [Small all-reduce]). DDP_TCP_LINK makes the links behave like a slower
// network, for chapter 07 (dist/link_emulation.hpp). DDP_TCP_RING=plain runs float32 sums
// through the plain ring of dist/plain_ring.hpp instead, to compare. When every rank is on
// this host, the collectives go through shared memory instead of the ring (dist/shm_group.hpp,
// Note [Shared-memory all-reduce]); DDP_TCP_SHM=0 keeps the ring. CUDA tensors are staged through
// host memory: this backend teaches the algorithm; nccl (process_group_nccl.hpp) is the
// one for GPUs. No multiple rings, no trees, no compression.
//
// Defined in process_group_tcp.cpp (the queue, its thread, the collectives), and beside
// it tcp_ring_connect.cpp, pipelined_ring.cpp (run_ring) and tcp_ring_failures.cpp.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dist/link_emulation.hpp"
#include "dist/plain_ring.hpp"  // RingLinks
#include "dist/process_group.hpp"
#include "dist/ring_schedule.hpp"
#include "dist/shm_group.hpp"
#include "dist/socket.hpp"
#include "dist/store.hpp"
#include "dist/work.hpp"

namespace ddp {

// ---- The process group ----------------------------------------------------------------

class ProcessGroupTcp final : public ProcessGroup {
 public:
  // Connects the ring through `store` (keys "<prefix>/addr/<rank>", "<prefix>/host/<rank>");
  // every rank of the group must construct it with the same prefix, and another group on
  // the same store needs a prefix of its own: the first group's keys stay (an old
  // address would be tried until the timeout). `timeout` bounds the set-up and each
  // collective. Throws ddp::Error naming the rank that never arrived. `link`: pace every
  // collective's bytes as over that link (dist/link_emulation.hpp); by default whatever
  // DDP_TCP_LINK says, which is usually nothing (plain loopback or network speed).
  // `in_parent`: for a sub-group, made by new_group through split().
  ProcessGroupTcp(std::shared_ptr<Store> store, int rank, int size,
                  std::chrono::milliseconds timeout = kDefaultTimeout, std::string prefix = "tcp",
                  std::optional<LinkEmulation> link = link_emulation_from_env(),
                  InParent in_parent = {});
  // destroy(), when nobody called it. Never throws; on rank 0 an orderly end waits for
  // the others' "done" (at most kLeavePatience, Note [An orderly end]).
  ~ProcessGroupTcp() override;

  // Note [An orderly end] (process_group.hpp): fails what is still queued, stops the
  // communication thread, closes both ring links (a plain FIN: nothing is left unread
  // after a final barrier, so no peer sees a reset), then, if the group never failed
  // and nothing was queued or running (an orderly end), says "done" in the store and,
  // on rank 0, waits for the others (at most min(timeout, kLeavePatience)). Otherwise it
  // skips the store: the peers are failing too, and nobody waits for them.
  void destroy() override;
  // Shuts both ring links: the communication thread and both neighbours stop waiting.
  void abort() noexcept override;
  std::shared_ptr<Store> store() const override { return store_; }

  std::string backend_name() const override { return "tcp"; }
  // One line for a program's banner: "tcp", "tcp (shared memory)", or "tcp (emulated link
  // 1 Gbit/s, 50 us)".
  std::string description() const;
  // Whether the collectives go through shared memory (every rank on this host, and
  // DDP_TCP_SHM not 0; never with an emulated link or the plain ring).
  bool uses_shared_memory() const { return shm_ != nullptr; }
  // The emulated link, when there is one.
  std::optional<LinkEmulation> link() const;

  std::shared_ptr<Work> all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::Sum) override;
  std::shared_ptr<Work> broadcast(Tensor& tensor, int root) override;
  std::shared_ptr<Work> all_gather(Tensor& output, const Tensor& input) override;
  std::shared_ptr<Work> reduce_scatter(Tensor& output, const Tensor& input,
                                       ReduceOp op = ReduceOp::Sum) override;
  std::shared_ptr<Work> barrier() override;

  // The collectives' bytes this rank has sent to its right neighbour so far, headers not
  // counted (Note [Collective check] in pipelined_ring.cpp adds 128 bytes a collective):
  // what the cost model's byte counts predict (dist/parallel/cost_model.hpp, LinkBytes).
  std::int64_t payload_bytes_sent() const { return payload_sent_.load(); }

  // Where this rank listens for its left neighbour ("127.0.0.1:40123").
  const std::string& address() const { return address_; }

  // How long the communication thread sleeps in poll() before it looks at the stop flag.
  static constexpr std::chrono::milliseconds kPollSlice{100};
  // When the right neighbour closed and left no report, how long the failing rank reads
  // out its left link to see whether that one is closing too (see fail_peer).
  static constexpr std::chrono::milliseconds kDrainPatience{250};
  // Received bytes of a reduce step land in a scratch buffer this big before they are
  // combined into the tensor: big enough that one recv() takes all that has arrived
  // (see Note [Scratch size] in pipelined_ring.cpp for why that beats staying in cache).
  static constexpr std::size_t kScratchBytes = 4 << 20;
  // One send() passes on at most this much, so that a long send never keeps the loop
  // from receiving for milliseconds (Note [Send slices] in pipelined_ring.cpp).
  static constexpr std::size_t kSendSliceBytes = 512 << 10;
  // All-reduces of S bytes with (size()-1)·S at most this take the path of fewer steps
  // (Note [Small all-reduce] in process_group_tcp.cpp); its size() copies fit in scratch_.
  static constexpr std::size_t kSmallAllReduceBytes = 64 << 10;
  static_assert(2 * kSmallAllReduceBytes <= kScratchBytes);
  // Whether an all-reduce of `bytes` over `size` ranks takes that path.
  static bool takes_small_all_reduce(std::size_t bytes, int size) {
    return bytes * static_cast<std::size_t>(size - 1) <= kSmallAllReduceBytes;
  }
  // How long a collective on that path retries its sockets before it sleeps in poll(),
  // and the communication thread looks for the next collective before it sleeps on the
  // queue (Note [Spin, then sleep] in pipelined_ring.cpp).
  static constexpr std::chrono::microseconds kSpin{50};

 protected:
  // new_group (dist/new_group.hpp): the members build a ring of their own over this
  // group's store, under the prefix "<prefix>/group<N>", N counting this group's
  // new_group calls (the same on every rank, since every rank makes them in the same
  // order), with this group's timeout and emulated link. The others only count.
  std::unique_ptr<ProcessGroup> split(const std::vector<int>& ranks) override;

 private:
  // ProcessGroup's checks, and the dtypes this backend reduces: float32 and int64.
  void check_tensor(const Tensor& t, const char* collective, const char* name) const override;

  using Clock = std::chrono::steady_clock;
  struct Task {
    std::shared_ptr<FutureWork> work;
    std::string description;    // "all_reduce of 1001 float32 (sum)"
    std::function<void()> run;  // on the communication thread
  };

  // ---- set-up (tcp_ring_connect.cpp) and the queue ----
  void connect_ring(Clock::time_point deadline);
  void connect_right(Clock::time_point deadline);
  void accept_left(const Socket& listener, Clock::time_point deadline);
  std::shared_ptr<Work> enqueue(std::string description, std::function<void()> run);
  void communication_loop();

  // ---- the collectives, on host memory, on the communication thread ----
  // What one rank does in a ring collective (Note [One stream] in pipelined_ring.cpp): send
  // `first`, receive `steps` in order (each reduced into its memory with `op`, or copied
  // over it), and pass on what it received, up to `send_total` elements in all.
  template <typename T>
  struct RingPlan {
    struct Piece {
      T* data = nullptr;
      std::int64_t n = 0;
      bool reduce = false;
    };
    Piece first;
    std::vector<Piece> steps;
    std::int64_t send_total = 0;
    ReduceOp op = ReduceOp::Sum;
    bool spin = false;  // retry for kSpin before poll() (Note [Spin, then sleep])
    // The usual case: everything received is passed on, except the last step's piece.
    void send_all_but_last_step() {
      send_total = first.n;
      for (std::size_t i = 0; i + 1 < steps.size(); ++i) send_total += steps[i].n;
    }
  };
  template <typename T>
  void ring_all_reduce(T* data, std::int64_t n, ReduceOp op);
  // The plain ring (dist/plain_ring.hpp) over this group's two links: DDP_TCP_RING=plain,
  // for float32 sums and averages, and (chapter 09) all-gathers.
  RingLinks plain_links();
  void plain_all_reduce(float* data, std::int64_t n, ReduceOp op);
  void plain_reduce_scatter(float* data, std::int64_t n, ReduceOp op);
  template <typename T>
  void small_all_reduce(T* data, std::int64_t n, ReduceOp op);
  template <typename T>
  void ring_all_gather(T* data, std::int64_t n, bool spin = false);
  template <typename T>
  void ring_reduce_scatter(T* data, std::int64_t n, ReduceOp op);
  void ring_broadcast(std::byte* data, std::size_t bytes, int root);

  // ---- the engine under them (pipelined_ring.cpp) ----
  // Runs one rank's part of `plan`; there for T = float, std::int64_t and std::byte.
  template <typename T>
  void run_ring(const RingPlan<T>& plan);
  template <typename T>
  class RingStreams;  // run_ring's two byte streams and the steps that move them
  // The left neighbour's header (Note [Collective check]) differs from ours.
  void check_header(const std::byte* theirs, const std::byte* ours) const;

  // ---- failures (tcp_ring_failures.cpp) ----
  // The first failure: the group is broken for good; a report for the others in the store.
  void on_failure(const std::string& message);
  // How a neighbour let a step down: it closed the connection, or it fell silent.
  enum class PeerFault { Closed, Silent };
  [[noreturn]] void fail_peer(bool left, PeerFault fault, const std::string& what);
  // Whether the left neighbour closes its link within `patience`, reading (and dropping)
  // the bytes in front of its close. Only for a group that has failed.
  bool left_closes_within(std::chrono::milliseconds patience);
  // The rank we receive from (left) or send to (right) on the ring.
  int neighbour(bool left) const { return (rank() + (left ? size() - 1 : 1)) % size(); }
  // "rank 2 (left neighbour of rank 3, 127.0.0.1:4711, node07, pid 4711)", for messages.
  std::string neighbour_name(bool left) const;

  std::shared_ptr<Store> store_;  // kept alive: the group reads failure reports from it
  std::string prefix_;
  int groups_made_ = 0;  // new_group calls on this group so far: the next sub-group's N
  std::string address_;
  std::string left_address_;
  std::string right_address_;
  std::string left_process_;   // "node07, pid 4711", for messages; "" when unknown
  std::string right_process_;
  std::string right_host_;  // the right neighbour's host name
  std::atomic<std::int64_t> payload_sent_{0};  // payload_bytes_sent()
  Socket left_;   // receive only: from rank - 1
  Socket right_;  // send only: to rank + 1
  PageBuffer scratch_;  // page-aligned: Note [4K aliasing] in pipelined_ring.cpp
  std::optional<LinkEmulation> link_config_;  // what was asked for; sub-groups get it too
  std::unique_ptr<EmulatedLink> link_;  // to the right; null: the plain socket
  // Every rank on this host: the collectives' bytes go through here, not the ring (whose
  // links stay connected: they close when a peer dies, and the ring is there to compare)
  std::unique_ptr<ShmGroup> shm_;
  // What the running collective tells shm_'s waits: its deadline and description.
  ShmGroup::Call shm_call() const { return {current_deadline_, current_}; }
  // DDP_TCP_RING=plain: float32 sum/average all-reduces and reduce-scatters, and float32
  // all-gathers, take the plain ring (plain_links)
  bool plain_ring_ = false;

  // What the communication thread is doing, for error messages.
  std::string current_;                // description of the running collective
  std::uint64_t sequence_ = 0;         // its number in this group: 0, 1, 2, ...
  Clock::time_point current_deadline_;
  std::string broken_;                 // the first failure; later collectives fail fast

  std::mutex mutex_;
  std::condition_variable queue_cv_;
  std::deque<Task> queue_;
  std::atomic<std::size_t> queued_ = 0;  // queue_.size(), read without the mutex
  std::atomic<bool> stop_ = false;
  bool busy_ = false;  // a collective is running (guarded by mutex_)
  std::atomic<bool> destroyed_ = false;
  std::atomic<bool> aborted_ = false;  // abort() was called: destroy() is no orderly end
  std::thread thread_;
};

}  // namespace ddp
