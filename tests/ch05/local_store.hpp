// Test helper for chapters 05-07: a TCPStore on 127.0.0.1 for forked ranks. The parent
// starts the server (any free port) before it forks, in its own thread or, with
// ForkedStoreServer, in a process of its own; each rank connects a client.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include "dist/tcp_store.hpp"
#include "base/error.hpp"

namespace ddp::test {

// The server in a process of its own, for tests that then fork their ranks: the parent
// keeps no thread, so each rank is the child of a single-threaded process. (A child of a
// multi-threaded parent may only make async-signal-safe calls, says POSIX; glibc lets it
// start threads anyway, but ThreadSanitizer cannot follow it and ends it.) port() as
// TCPStore's; the destructor ends the server's process.
class ForkedStoreServer {
 public:
  ForkedStoreServer() {
    int fds[2];
    DDP_CHECK(::pipe(fds) == 0, "pipe() for the store server's port failed");
    std::fflush(nullptr);
    pid_ = ::fork();
    DDP_CHECK(pid_ >= 0, "fork() of the store server failed");
    if (pid_ == 0) {
      ::close(fds[0]);
      ::alarm(600);  // an orphan never outlives a hung test for long
      TCPStoreOptions o;
      o.port = 0;
      o.is_server = true;
      o.timeout = std::chrono::seconds(20);
      TCPStore server(o);
      const int port = server.port();
      if (::write(fds[1], &port, sizeof port) != sizeof port) ::_exit(1);
      for (;;) ::pause();  // serves on its thread until the parent's SIGKILL
    }
    ::close(fds[1]);
    const bool got = ::read(fds[0], &port_, sizeof port_) == sizeof port_;
    ::close(fds[0]);
    DDP_CHECK(got, "the store server's process did not report its port");
  }
  ~ForkedStoreServer() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  ForkedStoreServer(const ForkedStoreServer&) = delete;
  ForkedStoreServer& operator=(const ForkedStoreServer&) = delete;

  int port() const { return port_; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

inline std::unique_ptr<TCPStore> local_store_server() {
  TCPStoreOptions o;
  o.port = 0;
  o.is_server = true;
  o.timeout = std::chrono::seconds(20);
  return std::make_unique<TCPStore>(o);
}

inline std::shared_ptr<TCPStore> local_store_client(int port) {
  TCPStoreOptions o;
  o.port = port;
  o.timeout = std::chrono::seconds(20);
  return std::make_shared<TCPStore>(o);
}

}  // namespace ddp::test
