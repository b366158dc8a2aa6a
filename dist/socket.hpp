// ddp::Socket, a TCP connection (or listening socket) owned by one object. Chapter 05.
//
// The only place in ddp.cpp that calls the BSD socket API: TCPStore (dist/tcp_store.hpp)
// and the tcp process group's ring (dist/process_group_tcp.hpp) are built on it. Every
// socket is non-blocking; the blocking-looking calls (connect, accept, send_all,
// recv_all) wait with poll() until a deadline, so nothing here can hang. IPv4 and IPv6
// through getaddrinfo. No TLS, no authentication: a job token (tcp_store.hpp) only keeps
// two jobs that picked the same port apart.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

namespace ddp {

class Socket {
 public:
  using Clock = std::chrono::steady_clock;

  Socket() = default;  // no socket: valid() == false
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { close(); }
  Socket(Socket&& other) noexcept
      : fd_(std::exchange(other.fd_, -1)), peer_(std::move(other.peer_)) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  // ---- Making one ---------------------------------------------------------------------
  // A listening socket on `host`:`port` (SO_REUSEADDR). host "" or "0.0.0.0" = every
  // IPv4 interface, "::" = every interface; port 0 = any free port (see local_port()).
  static Socket listen(const std::string& host, int port, int backlog = 128);
  // The same, but a bind or listen that fails returns an invalid Socket and its errno in
  // `error` (EADDRINUSE: the port is taken), for a caller with something better to say.
  static Socket try_listen(const std::string& host, int port, int& error, int backlog = 128);

  // Connects to host:port, retrying refused or unreachable attempts with exponential
  // back-off (10 ms doubling to 1 s) until `deadline`. Throws ddp::Error naming the
  // address and the last errno when the deadline passes.
  static Socket connect(const std::string& host, int port, Clock::time_point deadline);

  // Waits (until `deadline`) for one connection on a listening socket. Returns an
  // invalid Socket when the deadline passes first.
  Socket accept(Clock::time_point deadline) const;

  // ---- Moving bytes -------------------------------------------------------------------
  // All `n` bytes, or ddp::Error (deadline passed, peer closed, or errno; the message
  // names the peer's address).
  void send_all(const void* data, std::size_t n, Clock::time_point deadline) const;
  void recv_all(void* data, std::size_t n, Clock::time_point deadline) const;

  // One non-blocking attempt, for callers that run their own poll() loop (the ring).
  enum class IoStatus { Ok, WouldBlock, Closed, Error };
  struct IoResult {
    IoStatus status = IoStatus::Ok;
    std::size_t bytes = 0;  // moved, when Ok
    int error = 0;          // errno, when Error
  };
  IoResult send_some(const void* data, std::size_t n) const noexcept;
  IoResult recv_some(void* data, std::size_t n) const noexcept;

  // ---- Options and names --------------------------------------------------------------
  void set_no_delay() const;                 // TCP_NODELAY: small messages go at once
  int local_port() const;                    // of a bound socket
  std::string local_address() const;         // numeric, "127.0.0.1"
  std::string peer_name() const;             // "127.0.0.1:40123", or "?" when unknown

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() noexcept;                    // gives up ownership, returns the fd
  void close() noexcept;
  void shutdown() const noexcept;            // wakes anyone polling this socket

 private:
  int fd_ = -1;
  // peer_name() as it was right after connect() or accept(): an error message still
  // names the peer once it has reset the connection (getpeername() then fails).
  std::string peer_;
};

// Memory to recv() into that starts on a page boundary. Where a receive buffer starts
// can make recv() three times slower: see Note [4K aliasing] in pipelined_ring.cpp.
// (A std::vector of a few MiB starts 16 bytes past a page: the slow case.)
class PageBuffer {
 public:
  static constexpr std::size_t kPage = 4096;
  explicit PageBuffer(std::size_t bytes);  // uninitialised; throws when out of memory
  std::byte* data() const { return data_.get(); }
  std::size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, Free> data_;
  std::size_t size_;
};

// "host:port", with brackets around an IPv6 host.
std::string format_address(const std::string& host, int port);

// The reverse: {"::1", 4711} from "[::1]:4711". Throws ddp::Error on a malformed address.
std::pair<std::string, int> split_address(const std::string& address);

// The numeric IPv4 address `host` resolves to ("10.1.2.3"), or "" when it does not.
std::string resolve_ipv4(const std::string& host);

// Milliseconds from now until `deadline`, clamped to [0, INT_MAX] (for poll()).
int remaining_ms(Socket::Clock::time_point deadline);

}  // namespace ddp
