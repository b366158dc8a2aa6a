// How a failure travels round ProcessGroupTcp's ring (see process_group_tcp.hpp). Chapter
// 05. A rank whose collective fails leaves a report in the store and shuts both its links
// (on_failure); a neighbour that sees a link close, or fall silent, names that rank and
// quotes its report (fail_peer). Where the ring finds a failure is pipelined_ring.cpp.
#include "dist/process_group_tcp.hpp"

#include <poll.h>

#include <algorithm>

#include "base/deadline.hpp"
#include "base/error.hpp"

namespace ddp {

// The first failure breaks the group for good: the ring's byte streams are out of step.
// We leave a report in the store (so ranks that only see our connection close can say
// why), then shut our sockets, so both neighbours stop waiting on us at once.
void ProcessGroupTcp::on_failure(const std::string& message) {
  broken_ = message;
  try {
    store_->set(prefix_ + "/failure/" + std::to_string(rank()), message, kReportTimeout);
  } catch (...) {  // the store may have died with the rank that failed us: nothing to add
  }
  left_.shutdown();
  right_.shutdown();
  if (shm_) shm_->abort(rank());  // the ranks waiting in shared memory stop too
}

namespace {
// Whether the neighbour at the other end of `link` has shut it (FIN or reset), found
// without reading from it.
bool has_closed(const Socket& link) {
  pollfd p{link.fd(), POLLRDHUP, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}
}  // namespace

std::string ProcessGroupTcp::neighbour_name(bool left) const {
  const std::string& process = left ? left_process_ : right_process_;
  return detail::concat("rank ", neighbour(left), " (", left ? "left" : "right",
                        " neighbour of rank ", rank(), ", ",
                        left ? left_address_ : right_address_,
                        process.empty() ? "" : ", " + process, ")");
}

// A close can also wait behind data. The dead rank's last bytes to us may still sit in
// its socket's send queue when it dies, our receive window full, and its FIN goes out
// only after them. Then has_closed() sees nothing yet, though that neighbour is gone. So
// when the right neighbour closed and left no report (it was rank 0 and its exit took the
// store with it), we read out the left link for up to kDrainPatience: its FIN, if it is
// coming, arrives. Only the left link can hold a close back like that: the right one
// carries nothing to us. (Seen in a full ctest -j2: of 4 ranks, rank 2 killed, rank 3
// named only rank 0, which had failed after rank 2 and exited.)
bool ProcessGroupTcp::left_closes_within(std::chrono::milliseconds patience) {
  const Clock::time_point deadline = Clock::now() + patience;
  while (!has_closed(left_)) {
    if (Clock::now() >= deadline) return false;
    const Socket::IoResult r = left_.recv_some(scratch_.data(), scratch_.size());
    if (r.status == Socket::IoStatus::Ok) continue;  // bytes in front of the close: dropped
    if (r.status != Socket::IoStatus::WouldBlock) return true;  // closed, or reset
    pollfd p{left_.fd(), POLLIN | POLLRDHUP, 0};
    ::poll(&p, 1, std::max(1, remaining_ms(deadline)));
  }
  return true;
}

// Throws the error of a step that failed because of a neighbour, naming it, and, when
// that neighbour failed first and said why (see on_failure), its report, indented under
// ours: its own hint and place are the ones that help, so ours add no second hint.
//
// When the other neighbour has closed its link too, that is said as well. A rank that
// dies closes both its links and the failure travels round the ring both ways, so
// either of our links may close first, and the first can be a neighbour that only
// failed after the dead one: its report would name the dead one, but is lost when it was
// rank 0 and the store went down with it. The second close can name the dead one.
void ProcessGroupTcp::fail_peer(bool left, PeerFault fault, const std::string& what) {
  const int peer = neighbour(left);
  std::string message = detail::concat(neighbour_name(left), " ", what, " during ", current_);
  const std::string key = prefix_ + "/failure/" + std::to_string(peer);
  std::string report;
  try {  // a peer writes its report before it closes its links: it is there, or never
    report = store_->get(key, std::chrono::milliseconds(0));
  } catch (...) {  // none; or the store was on a rank that is gone, or is frozen
  }
  bool other_closed = false;
  if (fault == PeerFault::Closed) {
    const bool wait_for_left = !left && report.empty();  // see left_closes_within
    other_closed = wait_for_left ? left_closes_within(kDrainPatience)
                                 : has_closed(left ? right_ : left_);
  }
  if (other_closed) {
    message += detail::concat("\n  ", neighbour_name(!left), " closed the connection too");
  }
  if (!report.empty()) {
    message += detail::quote_failure_report(peer, report);
  } else {
    message += fault == PeerFault::Closed
                   ? detail::concat("\n  rank ", peer, " left no failure report: the process "
                                    "probably died (look at its own output)")
                   : detail::concat("\n  rank ", peer, " has not failed: it is hung, slower "
                                    "than the timeout, or in another collective (look at its "
                                    "own output)");
    message += "\nhint: every rank must call the same collectives in the same order; a rank "
               "that crashed shows its own error first";
  }
  DDP_FAIL(who(), ": ", message);
}

}  // namespace ddp
