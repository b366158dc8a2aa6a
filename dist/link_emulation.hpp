// ddp::LinkEmulation and ddp::EmulatedLink: a slower network on one machine, for the tcp
// process group. Chapter 07 uses it to show a slow link hurting naive DDP and bucketed
// all-reduce hiding it, on loopback.
//
// DDP_TCP_LINK=RATE,DELAY (e.g. "1gbit,50us") makes every ring connection of the tcp group
// behave like a link of that byte rate and one-way latency: the sender holds each byte
// until the moment it would have arrived at the far end of such a link, then writes it
// to the (instant) loopback socket. Only the collectives' bytes are paced; the set-up's
// handshake and the store are not. No jitter, no loss, no shared switch: one private link
// per neighbour, as the ring's cost model assumes (Note [Link model] in the .cpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/units.hpp"  // kMiB

namespace ddp {

// The environment variable, for messages and for ddp-train's help.
inline constexpr const char* kLinkVariable = "DDP_TCP_LINK";

// The grammar, said once, for the error of a bad value and for the docs.
inline constexpr const char* kLinkGrammar =
    "RATE,DELAY: RATE a positive number with kbit, mbit, gbit (bits/s, powers of 1000) or "
    "KB/s, MB/s, GB/s (bytes/s); DELAY the one-way latency, a number >= 0 with us or ms; "
    "units in any case, no spaces: \"1gbit,50us\", \"125MB/s,0.5ms\"";

struct LinkEmulation {
  double bytes_per_second = 0;     // > 0
  std::chrono::nanoseconds latency{0};  // one way, >= 0
  // DDP_TCP_LINK_SCOPE=between-hosts: pace only the links to a rank on another host, as a
  // cluster's network is slow and the links inside a node are not (chapter 07,
  // "Topology"); by default ("all") every link, which on one machine is the point.
  bool between_hosts_only = false;

  // "1 Gbit/s, 50 us" (describe_link)
  std::string describe() const;
};

// "1 Gbit/s, 50 us", "100 Mbit/s, 1.5 ms": a link's rate in bits per second (k, M, G:
// powers of 1000; "unlimited" when infinite) and its one-way latency (us, ms from 1 ms
// on). How every program names a link: LinkEmulation::describe() and the cost model's
// to_string(RingLink) (dist/parallel/cost_model.hpp).
std::string describe_link(double bytes_per_second, double latency_s);

// Parses "1gbit,50us" (kLinkGrammar). Throws ddp::Error naming `variable`, the value and
// the expected form.
LinkEmulation parse_link_emulation(const std::string& text,
                                   const char* variable = kLinkVariable);

// The scope's variable: "all" (the default) or "between-hosts".
inline constexpr const char* kLinkScopeVariable = "DDP_TCP_LINK_SCOPE";

// DDP_TCP_LINK parsed, with DDP_TCP_LINK_SCOPE; nullopt when DDP_TCP_LINK is unset or
// empty (the plain, unpaced links). A scope other than all or between-hosts is refused.
std::optional<LinkEmulation> link_emulation_from_env();

// One direction of one emulated link: the wire between our send() and the neighbour's
// socket. Bytes go in (accept) as a socket's send buffer takes them; each comes out
// (due) once the link would have delivered it, in frames (Note [Link model] in the .cpp).
// The caller writes what is due to the socket.
class EmulatedLink {
 public:
  using Clock = std::chrono::steady_clock;

  explicit EmulatedLink(LinkEmulation link);

  // Copies up to n bytes onto the wire, behind what is on it; returns how many: up to
  // kWireBytes held in all, none while more than half of that is held.
  std::size_t accept(const std::byte* data, std::size_t n, Clock::time_point now);
  // The bytes that have arrived by `now` and are not yet handed on (contiguous).
  std::span<const std::byte> due(Clock::time_point now) const;
  // The caller has written the first n bytes of due() to the socket.
  void delivered(std::size_t n);
  // Nothing on the wire.
  bool empty() const { return segments_.empty(); }
  // When the next frame arrives (time_point::max() when the wire is empty).
  Clock::time_point next_arrival(Clock::time_point now) const;

  const LinkEmulation& link() const { return link_; }
  // Bytes a frame: kFrameTime of wire time, and at least kMinFrameBytes.
  std::size_t frame_bytes() const { return frame_bytes_; }

  // What the wire holds at most, like a socket's send buffer (Linux grows one to 4 MiB):
  // the sender may run ahead of the wire by that much, and not be woken for every frame.
  static constexpr std::size_t kWireBytes = 4 * kMiB;
  // Bytes arrive in whole frames, an Ethernet frame's payload or, on a fast link, what it
  // carries in 10 us (a segment of the NIC's offloads): coarse enough that handing them
  // on costs the sender a system call every 10 us at most, fine enough to add little
  // to the latency.
  static constexpr std::size_t kMinFrameBytes = 1500;
  static constexpr std::chrono::microseconds kFrameTime{10};

 private:
  struct Segment {
    Clock::time_point start;  // when its first byte went on the wire
    std::vector<std::byte> bytes;
    std::size_t handed_on = 0;  // bytes of it already written to the socket
  };
  // How many bytes of `s` have arrived by `now`: whole frames, or all of it.
  std::size_t arrived(const Segment& s, Clock::time_point now) const;
  Clock::duration wire_time(std::size_t bytes) const;

  LinkEmulation link_;
  std::size_t frame_bytes_;
  std::deque<Segment> segments_;
  std::size_t held_ = 0;         // bytes in segments_ not yet handed on
  Clock::time_point free_at_{};  // when the wire has sent all it took
};

}  // namespace ddp
