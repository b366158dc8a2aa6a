// Test helper for chapter 05: a loopback port for a job whose ranks are told their
// MASTER_PORT before rank 0 binds it (ranks started by hand, or by mpirun).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <random>

#include "base/error.hpp"

namespace ddp::test {

// The usual trick, bind port 0 and close, returns a port from the kernel's ephemeral
// range (/proc/sys/net/ipv4/ip_local_port_range), the same range from which every
// outgoing connection of every other test running beside us takes its local port: one
// of them can take ours before rank 0 binds it (seen once in a ctest -j2 run). Below
// that range only explicit binds take ports, so we draw there, at random, until one
// binds. ddprun, which starts rank 0 itself, instead holds its port (tools/ddprun).
inline int free_test_port() {
  // Binds 127.0.0.1:port (0: any) and closes again at once (never listening, so the port
  // is free again); returns the port bound, or 0.
  auto try_bind = [](int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    DDP_CHECK(fd >= 0, "free_test_port: socket() failed");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof addr;
    const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                       ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) == 0;
    ::close(fd);
    return bound ? static_cast<int>(ntohs(addr.sin_port)) : 0;
  };
  int low = 32768, high = 60999;  // Linux's default range
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low >> high;
  // A few thousand ports just under the range; above it when the range starts too low.
  int first = std::max(1024, low - 8192), last = low - 1;
  if (last - first < 1024) first = high + 1, last = 65535;
  if (last - first < 1024) return try_bind(0);  // the range is everything: the usual trick
  std::uniform_int_distribution<int> pick(first, last);
  std::random_device seed;
  std::mt19937 random(seed());
  for (int attempt = 0; attempt < 200; ++attempt) {
    if (const int port = try_bind(pick(random)); port != 0) return port;
  }
  DDP_FAIL("free_test_port: 200 random loopback ports outside the ephemeral range ", low, "-",
           high, " were all taken");
}

}  // namespace ddp::test
