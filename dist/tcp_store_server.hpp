// ddp::TCPStoreServer, the server behind a TCPStore (dist/tcp_store.hpp): rank 0 runs it
// on a thread of its own, holds the job's keys and values, and answers every client,
// itself included, over TCP (Note [TCPStore server] in tcp_store_server.cpp). Chapter 05.
// Only a TCPStore with is_server makes one; programs talk to it through their TCPStore.
#pragma once

#include <atomic>
#include <cstddef>
#include <list>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dist/socket.hpp"
#include "dist/tcp_store.hpp"
#include "dist/tcp_store_protocol.hpp"

namespace ddp {

class TCPStoreServer {
 public:
  // Serves on `listener` from a thread of its own; a client must say `token` (the job
  // token) in its handshake.
  TCPStoreServer(Socket listener, std::string token);
  // Stops and joins the thread; clients still connected see their connection close.
  ~TCPStoreServer();

  int port() const { return listener_.local_port(); }

 private:
  using Clock = Socket::Clock;
  using StoreOp = detail::StoreOp;
  using StoreStatus = detail::StoreStatus;
  using StoreReader = detail::StoreReader;

  // Note [Bounded buffers] (tcp_store_server.cpp). The largest request is a COMPARE_SET
  // of two largest values.
  static constexpr std::size_t kMaxRequestBytes =
      1 + (4 + TCPStore::kMaxKeyBytes) + 2 * (8 + TCPStore::kMaxValueBytes);
  static_assert(kMaxRequestBytes >= 1 + 4 + TCPStore::kMaxKeysPerRequest *
                                                (4 + TCPStore::kMaxKeyBytes) + 8,
                "a WAIT on the most keys must fit too");
  static constexpr std::size_t kMaxPendingReplyBytes = TCPStore::kMaxValueBytes;

  struct Waiter {
    StoreOp op;                     // Get or Wait
    std::vector<std::string> keys;  // one for Get
    Clock::time_point deadline;
  };
  struct Client {
    Socket socket;
    std::string peer;
    bool greeted = false;
    bool closing = false;  // a violation: close once `out` has gone
    std::string in;
    std::string out;             // replies; the first `out_sent` bytes have gone
    std::size_t out_sent = 0;
    std::optional<Waiter> waiter;

    std::size_t unsent() const { return out.size() - out_sent; }
    // Note [Bounded buffers] (tcp_store_server.cpp) says why both limits.
    bool wants_input() const { return !closing && in.size() < kMaxRequestBytes; }
    bool may_answer() const { return unsent() < kMaxPendingReplyBytes; }
  };

  // ---- the thread: connections and bytes ----
  void serve();
  void accept_all();
  void read_from(Client& client);
  void flush(Client& client);
  // ---- the requests: each returns whether the request was complete in `r` ----
  bool handle_requests(Client& client);
  bool handshake(Client& client, StoreReader& r);
  bool request(Client& client, StoreReader& r);
  bool set(Client& client, StoreReader& r);
  bool get_or_wait(Client& client, StoreReader& r, StoreOp op);
  bool add(Client& client, StoreReader& r);
  bool compare_set(Client& client, StoreReader& r);
  bool check(Client& client, StoreReader& r);
  bool delete_key(Client& client, StoreReader& r);
  void num_keys(Client& client);
  static bool read_keys(StoreReader& r, std::vector<std::string>& keys);
  void violation(Client& client, const std::string& message);
  // ---- the waiting GETs and WAITs ----
  void answer_waiters(bool expire);
  bool try_answer(Client& client, bool expire);

  static void reply_ok(Client& client);
  static void reply_error(Client& client, const std::string& message);

  Socket listener_;
  std::string token_;
  Socket wake_read_;
  Socket wake_write_;
  std::atomic<bool> stop_ = false;
  // accept() failed (out of file descriptors, say): new connections wait until then.
  Clock::time_point accept_paused_until_{};
  std::list<Client> clients_;  // a list: pointers stay valid while others come and go
  std::map<std::string, std::string> data_;
  std::thread thread_;
};

}  // namespace ddp
