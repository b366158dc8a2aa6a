// ShmGroup (see shm_group.hpp), in reading order: the segment's layout, the set-up (who
// decides, creating, mapping, unlinking), the waits, and the collectives. Chapter 05.
#include "dist/shm_group.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string_view>

#include "base/errno_text.hpp"
#include "base/error.hpp"
#include "dist/host_reduce.hpp"
#include "dist/job_token.hpp"
#include "dist/launch_env.hpp"  // host_name
#include "dist/shm_name.hpp"

namespace ddp {

// Note [Shared-memory all-reduce]
// -------------------------------
// On one host the ring's bytes go through the kernel: send() copies them from the tensor
// into a socket buffer, recv() from there into the neighbour's memory, with a system call
// and often a wake-up each time. Shared memory needs neither. Rank 0 creates one segment
// in /dev/shm, the others map it, and each rank has a slot in it, three times (three
// buffers, used in turn):
//
//   | header: barrier flags, pids | buffer 0: slot 0 .. slot size-1 | buffer 1 | buffer 2 |
//
// An all-reduce of a chunk of at most kBufferBytes is then, for every rank at once:
//   1. copy its chunk into its slot;                                   barrier
//   2. reduce its slice (1/size of the chunk) over all slots, in rank order, into slot
//      0's slice, dividing for Avg: a reduce-scatter, the ranks in parallel;   barrier
//   3. copy slot 0, the whole result, out into its tensor: an all-gather.
// Each byte is copied in once, read once by the rank that reduces it, and copied out once
// per rank: memory copies at memory speed instead of two kernel copies per ring step.
// Chunks overlap, so that each costs one barrier, not two: the barrier after step 2 of
// chunk k is the one after step 1 of chunk k+1. Between two barriers a rank copies out
// chunk k-1, reduces its slice of chunk k and copies in chunk k+1, each in a buffer of
// its own. A buffer is written again three uses later, after a barrier that every rank
// enters only once it has read all it needed of it (reads of a chunk end one barrier
// after the barrier that follows its writes). The collectives of one reduce step (small
// all-reduces, all_gather, broadcast, reduce_scatter) follow the same rule with room to
// spare. Every element is reduced by one rank in rank order, so all ranks get the same
// bits (not the ring's bits: it adds in another order; float sums agree with it within
// rounding).
//
// Why chunks of 64 KiB (kBufferBytes), not 1 MiB: a chunk is copied in, read by the rank
// that reduces it, and copied out by every rank, all within microseconds; at 64 KiB it is
// still in the caches for the second and third touch, at 1 MiB it has gone to memory in
// between. On the 2-core dev box (busy with other jobs, so roughly), 1 MiB chunks took
// 1.2 to 5 times as long as 64 KiB ones at 1 and 16 MiB, 2 and 4 ranks; 16 and 32 KiB
// were mostly slower again: more chunks are more barriers.
//
// Up to kSmallBytes every rank instead reduces the whole tensor from all slots itself,
// in rank order: size() times the reads, but one barrier, and a barrier is what a small
// all-reduce costs. reduce_scatter is steps 1 and 2 alone, all_gather steps 1 and 3,
// broadcast the root's copy and step 3, barrier a barrier.
//
// The segment is unlinked as soon as every rank has mapped it (the first barrier): the
// mapping lives on while a process does, and nothing is left in /dev/shm by a crash
// after set-up. A crash during set-up can leave one: its name holds the creator's pid
// (dist/shm_name.hpp), and the next group's set-up, or ddprun at the end of a job,
// removes every one whose creator is dead.
//
// Note [Waiting in shared memory]
// -------------------------------
// A barrier is a counter and a generation number in the header. Each rank adds one to
// the counter; the last to arrive resets it and increments the generation; the others
// wait for the generation to change. Waiting: first look at it for kSpin, yielding the
// core between looks (on a host with fewer cores than ranks, the rank we wait for may
// need ours to get there), then sleep in futex(FUTEX_WAIT) on the generation's word, in
// slices of kSleepSlice. The last arriver calls futex(FUTEX_WAKE) only when someone
// sleeps (a count of sleepers beside the generation, both seq_cst: either the sleeper
// sees the new generation, or the waker sees the sleeper). Between slices a sleeper
// looks at three things, so that no wait outlasts the group's timeout or a dead peer:
// the deadline (then it names the ranks that did not arrive, from their counters of
// barriers entered); the abort word (a rank that failed sets it, and wakes everyone);
// and the processes of the ranks it waits for (pids in the header: one that is gone, or
// a zombie, died). The futexes are shared ones (no FUTEX_PRIVATE_FLAG): the ranks are
// processes that map the same page.

// ==== The segment =========================================================================

// At the start of the segment; every field written by many ranks on a cache line of its
// own. Zero-filled by ftruncate; read and written through std::atomic_ref only.
struct ShmGroup::Header {
  alignas(64) std::uint32_t magic;
  std::uint32_t size;
  alignas(64) std::uint32_t count;       // arrivals at the current barrier
  alignas(64) std::uint32_t generation;  // barriers completed (the futex word)
  std::uint32_t sleepers;                // ranks in FUTEX_WAIT on it
  alignas(64) std::uint32_t aborted_by;  // 0, or the rank that stopped the group + 1
};
// Then, at kRanksOffset, one of these per rank.
struct alignas(64) ShmGroup::RankLine {
  std::int32_t pid;
  std::uint32_t arrivals;  // barriers this rank has entered
  std::uint32_t stopped;   // 1: it failed, or was aborted (and may exit: it did not die)
  // The collective this rank is in ("all_reduce of 7 float32 (sum)"), for Note [Collective
  // check]; two, used by turns, as the buffers are.
  char what[2][120];
};

namespace {

constexpr std::uint32_t kMagic = 0x4d485344;  // "DSHM"
constexpr std::size_t kRanksOffset = 512;
constexpr std::size_t kHeaderBytes = 64 << 10;  // header and rank lines of up to 254 ranks
// What rank 0 publishes in place of the segment's name when it could not make it.
constexpr std::string_view kSetUpFailed = "!failed: ";

template <typename T>
std::atomic_ref<T> at(T& word) {
  return std::atomic_ref<T>(word);
}

long futex(std::uint32_t* word, int op, std::uint32_t value, const timespec* timeout) {
  return ::syscall(SYS_futex, word, op, value, timeout, nullptr, 0);
}

// A process that is gone, or a zombie (dead, not yet reaped by its parent).
bool process_dead(std::int32_t pid) {
  if (pid <= 0) return false;  // not known yet
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const std::size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() &&
         (line[paren + 2] == 'Z' || line[paren + 2] == 'X');
}

std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

// "pid:[4026531836]": which pid namespace this process sees ("" where /proc cannot say).
std::string pid_namespace() {
  char target[64] = {};
  const ssize_t n = ::readlink("/proc/self/ns/pid", target, sizeof target - 1);
  return n > 0 ? std::string(target, static_cast<std::size_t>(n)) : std::string();
}

std::size_t segment_bytes(int size) {
  return kHeaderBytes +
         ShmGroup::kBuffers * static_cast<std::size_t>(size) * ShmGroup::kBufferBytes;
}

}  // namespace

bool ShmGroup::wanted_by_env() {
  const char* v = std::getenv("DDP_TCP_SHM");
  return v == nullptr || std::string(v) != "0";
}

// ==== Set-up ==============================================================================

ShmGroup::ShmGroup(int rank, int size, std::string who, ReportOf report_of)
    : rank_(rank), size_(size), who_(std::move(who)), report_of_(std::move(report_of)) {}

ShmGroup::~ShmGroup() {
  if (base_ != nullptr) ::munmap(base_, bytes_);
}

void ShmGroup::map(int fd, std::size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  DDP_CHECK(p != MAP_FAILED, who_, ": mmap of the shared-memory segment (", bytes,
            " bytes) failed: ", errno_text(errno));
  base_ = static_cast<std::byte*>(p);
  bytes_ = bytes;
  header_ = reinterpret_cast<Header*>(base_);
  data_ = base_ + kHeaderBytes;
}

// Votes in the store; rank 0 counts them, creates the segment and publishes its name (or
// "-": no shared memory); the others map it; all meet at a first barrier, after which
// rank 0 unlinks it.
std::unique_ptr<ShmGroup> ShmGroup::open_if_one_host(Store& store, const std::string& prefix,
                                                     int rank, int size, bool wanted,
                                                     Clock::time_point deadline, std::string who,
                                                     ReportOf report_of) {
  static_assert(sizeof(Header) <= kRanksOffset);
  // The header holds a line per rank: a group larger than that keeps the ring (every
  // rank sees the same size, so every rank votes no).
  const bool fits =
      kRanksOffset + static_cast<std::size_t>(size) * sizeof(RankLine) <= kHeaderBytes;
  auto remaining = [deadline] {
    return std::max(std::chrono::milliseconds(1),
                    std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  };
  // One machine, one boot, one pid namespace (the peers' pids are looked at while waiting).
  const std::string vote =
      wanted && fits ? host_name() + " " + boot_id() + " " + pid_namespace() : "-";
  store.set(prefix + "/shm_vote/" + std::to_string(rank), vote);
  const std::string name_key = prefix + "/shm";
  std::string name;
  std::unique_ptr<ShmGroup> group(new ShmGroup(rank, size, std::move(who), std::move(report_of)));
  const std::size_t bytes = segment_bytes(size);
  int fd = -1;
  if (rank == 0) {
    bool one_host = wanted;
    for (int r = 0; r < size; ++r) {
      const std::string theirs = store.get(prefix + "/shm_vote/" + std::to_string(r), remaining());
      one_host = one_host && theirs == vote;
    }
    if (one_host) {
      detail::remove_dead_shm_segments();  // left by a crash during an earlier set-up
      std::random_device random;
      name = detail::concat("/", detail::kShmNameStart, detail::shm_name_part(default_job_token()),
                            "-", detail::shm_name_part(prefix), "-", ::getpid(), "-",
                            random() % 1000000);
      fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
      if (fd < 0) {
        const std::string why = detail::concat("shm_open(", name, ") failed: ", errno_text(errno));
        store.set(name_key, detail::concat(kSetUpFailed, why));  // the others say it at once
        DDP_FAIL(group->who_, ": ", why, "\nhint: DDP_TCP_SHM=0 runs the ring over loopback instead");
      }
      // posix_fallocate, not ftruncate alone: a /dev/shm too small fails here, with a
      // message, rather than as a SIGBUS at the first collective.
      const int err = ::ftruncate(fd, static_cast<off_t>(bytes)) == 0
                          ? ::posix_fallocate(fd, 0, static_cast<off_t>(bytes))
                          : errno;
      if (err != 0) {
        ::close(fd);
        ::shm_unlink(name.c_str());
        store.set(name_key, detail::concat(kSetUpFailed, "cannot size the segment: ", errno_text(err)));
      }
      DDP_CHECK(err == 0, group->who_, ": cannot size the shared-memory segment ", name, " to ",
                bytes, " bytes: ", errno_text(err),
                "\nhint: is /dev/shm full (df /dev/shm)? DDP_TCP_SHM=0 runs the ring instead");
    }
    store.set(name_key, one_host ? name : "-");
  } else {
    name = store.get(name_key, remaining());
    DDP_CHECK(!name.starts_with(kSetUpFailed), group->who_, ": rank 0 could not set up shared memory (",
              name.substr(std::string_view(kSetUpFailed).size()),
              ")\nhint: DDP_TCP_SHM=0 runs the ring over loopback instead");
    if (name == "-") name.clear();
    if (!name.empty()) fd = ::shm_open(name.c_str(), O_RDWR, 0);
    DDP_CHECK(name.empty() || fd >= 0, group->who_, ": shm_open(", name,
              ") failed: ", errno_text(errno),
              "\nhint: DDP_TCP_SHM=0 runs the ring over loopback instead");
  }
  if (name.empty()) return nullptr;
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  group->map(fd, bytes);
  Header& h = *group->header_;
  at(group->rank_line(rank).pid).store(static_cast<std::int32_t>(::getpid()));
  if (rank == 0) {
    at(h.size).store(static_cast<std::uint32_t>(size));
    at(h.magic).store(kMagic);
  }
  for (int r = 0; r < size; ++r) {
    try {
      group->hosts_.push_back(store.get(prefix + "/host/" + std::to_string(r), remaining()));
    } catch (const Error&) {
      group->hosts_.push_back("?");
    }
  }
  try {
    group->barrier({deadline, "opening shared memory"});
  } catch (...) {
    if (rank == 0) ::shm_unlink(name.c_str());
    throw;
  }
  // Every rank has it mapped: gone from /dev/shm now (Note [Shared-memory all-reduce]).
  if (rank == 0) ::shm_unlink(name.c_str());
  DDP_CHECK(at(h.magic).load() == kMagic && at(h.size).load() == static_cast<std::uint32_t>(size),
            group->who_, ": shared-memory segment ", name, " is not this group's");
  return group;
}

// ==== Waiting ===============================================================================

std::string ShmGroup::peer_name(int r) const {
  return detail::concat("rank ", r, " (", hosts_[static_cast<std::size_t>(r)], ", pid ",
                        at(rank_line(r).pid).load(), ")");
}

// The others are stopped by the owner, which calls abort() once it has published its
// report (ProcessGroupTcp::on_failure): so they can quote it.
void ShmGroup::fail(const Call& call, const std::string& message) {
  DDP_FAIL(who_, ": ", call.what, " over shared memory: ", message);
}

void ShmGroup::check_waiting(const Call& call, std::uint32_t arrivals, bool look_at_peers,
                             bool stopped) {
  if (const std::uint32_t by = at(header_->aborted_by).load(); stopped && by != 0) {
    const int peer = static_cast<int>(by) - 1;
    if (peer == rank_) DDP_FAIL(who_, ": ", call.what, " over shared memory: aborted");
    // A rank that died is the story, whoever noticed first: its report may be lost with
    // the store, when rank 0 failed and exited first. (A rank that failed, and may have
    // exited since, says so in its line: it did not die.)
    for (int r = 0; r < size_; ++r) {
      if (r != rank_ && at(rank_line(r).stopped).load() == 0 &&
          process_dead(at(rank_line(r).pid).load())) {
        fail(call, detail::concat(peer_name(r),
                                  " died: its process is gone (killed, or it "
                                  "crashed; look at its own output)\n  ",
                                  peer_name(peer), " noticed first and stopped the group"));
      }
    }
    std::string report = report_of_ ? report_of_(peer) : "";
    std::string message = detail::concat(peer_name(peer), " stopped the group: it failed");
    if (!report.empty()) message += detail::quote_failure_report(peer, report);
    DDP_FAIL(who_, ": ", call.what, " over shared memory: ", message);
  }
  std::vector<int> missing;
  for (int r = 0; r < size_; ++r) {
    // Behind us, counted so that the 32-bit counters may wrap.
    if (static_cast<std::int32_t>(at(rank_line(r).arrivals).load() - arrivals) < 0) {
      missing.push_back(r);
    }
  }
  if (look_at_peers) {
    for (int r : missing) {
      if (process_dead(at(rank_line(r).pid).load())) {
        fail(call, detail::concat(peer_name(r),
                                  " died: its process is gone (killed, or it "
                                  "crashed; look at its own output)"));
      }
    }
  }
  if (Clock::now() >= call.deadline) {
    std::string names;
    for (int r : missing) names += (names.empty() ? "" : ", ") + peer_name(r);
    fail(call, detail::concat("timed out waiting for ", names.empty() ? "the others" : names,
                              ": hung, slower than the timeout, or in another collective"
                              "\nhint: every rank must call the same collectives in the "
                              "same order"));
  }
}

// Note [Waiting in shared memory].
void ShmGroup::arrive_and_wait(const Call& call, bool check_abort) {
  Header& h = *header_;
  const std::uint32_t generation = at(h.generation).load(std::memory_order_acquire);
  at(rank_line(rank_).arrivals).store(++arrivals_, std::memory_order_relaxed);
  if (at(h.count).fetch_add(1, std::memory_order_acq_rel) + 1 ==
      static_cast<std::uint32_t>(size_)) {
    at(h.count).store(0, std::memory_order_relaxed);
    at(h.generation).fetch_add(1, std::memory_order_seq_cst);
    if (at(h.sleepers).load(std::memory_order_seq_cst) > 0) {
      futex(&h.generation, FUTEX_WAKE, INT_MAX, nullptr);
    }
    if (check_abort) passed(call);
    return;
  }
  auto done = [&] { return at(h.generation).load(std::memory_order_acquire) != generation; };
  for (const Clock::time_point until = Clock::now() + kSpin; Clock::now() < until;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) {
        if (check_abort) passed(call);
        return;
      }
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    }
    ::sched_yield();
  }
  bool look_at_peers = false;
  for (;;) {
    const auto left = call.deadline - Clock::now();
    const auto slice = std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::clamp<Clock::duration>(left, std::chrono::microseconds(100), kSleepSlice));
    const timespec ts{static_cast<time_t>(slice.count() / 1000000000),
                      static_cast<long>(slice.count() % 1000000000)};
    // Done, or else stopped, past the deadline, or a peer died; then sleep a slice. The
    // abort word is read first: a rank stops the group only once it has failed, and one
    // that failed in this barrier's collective check (enter) has passed the barrier, so
    // then we see it done, and tell the check's story rather than the abort's.
    const bool stopped = at(h.aborted_by).load(std::memory_order_seq_cst) != 0;
    if (at(h.generation).load(std::memory_order_seq_cst) != generation) {
      if (check_abort) passed(call);
      return;
    }
    check_waiting(call, arrivals_, look_at_peers, stopped);
    look_at_peers = true;  // not on the first look: just out of the spin, that is early
    at(h.sleepers).fetch_add(1, std::memory_order_seq_cst);
    if (at(h.generation).load(std::memory_order_seq_cst) == generation) {
      futex(&h.generation, FUTEX_WAIT, generation, &ts);
    }
    at(h.sleepers).fetch_sub(1, std::memory_order_seq_cst);
  }
}

// A rank that timed out, or failed, after it arrived still counts among the arrivals:
// past the barrier, the others look at the abort word once more, so that none goes on as
// if that rank were still in the collective.
void ShmGroup::passed(const Call& call) {
  if (at(header_->aborted_by).load(std::memory_order_acquire) != 0) {
    check_waiting(call, arrivals_, false, true);
  }
}

void ShmGroup::abort(int by) noexcept {
  if (header_ == nullptr) return;
  if (by == rank_) at(rank_line(rank_).stopped).store(1);
  std::uint32_t none = 0;
  at(header_->aborted_by).compare_exchange_strong(none, static_cast<std::uint32_t>(by) + 1);
  futex(&header_->generation, FUTEX_WAKE, INT_MAX, nullptr);
}

// Note [Collective check] (pipelined_ring.cpp) for shared memory: each rank writes what it
// calls into its rank line before the first barrier of a collective and, past it, reads
// everyone's. Ranks that called different collectives, or the same one on other sizes,
// fail there, before a byte of the data is used, naming both calls. The two lines are
// used by turns for the reason the buffers are (Note [Shared-memory all-reduce]): nobody
// writes one again before everyone has passed the barrier that follows its reading.
void ShmGroup::enter(const Call& call) {
  char* mine = rank_line(rank_).what[collectives_ & 1];
  const std::size_t len = std::min(call.what.size(), sizeof(RankLine::what[0]) - 1);
  std::memcpy(mine, call.what.data(), len);
  mine[len] = '\0';
  // The check first: when ranks disagree, some may have failed on it and stopped the
  // group already; the disagreement is the better story.
  arrive_and_wait(call, /*check_abort=*/false);
  for (int r = 0; r < size_; ++r) {
    const char* theirs = rank_line(r).what[collectives_ & 1];
    if (std::strncmp(theirs, mine, sizeof(RankLine::what[0])) != 0) {
      fail(call, detail::concat(peer_name(r), " called ", std::string(theirs),
                                " where this rank called ", std::string(mine),
                                "\nhint: every rank must call the same collectives, on "
                                "tensors of the same size and dtype, in the same order"));
    }
  }
  ++collectives_;
  passed(call);
}

void ShmGroup::barrier(const Call& call) { enter(call); }

// ==== The collectives =======================================================================

ShmGroup::RankLine& ShmGroup::rank_line(int r) const {
  return reinterpret_cast<RankLine*>(base_ + kRanksOffset)[r];
}

std::byte* ShmGroup::slot(int buffer, int r) const {
  return data_ + (static_cast<std::size_t>(buffer) * static_cast<std::size_t>(size_) +
                  static_cast<std::size_t>(r)) *
                     kBufferBytes;
}

namespace {

// Elements [begin, end) of a chunk of n that rank r of w reduces: nearly equal slices,
// cut at multiples of 16 elements (a cache line of floats) so that two ranks never
// write one cache line.
std::pair<std::int64_t, std::int64_t> slice_of(std::int64_t n, int w, int r) {
  auto cut = [n, w](int k) { return std::min(n, (n * k / w + 15) / 16 * 16); };
  return {cut(r), r + 1 == w ? n : cut(r + 1)};
}

// dst[0, n) (op)= src[s][0, n) for s = 1 .. w-1, in that order, a block at a time so that
// dst's block stays in the cache between sources.
template <typename T, typename SourceOf>
void reduce_from(T* dst, std::int64_t n, int w, SourceOf source, ReduceOp op) {
  constexpr std::int64_t kBlock = 2048;
  for (std::int64_t b = 0; b < n; b += kBlock) {
    const auto len = static_cast<std::size_t>(std::min(kBlock, n - b));
    for (int s = 1; s < w; ++s) detail::combine(dst + b, source(s) + b, len, op);
  }
}

}  // namespace

template <typename T>
void ShmGroup::all_reduce(T* data, std::int64_t n, ReduceOp op, const Call& call) {
  const int w = size_;
  const auto bytes = static_cast<std::size_t>(n) * sizeof(T);
  if (bytes <= kSmallBytes) {  // one barrier: everyone reduces everything
    const int b = next_buffer();
    if (bytes > 0) std::memcpy(slot(b, rank_), data, bytes);
    enter(call);
    if (bytes > 0) std::memcpy(data, slot(b, 0), bytes);
    reduce_from(
        data, n, w, [&](int s) { return reinterpret_cast<const T*>(slot(b, s)); }, op);
    if (op == ReduceOp::Avg) detail::divide(data, n, w);
    return;
  }
  // Chunk k in buffer b[k % 3]; the loop's turn k copies out chunk k-1, reduces chunk
  // k and copies in chunk k+1, then meets the others (Note [Shared-memory all-reduce]).
  constexpr auto kChunk = static_cast<std::int64_t>(kBufferBytes / sizeof(T));
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
  auto length = [&](std::int64_t k) { return std::min(kChunk, n - k * kChunk); };
  int buffer[3] = {next_buffer(), 0, 0};
  std::memcpy(slot(buffer[0], rank_), data, static_cast<std::size_t>(length(0)) * sizeof(T));
  enter(call);
  for (std::int64_t k = 0; k < chunks; ++k) {
    if (k > 0) {
      std::memcpy(data + (k - 1) * kChunk, slot(buffer[(k - 1) % 3], 0),
                  static_cast<std::size_t>(length(k - 1)) * sizeof(T));
    }
    const int b = buffer[k % 3];
    const auto [s0, s1] = slice_of(length(k), w, rank_);
    T* result = reinterpret_cast<T*>(slot(b, 0));
    reduce_from(
        result + s0, s1 - s0, w, [&](int s) { return reinterpret_cast<const T*>(slot(b, s)) + s0; },
        op);
    if (op == ReduceOp::Avg) detail::divide(result + s0, s1 - s0, w);
    if (k + 1 < chunks) {
      buffer[(k + 1) % 3] = next_buffer();
      std::memcpy(slot(buffer[(k + 1) % 3], rank_), data + (k + 1) * kChunk,
                  static_cast<std::size_t>(length(k + 1)) * sizeof(T));
    }
    arrive_and_wait(call);
  }
  std::memcpy(data + (chunks - 1) * kChunk, slot(buffer[(chunks - 1) % 3], 0),
              static_cast<std::size_t>(length(chunks - 1)) * sizeof(T));
}

// Steps 1 and 2 of Note [Shared-memory all-reduce], on chunks of each of the size()
// blocks: a slot holds chunk k of every block, and rank r reduces block r's.
template <typename T>
void ShmGroup::reduce_scatter(const T* in, T* out, std::int64_t n, ReduceOp op, const Call& call) {
  const int w = size_;
  const auto kChunk =
      static_cast<std::int64_t>(kBufferBytes / sizeof(T) / static_cast<std::size_t>(w));
  std::int64_t c0 = 0;
  do {  // at least once: the barrier keeps the ranks in step even for n = 0
    const std::int64_t m = std::min(kChunk, n - c0);
    const int b = next_buffer();
    T* mine = reinterpret_cast<T*>(slot(b, rank_));
    for (int j = 0; j < w && m > 0; ++j) {
      std::memcpy(mine + j * m, in + j * n + c0, static_cast<std::size_t>(m) * sizeof(T));
    }
    if (c0 == 0) {
      enter(call);
    } else {
      arrive_and_wait(call);
    }
    if (m > 0) {
      std::memcpy(out + c0, reinterpret_cast<const T*>(slot(b, 0)) + rank_ * m,
                  static_cast<std::size_t>(m) * sizeof(T));
      reduce_from(
          out + c0, m, w, [&](int s) { return reinterpret_cast<const T*>(slot(b, s)) + rank_ * m; },
          op);
      if (op == ReduceOp::Avg) detail::divide(out + c0, m, w);
    }
    c0 += m;
  } while (c0 < n);
}

void ShmGroup::all_gather(const std::byte* in, std::byte* out, std::size_t bytes,
                          const Call& call) {
  std::size_t c0 = 0;
  do {
    const std::size_t m = std::min(kBufferBytes, bytes - c0);
    const int b = next_buffer();
    if (m > 0) std::memcpy(slot(b, rank_), in + c0, m);
    if (c0 == 0) {
      enter(call);
    } else {
      arrive_and_wait(call);
    }
    for (int r = 0; r < size_ && m > 0; ++r) {
      std::memcpy(out + static_cast<std::size_t>(r) * bytes + c0, slot(b, r), m);
    }
    c0 += m;
  } while (c0 < bytes);
}

void ShmGroup::broadcast(std::byte* data, std::size_t bytes, int root, const Call& call) {
  std::size_t c0 = 0;
  do {
    const std::size_t m = std::min(kBufferBytes, bytes - c0);
    const int b = next_buffer();
    if (rank_ == root && m > 0) std::memcpy(slot(b, root), data + c0, m);
    if (c0 == 0) {
      enter(call);
    } else {
      arrive_and_wait(call);
    }
    if (rank_ != root && m > 0) std::memcpy(data + c0, slot(b, root), m);
    c0 += m;
  } while (c0 < bytes);
}

template void ShmGroup::all_reduce(float*, std::int64_t, ReduceOp, const Call&);
template void ShmGroup::all_reduce(std::int64_t*, std::int64_t, ReduceOp, const Call&);
template void ShmGroup::reduce_scatter(const float*, float*, std::int64_t, ReduceOp, const Call&);
template void ShmGroup::reduce_scatter(const std::int64_t*, std::int64_t*, std::int64_t, ReduceOp,
                                       const Call&);

}  // namespace ddp
