// ddp::TCPStore, the key-value store of a job, served by rank 0 over TCP. Chapter 05.
//
// Rank 0 (is_server) runs the server on a thread of its own and then, like every other
// rank, talks to it as a client through a socket: one code path for all ranks. The
// server is one thread polling every connection (Note [TCPStore server] in
// tcp_store_server.cpp); the bytes on the wire are Note [TCPStore wire protocol] in
// tcp_store_protocol.hpp. Not a database: keys and values live in rank 0's memory and die
// with it; values are small (rendezvous addresses, NCCL ids, counters), at most
// kMaxValueBytes.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dist/job_token.hpp"  // default_job_token
#include "dist/socket.hpp"
#include "dist/store.hpp"
#include "base/units.hpp"

namespace ddp {

class TCPStoreServer;  // tcp_store_server.hpp

struct TCPStoreOptions {
  std::string host = "127.0.0.1";  // where the server is (clients connect here)
  int port = 29500;                // 0 on the server: any free port, see TCPStore::port()
  bool is_server = false;          // true on exactly one rank (rank 0)
  // > 0: the constructor returns only once this many clients (the server's own
  // included) have connected, or throws after `timeout` saying how many did.
  int world_size = -1;
  // This client's rank, when known: rank 0's timeout error then names the ranks that
  // never connected. With world_size > 0, every client also checks that it was started
  // with rank 0's world size.
  int rank = -1;
  std::chrono::milliseconds timeout{kDefaultTimeout};  // connect and every wait
  // Both sides must agree; a client with another token is refused. "" = no check.
  // default_job_token() reads it from the environment.
  std::string job_token;

  // The usual rendezvous: rank 0 serves at host:port, every rank (rank 0 included)
  // connects, rank 0's constructor waits for all `world_size`, and the job token is
  // default_job_token(). init_process_group, ddp-doctor and ch00_hello all meet this way.
  static TCPStoreOptions for_rank(std::string host, int port, int rank, int world_size,
                                  std::chrono::milliseconds timeout);
};

// Set (once) by a process that finds its rank already claimed by another process: two
// launchers started for one job (Note [Claiming a rank] in tcp_store.cpp). Its value is
// the error, naming both processes; every rank that sees it stops with it.
inline constexpr const char* kStoreConflictKey = "__ddp/store/conflict";


class TCPStore final : public Store {
 public:
  static constexpr std::size_t kMaxKeyBytes = 4 * kKiB;
  static constexpr std::size_t kMaxValueBytes = 64 * kMiB;
  static constexpr std::size_t kMaxKeysPerRequest = 4096;
  static constexpr std::size_t kMaxTokenBytes = 1024;

  explicit TCPStore(TCPStoreOptions options);
  // Closes the connection; the server (if this rank runs it) stops and is joined.
  // Clients still connected to it see the connection close. Never throws.
  ~TCPStore() override;

  using Store::set;
  void set(const std::string& key, const std::string& value,
           std::chrono::milliseconds timeout) override;
  using Store::get;
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  std::string compare_set(const std::string& key, const std::string& expected,
                          const std::string& desired) override;
  using Store::wait;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  std::int64_t num_keys() override;

  const std::string& host() const { return options_.host; }
  int port() const { return port_; }  // the real one, also when options.port was 0
  // The address of this process on the interface that reaches the server: what other
  // ranks should use to reach us (the tcp process group listens there).
  std::string local_address() const { return socket_.local_address(); }

 private:
  class Request;  // builds one framed request (tcp_store.cpp)
  struct Reply {
    std::string bytes;                 // GET, COMPARE_SET: the value
    std::int64_t number = 0;           // ADD, NUM_KEYS, CHECK, DELETE
    bool timed_out = false;            // GET, WAIT: the server's timeout passed
    std::vector<std::string> missing;  // ... and these keys were still missing
  };
  // Sends a request, reads its whole reply; throws ddp::Error on an ERROR reply or a
  // lost connection. Thread-safe: one request in flight at a time.
  Reply round_trip(const Request& request, std::chrono::milliseconds reply_timeout);
  // The headcount of a job with a world size (Note [Joining the store]).
  void join_job();
  // Note [Claiming a rank] (tcp_store.cpp): a rank 0 whose port is taken looks whether a
  // store of this job serves there, and if so fails as a duplicate; fail_conflict posts
  // the error under kStoreConflictKey and throws it.
  void probe_taken_port();
  [[noreturn]] void fail_conflict(const std::string& what);
  static constexpr const char* kServerKey = "__ddp/store/server";  // who serves the store
  void check_key(const std::string& key) const;
  std::string where() const;  // "TCPStore client of 127.0.0.1:29500"

  TCPStoreOptions options_;
  int port_ = 0;
  std::unique_ptr<TCPStoreServer> server_;  // only on the serving rank
  std::mutex mutex_;                        // one request in flight at a time
  Socket socket_;
};

}  // namespace ddp
