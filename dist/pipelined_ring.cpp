// The pipelined ring: how ProcessGroupTcp runs every collective (see process_group_tcp.hpp)
// by default, as two byte streams moving at once, and the Notes on what makes it fast.
// Chapter 05. The collectives cut their tensors into a RingPlan (process_group_tcp.cpp);
// run_ring moves it. The plain ring it replaces is plain_ring.cpp; connecting the links
// is tcp_ring_connect.cpp; naming a neighbour that fails, tcp_ring_failures.cpp.
#include "dist/process_group_tcp.hpp"

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>

#include "base/deadline.hpp"
#include "base/errno_text.hpp"
#include "base/error.hpp"
#include "dist/host_reduce.hpp"

namespace ddp {

// ==== The engine: one stream each way ==================================================
//
// Note [One stream]
// -----------------
// Read the table of Note [Ring schedule] down a column: what a rank receives at step s
// is exactly what it sends at step s+1. So a whole ring collective is, for one rank,
// two byte streams: in from the left, the chunks of steps 0, 1, 2, ... in order; out to
// the right, the first chunk, then the same received chunks again, each byte as soon
// as it has arrived (and, in a reduce step, been added to ours). No rank waits for a
// step to end before the next begins: the ring is a pipeline, byte by byte. A RingPlan
// lists the pieces; the broadcast is the same engine with an empty first piece.
//
// Both directions move at once (Note: done one after the other, both neighbours could
// sit in send() with full kernel buffers and nobody receiving). Both sockets are
// non-blocking and one loop moves whatever each can take: send what the right socket
// accepts, receive what the left has; only when neither moved, sleep in poll() on both.
// Received bytes of a reduce step land in scratch_ and are combined into the tensor at
// once (Note [Scratch size]). Left out, because they measured slower on loopback: fixed
// socket buffer sizes (they switch off Linux's autotuning), spinning before poll() in
// large transfers, and vmsplice() + splice() sends, which would also need an
// acknowledgement at the end of every collective (a page still queued for the neighbour
// would change under it). The figures: bench/README.md, "Chapter 05: the ring's speed".
//
// Note [Spin, then sleep]
// -----------------------
// A thread asleep (in poll(), or on the queue's condition variable) costs its waker a
// system call and itself a trip through the scheduler before it runs again: tens of
// microseconds on a busy host, as much as a whole small all-reduce moves bytes. So
// where the next event is usually microseconds away, the thread first looks again for
// a while (kSpin), calling sched_yield() between looks so that a rank sharing its core
// with the neighbour it waits for lets that neighbour run: the communication thread,
// for the next collective, after each one (back-to-back calls, a Reducer's buckets);
// and the small all-reduce (Note [Small all-reduce]), for its neighbour's bytes. The
// ring's large transfers do not spin: there the sleeps are long, and spinning cost
// them 10% at 64 MiB (Note [One stream]). The caller's own Work::wait() still sleeps.

// Note [Scratch size]
// -------------------
// One would expect a scratch buffer that fits in the L2 cache (512 KiB a core on the dev
// box) to be fastest. It is not: each turn of the loop below receives at most a scratch
// buffer's worth, then passes the reduced bytes on, and every send may wake the
// neighbour, a context switch that costs more here than the cache misses it saves. 4 MiB
// lets one recv() take nearly all that has arrived: on the dev box it was faster than
// 1 MiB and 256 KiB at 16-64 MiB in every comparison, and the same below, for 3 MiB more
// memory a group (bench/README.md, "Chapter 05: the ring's speed").
//
// Note [4K aliasing]
// ------------------
// scratch_ starts on a page boundary (a PageBuffer), and that is worth 5-25 % of an
// all-reduce of 1 MiB or more here. recv() is a copy, from the kernel's buffers to ours.
// A copy whose destination lies 1 to 31 bytes past its source, counted modulo 4 KiB,
// runs about three times slower on this box's CPU (AMD Zen 3): by their low 12 address
// bits the loads look as if they read what the stores just wrote, and wait for them
// (Intel's optimisation manual calls it "4K aliasing"). Where the kernel's bytes sit is
// not ours to choose, but on loopback their page offsets follow the stream's own bytes
// (the header below shows it), so where our buffer starts decides: a receive buffer 1-31
// bytes past a page boundary took about three times as long as one on it. A std::vector of
// a few MiB starts 16 bytes past a page (malloc's header), and so did our scratch buffer
// until it became a PageBuffer.
// The copy steps receive straight into the tensor, where the same rule holds: there the
// distance is set by where the tensor starts (64 bytes past a page, for a large
// aligned_alloc(64)) and by the header in front of the stream (Note [Collective
// check]). With the 128-byte header the tensor's bytes land 64 bytes behind the
// stream's: fast (a 48-byte header put them 16 ahead, and made large all-reduces up to 2x
// slower). A tensor that starts elsewhere (a view at an odd offset) works the same, and
// may run slower. The figures: bench/README.md, "Chapter 05: the ring's speed".
//
// Note [Send slices]
// ------------------
// A non-blocking send() takes all that fits in the socket's buffer, and Linux grows that
// buffer to several MiB: one call can copy for milliseconds, during which this thread
// receives nothing, its left neighbour's bytes pile up, and the ring runs in lurches
// (timed inside this loop at 16 MiB, np=2: a third of the time asleep in poll()).
// Capping each send at kSendSliceBytes alternates the two directions in pieces that
// still amortise the system call (14-21 % faster at 16-64 MiB on the dev box, the same
// below: bench/README.md, "Chapter 05: the ring's speed").
//
// Note [Where the ranks run]
// --------------------------
// On one host, placement matters more than anything in this loop. A neighbour's send
// wakes us with a "sync" wake-up, and when the other cores are busy Linux puts the woken
// thread on the sender's core: both ranks then share one core while another sits on the
// rest of the machine's load. Pinning each rank to its own core (taskset, or a launcher
// that binds as mpirun does by default for np <= 2) halved the np=2 all-reduce's time at
// 4 KiB-1 MiB on the loaded dev box. Nothing in this file pins threads: placement is the
// launcher's decision, not the backend's.
//
// Failures are found here, and named by fail_peer (tcp_ring_failures.cpp): which
// neighbour, which rank, which address. A neighbour that closed its end (it died, or
// failed and shut its sockets) shows as EOF on the left socket, or as EPIPE/ECONNRESET or
// EOF on the right one; the right socket is watched only while we still owe it bytes: a
// neighbour that has finished may close it.

// Note [Collective check]
// -----------------------
// Every rank must call the same collectives, in the same order, with the same sizes. The
// ring cannot tell by itself: it moves bytes. If one rank all-reduced 6 floats while its
// neighbour all-reduced 4, they would combine the wrong bytes, one of them could finish
// "successfully" with garbage, and the bytes left over would corrupt the next collective.
// So each out-stream begins with a header of kHeaderBytes: a magic number, the
// collective's number in this group, and its description ("all_reduce of 6 float32
// (sum)": call, count, dtype, and op or root). A rank takes none of its left neighbour's
// data before that neighbour's header has matched its own. It costs 128 bytes a link
// per collective and no extra wait: the header travels in front of the data.

namespace {

constexpr std::size_t kHeaderBytes = 128;  // not 48: Note [4K aliasing]
constexpr std::uint32_t kHeaderMagic = 0x52504444;  // "DDPR" on the wire
// Layout: u32 magic, u32 description length, u64 sequence, description (zero-padded).
constexpr std::size_t kHeaderText = kHeaderBytes - 16;
using Header = std::array<std::byte, kHeaderBytes>;

Header make_header(std::uint64_t sequence, const std::string& description) {
  Header h{};
  const std::uint32_t length =
      static_cast<std::uint32_t>(std::min(description.size(), kHeaderText));
  std::memcpy(h.data(), &kHeaderMagic, 4);
  std::memcpy(h.data() + 4, &length, 4);
  std::memcpy(h.data() + 8, &sequence, 8);
  std::memcpy(h.data() + 16, description.data(), length);
  return h;
}

}  // namespace

void ProcessGroupTcp::check_header(const std::byte* theirs, const std::byte* ours) const {
  if (std::memcmp(theirs, ours, kHeaderBytes) == 0) return;
  std::uint32_t magic = 0, length = 0;
  std::uint64_t sequence = 0;
  std::memcpy(&magic, theirs, 4);
  std::memcpy(&length, theirs + 4, 4);
  std::memcpy(&sequence, theirs + 8, 8);
  DDP_CHECK(magic == kHeaderMagic && length <= kHeaderText, who(), ": ", current_, ": ",
            neighbour_name(true), " sent bytes that are not the start of a collective");
  const std::string description(reinterpret_cast<const char*>(theirs) + 16, length);
  DDP_FAIL(who(), ": ", neighbour_name(true), " is in another collective: its collective #",
           sequence, " is ", description, ", this rank's #", sequence_, " is ", current_,
           "\nhint: every rank must call the same collectives in the same order, with the "
           "same sizes, dtypes, ops and roots");
}

// ==== run_ring, step by step =============================================================

// One rank's two byte streams in one ring collective (Note [One stream]): how far each
// has come, and the steps that move them on. Out to the right: our header, plan.first,
// then plan.steps again, each byte once it is in. In from the left: its header, then
// plan.steps, each copied into place or reduced into it. run_ring turns the steps until
// both streams are through.
template <typename T>
class ProcessGroupTcp::RingStreams {
 public:
  RingStreams(ProcessGroupTcp& group, const RingPlan<T>& plan)
      : group_(group),
        plan_(plan),
        first_bytes_(bytes(plan.first.n)),
        send_total_(bytes(plan.send_total)),
        ours_(make_header(group.sequence_, group.current_)) {
    for (const Piece& p : plan.steps) recv_total_ += bytes(p.n);
  }

  // Both headers and every byte of both streams have gone and come, and the emulated
  // wire (when there is one) is empty.
  bool done() const {
    return !(header_sent_ < kHeaderBytes || header_received_ < kHeaderBytes ||
             sent_ < send_total_ || received_ < recv_total_ ||
             (group_.link_ && !group_.link_->empty()));
  }

  // Out: the header, then what has arrived may go on, never more. Whether a byte went.
  bool send_some() {
    bool moved = false;
    if (header_sent_ < kHeaderBytes) {
      const std::size_t n = push_right(ours_.data() + header_sent_, kHeaderBytes - header_sent_);
      header_sent_ += n;
      moved = n > 0;
    }
    if (header_sent_ == kHeaderBytes && sent_ < may_send()) {
      const Piece& piece = send_piece(send_index_);
      const std::size_t len =  // Note [Send slices]
          std::min({bytes(piece.n) - send_offset_, may_send() - sent_, kSendSliceBytes});
      const auto* from = reinterpret_cast<const std::byte*>(piece.data) + send_offset_;
      const std::size_t n = push_right(from, len);
      sent_ += n;
      send_offset_ += n;
      moved = moved || n > 0;
    }
    return moved;
  }

  // In: the header, checked (Note [Collective check]); then data, straight into place
  // for a copy, through scratch_ for a reduce. Whether a byte came.
  bool receive_some() {
    bool moved = false;
    if (header_received_ < kHeaderBytes) {
      const std::size_t n =
          receive_left(theirs_.data() + header_received_, kHeaderBytes - header_received_);
      header_received_ += n;
      moved = n > 0;
      if (header_received_ == kHeaderBytes) group_.check_header(theirs_.data(), ours_.data());
    }
    if (header_received_ == kHeaderBytes && received_ < recv_total_) {
      const Piece& piece = plan_.steps[recv_index_];
      const std::size_t piece_bytes = bytes(piece.n);
      auto* dst = reinterpret_cast<std::byte*>(piece.data) + recv_offset_;
      PageBuffer& scratch = group_.scratch_;
      std::byte* into = piece.reduce ? scratch.data() + pending_ : dst;  // Note [4K aliasing]
      const std::size_t room = piece.reduce
                                   ? std::min(scratch.size(), piece_bytes - recv_offset_) - pending_
                                   : piece_bytes - recv_offset_;
      const std::size_t got = receive_left(into, room);
      if (got > 0) {
        moved = true;
        const std::size_t landed = piece.reduce ? reduce_into(dst, got) : got;
        received_ += landed;
        recv_offset_ += landed;
      }
    }
    return moved;
  }

  // The emulated wire hands on all that has arrived by now, stretch after stretch
  // (Note [Link model] in dist/link_emulation.cpp). Whether a byte went.
  bool hand_on_wire() {
    EmulatedLink* link = group_.link_.get();
    bool moved = false;
    for (const Clock::time_point now = Clock::now(); link && !link->empty();) {
      const std::span<const std::byte> due = link->due(now);
      const std::size_t n = due.empty() ? 0 : send_right(due.data(), due.size());
      if (n == 0) break;
      link->delivered(n);
      moved = true;
    }
    return moved;
  }

  // Step over finished (and empty) pieces.
  void step_over_finished_pieces() {
    while (send_index_ <= plan_.steps.size() && sent_ < send_total_ &&
           send_offset_ == bytes(send_piece(send_index_).n)) {
      ++send_index_;
      send_offset_ = 0;
    }
    while (recv_index_ < plan_.steps.size() &&
           recv_offset_ == bytes(plan_.steps[recv_index_].n)) {
      ++recv_index_;
      recv_offset_ = 0;
    }
  }

  // Whether to turn the steps again at once: bytes moved, or, with plan.spin, they
  // stopped less than kSpin ago; the core is yielded meanwhile (Note [Spin, then sleep]).
  bool turn_again(bool moved) {
    if (moved) {
      idle_since_ = {};
      return true;
    }
    if (!plan_.spin) return false;
    const Clock::time_point now = Clock::now();
    if (idle_since_ == Clock::time_point{}) idle_since_ = now;
    if (now - idle_since_ >= kSpin) return false;
    ::sched_yield();
    return true;
  }

  // Nothing moved: sleep until a socket is ready, in slices, to notice stop_ and the
  // deadline. Throws, naming the neighbour, when the deadline has passed or the right
  // neighbour closed its link.
  void wait_for_links() {
    if (group_.stop_) {
      DDP_FAIL(group_.who(), ": ", group_.current_,
               ": the process group was destroyed while it ran");
    }
    if (Clock::now() >= group_.current_deadline_) fail_silent_neighbour();
    const EmulatedLink* link = group_.link_.get();
    pollfd fds[2] = {{group_.left_.fd(), static_cast<short>(to_receive() > 0 ? POLLIN : 0), 0},
                     {group_.right_.fd(), 0, 0}};
    if (to_send() > 0 || (link && !link->empty())) {
      // POLLIN on a send-only socket can only mean the neighbour closed it. With an
      // emulated link, the socket is wanted only for bytes the wire has delivered.
      const bool ready = link ? !link->due(Clock::now()).empty()
                              : header_sent_ < kHeaderBytes || sent_ < may_send();
      fds[1].events = static_cast<short>((ready ? POLLOUT : 0) | POLLIN);
    } else {
      fds[1].fd = -1;  // done with it; poll() skips negative fds
    }
    sleep_in_poll(fds);
    if (fds[1].revents & (POLLIN | POLLERR | POLLHUP)) check_right_link(fds[1].revents);
  }

 private:
  using Piece = typename RingPlan<T>::Piece;
  static constexpr std::size_t kElement = sizeof(T);
  static std::size_t bytes(std::int64_t elements) {
    return static_cast<std::size_t>(elements) * kElement;
  }

  // The out-stream: plan.first, then plan.steps (pieces of the in-stream, once in).
  const Piece& send_piece(std::size_t i) const { return i == 0 ? plan_.first : plan_.steps[i - 1]; }
  // How far the out-stream may go now: as far as the in-stream has come, never further.
  std::size_t may_send() const { return std::min(send_total_, first_bytes_ + received_); }
  std::size_t to_receive() const {
    return kHeaderBytes - header_received_ + recv_total_ - received_;
  }
  std::size_t to_send() const { return kHeaderBytes - header_sent_ + send_total_ - sent_; }

  // `got` more bytes in scratch_ for a reduce step: the whole elements among them are
  // combined into `dst` at once, a split element's first bytes wait for the rest. Returns
  // the bytes combined.
  std::size_t reduce_into(std::byte* dst, std::size_t got) {
    PageBuffer& scratch = group_.scratch_;
    pending_ += got;
    const std::size_t landed = pending_ / kElement * kElement;  // whole elements only
    if constexpr (std::is_arithmetic_v<T>) {  // (broadcast moves bytes, never reduces)
      detail::combine(reinterpret_cast<T*>(dst), reinterpret_cast<const T*>(scratch.data()),
                      landed / kElement, plan_.op);
    }
    pending_ -= landed;
    std::memmove(scratch.data(), scratch.data() + landed, pending_);  // a split element
    return landed;
  }

  // What a link that failed did, for fail_peer.
  static std::string failure(const Socket::IoResult& r) {
    return r.status == Socket::IoStatus::Closed ? std::string("closed the connection")
                                                : "failed: " + errno_text(r.error);
  }
  // One non-blocking send to the right, one receive from the left: the bytes moved (0
  // when the socket is not ready), or the failure, naming the neighbour.
  std::size_t send_right(const std::byte* from, std::size_t len) {
    const Socket::IoResult r = group_.right_.send_some(from, len);
    if (r.status == Socket::IoStatus::Ok) return r.bytes;
    if (r.status != Socket::IoStatus::WouldBlock) {
      check_left_header_now();
      group_.fail_peer(false, PeerFault::Closed, failure(r));
    }
    return 0;
  }
  // Out to the right: into the socket, or onto the emulated wire (Note [Link model] in
  // dist/link_emulation.cpp), which hands the bytes to the socket as they arrive.
  std::size_t push_right(const std::byte* from, std::size_t len) {
    return group_.link_ ? group_.link_->accept(from, len, Clock::now()) : send_right(from, len);
  }
  std::size_t receive_left(std::byte* into, std::size_t room) {
    const Socket::IoResult r = group_.left_.recv_some(into, room);
    if (r.status == Socket::IoStatus::Ok) return r.bytes;
    if (r.status != Socket::IoStatus::WouldBlock) {
      group_.fail_peer(true, PeerFault::Closed, failure(r));
    }
    return 0;
  }

  // Note [Collective check], the race: a neighbour that finds our header wrong fails and
  // closes its links, and our next send to it can fail (the unread rest of our stream
  // turned its close into a reset) before we have read ITS header, which it sent before
  // it closed and which is already here. So a failed send reads the left's header first:
  // "in another collective", naming both calls, says more than "closed the connection"
  // (seen once with two ranks, in a full `ctest -j10` on a 16-core host).
  void check_left_header_now() {
    while (header_received_ < kHeaderBytes) {
      const Socket::IoResult r = group_.left_.recv_some(theirs_.data() + header_received_,
                                                        kHeaderBytes - header_received_);
      if (r.status != Socket::IoStatus::Ok) return;  // not there (yet): nothing to say
      header_received_ += r.bytes;
    }
    group_.check_header(theirs_.data(), ours_.data());  // throws when the two disagree
  }

  // The collective's deadline passed with bytes still to come or to go: the neighbour we
  // wait on fell silent (the left one while its bytes are due, else the right one).
  [[noreturn]] void fail_silent_neighbour() {
    const bool waiting_left = to_receive() > 0;
    group_.fail_peer(waiting_left, PeerFault::Silent, detail::concat(
        "did not ", waiting_left ? "send" : "take", " the remaining ",
        waiting_left ? to_receive() : to_send(), " bytes within the timeout of ",
        group_.timeout().count(), " ms (hung, or not in the same collective?)"));
  }

  // Sleeps in poll() until a link is ready, kPollSlice at most; with an emulated link, in
  // ppoll() until the wire's next frame arrives, to the ns.
  void sleep_in_poll(pollfd (&fds)[2]) {
    const int slice = std::min<int>(remaining_ms(group_.current_deadline_),
                                    static_cast<int>(kPollSlice.count()));
    const EmulatedLink* link = group_.link_.get();
    int polled = 0;
    if (!link) {
      polled = ::poll(fds, 2, slice);
    } else {
      const Clock::time_point now = Clock::now();
      const auto wait = std::clamp<Clock::duration>(link->next_arrival(now) - now,
                                                    Clock::duration::zero(),
                                                    std::chrono::milliseconds(slice));
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count();
      const timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
      polled = ::ppoll(fds, 2, &ts, nullptr);
    }
    if (polled < 0 && errno != EINTR) {
      DDP_FAIL(group_.who(), ": ", group_.current_, ": poll() failed: ", errno_text());
    }
  }

  // The send-only right link woke poll() with POLLIN, POLLERR or POLLHUP: the neighbour
  // sent bytes it never should, or closed the link. Throws, naming it; returns only when
  // it was a false alarm (nothing to read after all).
  void check_right_link(short revents) {
    char byte = 0;
    const Socket::IoResult r = group_.right_.recv_some(&byte, 1);
    if (r.status == Socket::IoStatus::Ok) {
      group_.fail_peer(false, PeerFault::Closed, "sent bytes on a send-only link");
    }
    if (r.status != Socket::IoStatus::WouldBlock || (revents & POLLERR)) {
      check_left_header_now();
      group_.fail_peer(false, PeerFault::Closed, "closed the connection");
    }
  }

  ProcessGroupTcp& group_;
  const RingPlan<T>& plan_;
  const std::size_t first_bytes_;  // of the out-stream, before anything has come in
  const std::size_t send_total_;
  std::size_t recv_total_ = 0;

  std::size_t sent_ = 0;         // bytes of the out-stream sent
  std::size_t send_index_ = 0;   // ... in piece send_piece(send_index_)
  std::size_t send_offset_ = 0;  // ... at this byte
  std::size_t received_ = 0;     // bytes of the in-stream landed (and reduced) in place
  std::size_t recv_index_ = 0;   // ... in piece plan.steps[recv_index_]
  std::size_t recv_offset_ = 0;  // ... at this byte
  std::size_t pending_ = 0;      // bytes in scratch_ not yet combined (< one element)
  // Note [Collective check]: our header goes out first, the left's comes in first.
  const Header ours_;
  Header theirs_{};
  std::size_t header_sent_ = 0;
  std::size_t header_received_ = 0;
  Clock::time_point idle_since_{};  // when the loop last stopped moving bytes (plan.spin)
};

// The whole engine: each turn moves what the sockets take, out and in, and only when
// nothing moved does the thread sleep, until a socket is ready or the deadline passes.
template <typename T>
void ProcessGroupTcp::run_ring(const RingPlan<T>& plan) {
  RingStreams<T> streams(*this, plan);
  while (!streams.done()) {
    bool moved = streams.send_some();
    moved = streams.receive_some() || moved;
    moved = streams.hand_on_wire() || moved;
    streams.step_over_finished_pieces();
    if (streams.turn_again(moved)) continue;
    streams.wait_for_links();
  }
  payload_sent_ += static_cast<std::int64_t>(plan.send_total) * static_cast<std::int64_t>(sizeof(T));
}

// The rings the collectives run (process_group_tcp.cpp): the reduced dtypes and bytes.
template void ProcessGroupTcp::run_ring(const RingPlan<float>& plan);
template void ProcessGroupTcp::run_ring(const RingPlan<std::int64_t>& plan);
template void ProcessGroupTcp::run_ring(const RingPlan<std::byte>& plan);

}  // namespace ddp
