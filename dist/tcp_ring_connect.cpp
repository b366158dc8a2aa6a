// Connecting ProcessGroupTcp's ring (see process_group_tcp.hpp), once, when the group is
// made: each rank publishes where it listens, connects to its right neighbour and accepts
// its left one, and the two introduce themselves. Chapter 05. Running the ring is
// pipelined_ring.cpp; naming a neighbour that fails later is tcp_ring_failures.cpp.
#include "dist/process_group_tcp.hpp"

#include <array>
#include <cstdint>

#include "base/error.hpp"
#include "dist/launch_env.hpp"  // host_name, process_label
#include "dist/socket.hpp"      // resolve_ipv4
#include "dist/tcp_store.hpp"

namespace ddp {

namespace {

constexpr std::uint32_t kRingMagic = 0x474e4952;  // "RING": the first bytes on a ring link

// The 16 bytes a rank sends first on its link to the right: the magic number, its rank,
// the world size, and which ring it runs (1: the plain one, 0: the pipelined one).
using RingHello = std::array<std::uint32_t, 4>;
RingHello ring_hello(int rank, int size, bool plain_ring) {
  return {kRingMagic, static_cast<std::uint32_t>(rank), static_cast<std::uint32_t>(size),
          plain_ring ? 1u : 0u};
}

// The address other hosts reach us at. Through a TCPStore it is the address of the
// interface our store connection left from (loopback when the store is on 127.0.0.1);
// otherwise (a FileStore) whatever our host name resolves to.
std::string reachable_address(Store& store) {
  if (auto* tcp = dynamic_cast<TCPStore*>(&store)) return tcp->local_address();
  const std::string address = resolve_ipv4(host_name());
  return address.empty() ? "127.0.0.1" : address;
}

}  // namespace

// Each rank listens, publishes where, connects to its right neighbour and accepts its
// left one. The connects cannot deadlock: the kernel completes a connection to a
// listening socket before anyone calls accept().
void ProcessGroupTcp::connect_ring(Clock::time_point deadline) {
  Socket listener = Socket::listen(reachable_address(*store_), 0);
  address_ = format_address(listener.local_address(), listener.local_port());
  // The host and the process first: whoever has read our address can read them (see
  // below), and name this process when it is lost.
  store_->set(prefix_ + "/host/" + std::to_string(rank()), host_name());
  store_->set(prefix_ + "/process/" + std::to_string(rank()), process_label());
  store_->set(prefix_ + "/addr/" + std::to_string(rank()), address_);

  connect_right(deadline);
  accept_left(listener, deadline);

  // Both neighbours published their process before their address: read at once, no wait.
  auto process_of = [this](int r) -> std::string {
    try {
      return store_->get(prefix_ + "/process/" + std::to_string(r), std::chrono::milliseconds(0));
    } catch (const Error&) {
      return "";
    }
  };
  left_process_ = process_of(neighbour(true));
  right_process_ = process_of(neighbour(false));
  right_host_ = store_->get(prefix_ + "/host/" + std::to_string(neighbour(false)),
                            std::chrono::milliseconds(0));
}

// The right neighbour's address, from the store; the connection to it; our hello on it.
// A neighbour that never published, or cannot be reached, is named with the likely cause.
void ProcessGroupTcp::connect_right(Clock::time_point deadline) {
  const int right_rank = neighbour(false);
  const std::string right_key = prefix_ + "/addr/" + std::to_string(right_rank);
  try {
    right_address_ = store_->get(right_key, timeout());
  } catch (const Error& e) {
    DDP_FAIL(who(), ": rank ", right_rank, " (our right neighbour) never published its ring "
             "address (store key \"", right_key, "\") within ", timeout().count(), " ms\n  (",
             e.what(), ")\nhint: did rank ", right_rank, " start, and with the same world size?");
  }
  const auto [right_host, right_port] = split_address(right_address_);
  try {
    right_ = Socket::connect(right_host, right_port, deadline);
  } catch (const Error& e) {
    // A loopback address from another host is the usual culprit with a FileStore: a host
    // name that resolves to 127.0.1.1, as Debian's /etc/hosts makes it. (Ranks on two
    // hosts may still share a loopback, in containers or the local test cluster: only
    // failing to connect tells.)
    std::string right_machine;
    try {
      right_machine = store_->get(prefix_ + "/host/" + std::to_string(right_rank),
                                  std::chrono::milliseconds(0));
    } catch (const Error&) {
    }
    const bool loopback = right_host.starts_with("127.") || right_host == "::1";
    DDP_FAIL(who(), ": cannot reach rank ", right_rank, " (right neighbour) at ",
             right_address_, "\n  (", e.what(), ")\nhint: ",
             loopback && !right_machine.empty() && right_machine != host_name()
                 ? detail::concat("rank ", right_rank, " runs on ", right_machine,
                                  " but published a loopback address: its host name resolves "
                                  "to one (/etc/hosts); use a TCPStore (init env:// or tcp://), "
                                  "or make host names resolve to the network's addresses")
                 : std::string("a firewall between the hosts, or the wrong interface? Each "
                               "rank listens where its store connection leaves from"));
  }
  // Introduce ourselves: the left neighbour checks it is talking to the right rank, and
  // that both run the same ring (the plain and the pipelined one cut chunks differently).
  const RingHello hello = ring_hello(rank(), size(), plain_ring_);
  right_.send_all(hello.data(), sizeof hello, deadline);
}

// Accepts connections on `listener` until one introduces itself as our left neighbour,
// running the same ring. A connection that does not say the ring's hello is dropped; a
// rank of another job or another ring is an error.
void ProcessGroupTcp::accept_left(const Socket& listener, Clock::time_point deadline) {
  const int left_rank = neighbour(true);
  const RingHello ours = ring_hello(rank(), size(), plain_ring_);
  while (!left_.valid()) {
    Socket s = listener.accept(deadline);
    DDP_CHECK(s.valid(), who(), ": rank ", left_rank, " (our left neighbour) never connected to ",
              address_, " within ", timeout().count(), " ms\n",
              "hint: did rank ", left_rank, " start? Is this address reachable from its host?");
    RingHello got = {};
    try {
      s.recv_all(got.data(), sizeof got, deadline);
    } catch (const Error&) {
      continue;  // not one of ours (a port scanner, say): wait for the real one
    }
    if (got[0] != kRingMagic) continue;
    DDP_CHECK(got[1] == static_cast<std::uint32_t>(left_rank) &&
                  got[2] == static_cast<std::uint32_t>(size()),
              who(), ": expected rank ", left_rank, " of ", size(), " on the ring, but rank ",
              got[1], " of ", got[2], " connected\nhint: two jobs share one store prefix?");
    const auto ring_name = [](bool plain) { return plain ? "plain" : "pipelined"; };
    DDP_CHECK(got[3] == ours[3], who(), ": rank ", left_rank, " (our left neighbour) runs the ",
              ring_name(got[3] == 1), " ring, this rank the ", ring_name(plain_ring_),
              " one\nhint: set DDP_TCP_RING the same on every rank (mpirun passes it on "
              "only with -x DDP_TCP_RING)");
    left_address_ = s.peer_name();
    left_ = std::move(s);
  }
}

}  // namespace ddp
