// ddp::Socket (see socket.hpp): the BSD socket calls, each wrapped with its deadline.
#include "dist/socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>

#include "base/errno_text.hpp"
#include "base/error.hpp"

namespace ddp {

namespace {

void set_non_blocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  DDP_CHECK(flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0,
            "fcntl(O_NONBLOCK) failed: ", errno_text(errno));
}

// getaddrinfo, owned. Throws with the resolver's own words when the name is unknown.
using AddrList = std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)>;
AddrList resolve(const std::string& host, int port, bool passive, int* gai_error,
                 int family = AF_UNSPEC) {
  addrinfo hints{};
  hints.ai_family = family;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* list = nullptr;
  const std::string service = std::to_string(port);
  *gai_error = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &list);
  return AddrList(*gai_error == 0 ? list : nullptr, &::freeaddrinfo);
}

std::string numeric_host(const sockaddr* addr, socklen_t len, int* port) {
  char host[NI_MAXHOST];
  char serv[NI_MAXSERV];
  if (::getnameinfo(addr, len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "?";
  }
  if (port != nullptr) *port = std::atoi(serv);
  return host;
}

// Waits for `events` on fd until the deadline. True when they came.
bool poll_one(int fd, short events, Socket::Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, remaining_ms(deadline));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) DDP_FAIL("poll() failed: ", errno_text(errno));
  }
}

}  // namespace

int remaining_ms(Socket::Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Socket::Clock::now());
  return static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, INT_MAX));
}

std::string resolve_ipv4(const std::string& host) {
  int gai = 0;
  const AddrList list = resolve(host, 0, /*passive=*/false, &gai, AF_INET);
  if (list == nullptr) return "";
  const std::string numeric = numeric_host(list->ai_addr, list->ai_addrlen, nullptr);
  return numeric == "?" ? "" : numeric;
}

std::string format_address(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

PageBuffer::PageBuffer(std::size_t bytes)
    : data_(static_cast<std::byte*>(
          std::aligned_alloc(kPage, std::max<std::size_t>(1, (bytes + kPage - 1) / kPage) * kPage))),
      size_(bytes) {
  DDP_CHECK(data_ != nullptr, "out of memory: a receive buffer of ", bytes, " bytes");
}

std::pair<std::string, int> split_address(const std::string& address) {
  const auto colon = address.rfind(':');
  char* end = nullptr;
  const char* digits = colon == std::string::npos ? nullptr : address.c_str() + colon + 1;
  const long port = digits == nullptr ? -1 : std::strtol(digits, &end, 10);
  DDP_CHECK(port >= 0 && port <= 65535 && end != digits && *end == '\0',
            "malformed address \"", address, "\": expected host:port");
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  return {host, static_cast<int>(port)};
}

// ---- Ownership --------------------------------------------------------------------------

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = std::exchange(other.fd_, -1);
    peer_ = std::move(other.peer_);
  }
  return *this;
}

int Socket::release() noexcept {
  peer_.clear();
  return std::exchange(fd_, -1);
}

void Socket::close() noexcept {
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  peer_.clear();
}

void Socket::shutdown() const noexcept {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

// ---- Listen, connect, accept ------------------------------------------------------------

Socket Socket::listen(const std::string& host, int port, int backlog) {
  int error = 0;
  Socket s = try_listen(host, port, error, backlog);
  if (s.valid()) return s;
  DDP_FAIL("cannot listen on ", format_address(host.empty() ? "0.0.0.0" : host, port), ": ",
           errno_text(error), "\nhint: ",
           error == EADDRINUSE ? "another process holds that port; pick another (or 0 for any)"
                               : "is that address one of this host's interfaces?");
}

Socket Socket::try_listen(const std::string& host, int port, int& error, int backlog) {
  // "" means every IPv4 interface: cluster networks are IPv4, and an IPv6 wildcard
  // socket is not dual-stack everywhere.
  const std::string bind_host = host.empty() ? "0.0.0.0" : host;
  int gai = 0;
  AddrList list = resolve(bind_host, port, /*passive=*/true, &gai);
  DDP_CHECK(gai == 0, "cannot listen on ", format_address(bind_host, port), ": ",
            ::gai_strerror(gai), "\nhint: is the host name right and resolvable here?");
  error = 0;
  for (addrinfo* a = list.get(); a != nullptr; a = a->ai_next) {
    Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!s.valid()) {
      error = errno;
      continue;
    }
    const int one = 1;
    ::setsockopt(s.fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(s.fd_, a->ai_addr, a->ai_addrlen) != 0 || ::listen(s.fd_, backlog) != 0) {
      error = errno;
      continue;
    }
    set_non_blocking(s.fd_);
    return s;
  }
  return Socket();
}

Socket Socket::connect(const std::string& host, int port, Clock::time_point deadline) {
  const auto start = Clock::now();
  auto backoff = std::chrono::milliseconds(10);
  std::string last_error = "no attempt made (deadline already passed)";
  for (;;) {
    int gai = 0;
    AddrList list = resolve(host, port, /*passive=*/false, &gai);
    if (gai != 0) {
      last_error = std::string("cannot resolve host: ") + ::gai_strerror(gai);
      // An unknown name stays unknown: retrying would only delay the error.
      if (gai != EAI_AGAIN) break;
    }
    for (addrinfo* a = list.get(); a != nullptr; a = a->ai_next) {
      Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
      if (!s.valid()) {
        last_error = errno_text(errno);
        continue;
      }
      set_non_blocking(s.fd_);
      int error = 0;
      if (::connect(s.fd_, a->ai_addr, a->ai_addrlen) != 0) {
        error = errno;
        if (error == EINPROGRESS) {
          // The handshake runs in the kernel; writable means it finished, one way or
          // the other, and SO_ERROR says which.
          error = ETIMEDOUT;
          if (poll_one(s.fd_, POLLOUT, deadline)) {
            socklen_t len = sizeof error;
            ::getsockopt(s.fd_, SOL_SOCKET, SO_ERROR, &error, &len);
          }
        }
      }
      if (error == 0) {
        s.set_no_delay();
        s.peer_ = s.peer_name();
        return s;
      }
      last_error = errno_text(error);
    }
    if (Clock::now() >= deadline) break;
    // The last sleep is cut short so that one more attempt happens at the deadline.
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - Clock::now()));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  DDP_FAIL("could not connect to ", format_address(host, port), " within ", waited.count(),
           " ms (last error: ", last_error, ")");
}

Socket Socket::accept(Clock::time_point deadline) const {
  for (;;) {
    const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      Socket s(fd);
      s.set_no_delay();
      s.peer_ = s.peer_name();
      return s;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    DDP_CHECK(errno == EAGAIN || errno == EWOULDBLOCK, "accept() on port ", local_port(),
              " failed: ", errno_text(errno));
    if (!poll_one(fd_, POLLIN, deadline)) return Socket();
  }
}

// ---- Moving bytes -----------------------------------------------------------------------

Socket::IoResult Socket::send_some(const void* data, std::size_t n) const noexcept {
  for (;;) {
    // MSG_NOSIGNAL: a peer that has gone answers EPIPE here instead of killing us
    // with SIGPIPE.
    const ssize_t k = ::send(fd_, data, n, MSG_NOSIGNAL);
    if (k >= 0) return {IoStatus::Ok, static_cast<std::size_t>(k), 0};
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return {IoStatus::WouldBlock, 0, 0};
    if (errno == EPIPE || errno == ECONNRESET) return {IoStatus::Closed, 0, errno};
    return {IoStatus::Error, 0, errno};
  }
}

Socket::IoResult Socket::recv_some(void* data, std::size_t n) const noexcept {
  for (;;) {
    const ssize_t k = ::recv(fd_, data, n, 0);
    if (k > 0) return {IoStatus::Ok, static_cast<std::size_t>(k), 0};
    if (k == 0) return {n == 0 ? IoStatus::Ok : IoStatus::Closed, 0, 0};
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return {IoStatus::WouldBlock, 0, 0};
    if (errno == ECONNRESET) return {IoStatus::Closed, 0, errno};
    return {IoStatus::Error, 0, errno};
  }
}

void Socket::send_all(const void* data, std::size_t n, Clock::time_point deadline) const {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const IoResult r = send_some(p, n);
    if (r.status == IoStatus::Ok) {
      p += r.bytes;
      n -= r.bytes;
    } else if (r.status == IoStatus::WouldBlock) {
      DDP_CHECK(poll_one(fd_, POLLOUT, deadline), "timed out sending ", n, " bytes to ",
                peer_name());
    } else {
      DDP_FAIL(peer_name(), r.status == IoStatus::Closed ? " closed the connection" : "",
               " while we were sending to it (", errno_text(r.error), ")");
    }
  }
}

void Socket::recv_all(void* data, std::size_t n, Clock::time_point deadline) const {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    const IoResult r = recv_some(p, n);
    if (r.status == IoStatus::Ok) {
      p += r.bytes;
      n -= r.bytes;
    } else if (r.status == IoStatus::WouldBlock) {
      DDP_CHECK(poll_one(fd_, POLLIN, deadline), "timed out waiting for ", n, " bytes from ",
                peer_name());
    } else if (r.status == IoStatus::Closed) {
      DDP_FAIL(peer_name(), " closed the connection while we waited for ", n, " more bytes");
    } else {
      DDP_FAIL("recv from ", peer_name(), " failed: ", errno_text(r.error));
    }
  }
}

// ---- Options and names ------------------------------------------------------------------

void Socket::set_no_delay() const {
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int Socket::local_port() const {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  int port = -1;
  numeric_host(reinterpret_cast<sockaddr*>(&addr), len, &port);
  return port;
}

std::string Socket::local_address() const {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "?";
  return numeric_host(reinterpret_cast<sockaddr*>(&addr), len, nullptr);
}

std::string Socket::peer_name() const {
  if (!peer_.empty()) return peer_;
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "?";
  int port = 0;
  const std::string host = numeric_host(reinterpret_cast<sockaddr*>(&addr), len, &port);
  return format_address(host, port);
}

}  // namespace ddp
