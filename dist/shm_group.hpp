// ddp::ShmGroup, collectives through one shared-memory segment for ranks on one host: what
// ProcessGroupTcp runs instead of its ring when every rank of the group is on this
// machine (DDP_TCP_SHM=0 turns it off). Chapter 05. Every rank copies its input into its
// slot, reduces its own slice over all slots, and reads the whole result back (Note
// [Shared-memory all-reduce] in shm_group.cpp). It moves bytes and waits on flags; it
// owns no thread and no socket, so a node-local group can use it as it is. Host memory,
// float32 and int64 only; nothing across hosts.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dist/process_group.hpp"  // ReduceOp
#include "dist/store.hpp"

namespace ddp {

class ShmGroup {
 public:
  using Clock = std::chrono::steady_clock;
  // One collective, for the waits: its deadline, and what to call it in an error
  // ("all_reduce of 1001 float32 (sum)").
  struct Call {
    Clock::time_point deadline;
    std::string what;
  };
  // Given a rank that failed first, its report (or ""): quoted when it stops a collective.
  using ReportOf = std::function<std::string(int rank)>;

  // Every rank of the group calls this with the same prefix once its store keys
  // "<prefix>/host/<rank>" are published. `wanted`: this rank's vote (DDP_TCP_SHM, and
  // whatever else the caller rules out). Returns a group when every rank voted yes and
  // all run on this host under the same boot and pid namespace (host name, /proc boot_id,
  // /proc/self/ns/pid), at most 254 of them; null otherwise, on every rank alike (rank 0
  // decides and says so in the store). Throws ddp::Error naming the rank that did not take
  // part by `deadline`, or, on every rank, why rank 0 could not make the segment.
  static std::unique_ptr<ShmGroup> open_if_one_host(Store& store, const std::string& prefix,
                                                    int rank, int size, bool wanted,
                                                    Clock::time_point deadline, std::string who,
                                                    ReportOf report_of);
  // Whether DDP_TCP_SHM lets this rank use shared memory (unset, or anything but "0").
  static bool wanted_by_env();

  ~ShmGroup();
  ShmGroup(const ShmGroup&) = delete;
  ShmGroup& operator=(const ShmGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // data: (n,) on every rank -> the reduction over ranks, on every rank. T: float,
  // std::int64_t. Avg divides the sum (int64: truncating toward zero).
  template <typename T>
  void all_reduce(T* data, std::int64_t n, ReduceOp op, const Call& call);
  // in: (size() * n,) -> out: (n,), block rank() of the reduction.
  template <typename T>
  void reduce_scatter(const T* in, T* out, std::int64_t n, ReduceOp op, const Call& call);
  // in: `bytes` on every rank -> out: size() * bytes, rank r's at r * bytes.
  void all_gather(const std::byte* in, std::byte* out, std::size_t bytes, const Call& call);
  // data: `bytes`; root's copied to every rank.
  void broadcast(std::byte* data, std::size_t bytes, int root, const Call& call);
  // Returns once every rank has entered it.
  void barrier(const Call& call);

  // Stops every rank's collective, ours included: they fail naming `by` (this rank when
  // it fails or is aborted), quoting report_of(by). A collective that throws does not
  // call it: its owner does, once it has published its report. Safe from any thread;
  // never throws.
  void abort(int by) noexcept;

  // Each slot is this big per buffer; a tensor larger than that goes through in chunks
  // (kBuffers buffers a rank, used in turn: Note [Shared-memory all-reduce], which says
  // why so small).
  static constexpr std::size_t kBufferBytes = 64 << 10;
  static constexpr std::size_t kBuffers = 3;
  // All-reduces of at most this many bytes take one barrier: every rank reduces the
  // whole tensor from all slots itself (Note [Shared-memory all-reduce]).
  static constexpr std::size_t kSmallBytes = 32 << 10;
  // How long a wait looks at its flag (yielding the core between looks) before it
  // sleeps on a futex, and how long each futex sleep lasts before the wait looks at the
  // deadline, an abort and the peers' processes (Note [Waiting in shared memory]).
  static constexpr std::chrono::microseconds kSpin{50};
  static constexpr std::chrono::milliseconds kSleepSlice{20};

 private:
  struct Header;
  ShmGroup(int rank, int size, std::string who, ReportOf report_of);
  void map(int fd, std::size_t bytes);
  // Where rank r's pid and barrier count live, in the header.
  struct RankLine;
  RankLine& rank_line(int r) const;
  // Rank r's slot in buffer 0, 1 or 2.
  std::byte* slot(int buffer, int r) const;
  // Enters a barrier and waits until every rank has: all writes before it, by any rank,
  // are then visible to all. Throws if the group was stopped meanwhile (check_abort).
  void arrive_and_wait(const Call& call, bool check_abort = true);
  // Past a barrier: throws if the group was aborted meanwhile.
  void passed(const Call& call);
  // The first barrier of a collective, with its check (Note [Collective check]).
  void enter(const Call& call);
  [[noreturn]] void fail(const Call& call, const std::string& message);
  // Throws if the group was aborted (when `stopped`: the caller read the abort word), the
  // deadline passed or (when `look_at_peers`) a peer died.
  void check_waiting(const Call& call, std::uint32_t arrivals, bool look_at_peers, bool stopped);
  std::string peer_name(int r) const;
  int next_buffer() { return static_cast<int>(uses_++ % kBuffers); }

  int rank_;
  int size_;
  std::string who_;
  ReportOf report_of_;
  std::vector<std::string> hosts_;  // for messages
  std::byte* base_ = nullptr;
  std::size_t bytes_ = 0;
  Header* header_ = nullptr;
  std::byte* data_ = nullptr;
  std::uint32_t arrivals_ = 0;     // barriers this rank has entered
  std::uint64_t uses_ = 0;         // buffer uses so far: the next takes buffer uses_ % 3
  std::uint64_t collectives_ = 0;  // collectives entered: the next one's line is % 2
};

}  // namespace ddp
