// TCPStore (see tcp_store.hpp): the wire protocol, the server thread, the client calls.
#include "dist/tcp_store.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <list>
#include <map>
#include <optional>
#include <thread>

#include "base/deadline.hpp"
#include "dist/launch_env.hpp"  // process_label
#include "base/error.hpp"
#include "base/errno_text.hpp"
#include "base/little_endian.hpp"
#include "base/who.hpp"  // name_ranks

namespace ddp {

// Note [TCPStore wire protocol]
// -----------------------------
// Every integer is little-endian. str32 = u32 length + bytes (keys, tokens, messages);
// str64 = u64 length + bytes (values, which may hold any bytes).
//
//   handshake  client -> server   u32 magic 0x53504444 ("DDPS")  u32 version (1)  str32 token
//              server -> client   u8 status  str32 message ("" when accepted)
//   request    client -> server   u8 op, then its arguments:
//     SET 1          str32 key  str64 value                   -> OK
//     GET 2          str32 key  u64 timeout_ms                -> OK str64 value | TIMEOUT
//     ADD 3          str32 key  i64 delta                     -> OK i64 new value
//     COMPARE_SET 4  str32 key  str64 expected  str64 desired -> OK str64 value now stored
//     WAIT 5         u32 n  n x str32 key  u64 timeout_ms     -> OK | TIMEOUT
//     CHECK 6        u32 n  n x str32 key                     -> OK u8 all exist
//     DELETE 7       str32 key                                -> OK u8 existed
//     NUM_KEYS 8                                              -> OK i64 count
//   reply      server -> client   u8 status: OK 0 | TIMEOUT 1 (u32 n  n x str32 missing key)
//                                 | ERROR 2 (str32 message)
//
// Bounds: key <= kMaxKeyBytes (4 KiB), value <= kMaxValueBytes (64 MiB), n <=
// kMaxKeysPerRequest, token <= kMaxTokenBytes. A bad magic, version or token, an unknown
// op or a length over its bound is a protocol violation: the server answers ERROR (the
// client can print why) and closes that one connection. An ADD on a value that is not
// an integer is an ERROR too, but the connection stays. GET and WAIT wait on the server
// (Note [TCPStore server]); their timeout travels with the request. ADD keeps the number
// as decimal text, so get() of a counter reads "3", as in PyTorch.

namespace {

constexpr std::uint32_t kMagic = 0x53504444;  // the bytes 'D' 'D' 'P' 'S' on the wire
constexpr std::uint32_t kVersion = 1;
// A reply may be late by the server's own timeout; on top of it we allow this much
// before deciding the server itself is gone: as long as the timeout itself, between
// 1 s (a quick question gets a quick verdict) and 10 s.
constexpr std::chrono::milliseconds kMinReplyGrace{1000};
constexpr std::chrono::milliseconds kReplyGrace{10000};
// How long the server stops accepting after accept() failed (TCPStoreServer::accept_all).
constexpr std::chrono::milliseconds kAcceptPause{100};
// Note [Bounded buffers]. The largest request is a COMPARE_SET of two largest values.
constexpr std::size_t kMaxRequestBytes =
    1 + (4 + TCPStore::kMaxKeyBytes) + 2 * (8 + TCPStore::kMaxValueBytes);
static_assert(kMaxRequestBytes >= 1 + 4 + TCPStore::kMaxKeysPerRequest *
                                              (4 + TCPStore::kMaxKeyBytes) + 8,
              "a WAIT on the most keys must fit too");
constexpr std::size_t kMaxPendingReplyBytes = TCPStore::kMaxValueBytes;

// Hello is the handshake (not a request op: its bytes are the handshake's own).
enum class Op : std::uint8_t {
  Hello = 0, Set, Get, Add, CompareSet, Wait, Check, Delete, NumKeys
};
enum class Status : std::uint8_t { Ok = 0, Timeout = 1, Error = 2 };

// ---- Encoding ---------------------------------------------------------------------------

// Integers: put_le and get_le (base/little_endian.hpp).
void put_u8(std::string& out, std::uint8_t v) { out.push_back(static_cast<char>(v)); }
void put_u32(std::string& out, std::uint32_t v) { put_le(out, v, 4); }
void put_u64(std::string& out, std::uint64_t v) { put_le(out, v, 8); }
void put_str32(std::string& out, const std::string& s) {
  put_u32(out, static_cast<std::uint32_t>(s.size()));
  out += s;
}
void put_str64(std::string& out, const std::string& s) {
  put_u64(out, s.size());
  out += s;
}

// Reads fields from the front of a buffer that may not hold the whole message yet.
// Each read returns false when the bytes have not arrived (try again after the next
// recv); a length over its bound sets `violation` (and returns false) at once, before
// the server has buffered a single byte of the oversized field.
struct Reader {
  const std::string& buffer;
  std::size_t pos;
  std::string violation;

  bool need(std::size_t n) const { return buffer.size() - pos >= n; }
  bool u8(std::uint8_t& v) {
    if (!need(1)) return false;
    v = static_cast<std::uint8_t>(buffer[pos++]);
    return true;
  }
  bool u32(std::uint32_t& v) {
    if (!need(4)) return false;
    v = static_cast<std::uint32_t>(get_le(&buffer[pos], 4));
    pos += 4;
    return true;
  }
  bool u64(std::uint64_t& v) {
    if (!need(8)) return false;
    v = get_le(&buffer[pos], 8);
    pos += 8;
    return true;
  }
  bool bytes(std::string& s, std::uint64_t n, std::uint64_t bound, const char* what) {
    if (n > bound) {
      violation = detail::concat(what, " of ", n, " bytes is over the limit of ", bound);
      return false;
    }
    if (!need(n)) return false;
    s.assign(buffer, pos, n);
    pos += n;
    return true;
  }
  bool str32(std::string& s, std::uint64_t bound, const char* what) {
    std::uint32_t n = 0;
    return u32(n) && bytes(s, n, bound, what);
  }
  bool str64(std::string& s, std::uint64_t bound, const char* what) {
    std::uint64_t n = 0;
    return u64(n) && bytes(s, n, bound, what);
  }
};

std::optional<std::int64_t> parse_int(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end != text.c_str() + text.size()) return std::nullopt;
  return v;
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host.starts_with("127.") || host == "::1";
}

}  // namespace

TCPStoreOptions TCPStoreOptions::for_rank(std::string host, int port, int rank,
                                          int world_size, std::chrono::milliseconds timeout) {
  TCPStoreOptions o;
  o.host = std::move(host);
  o.port = port;
  o.is_server = rank == 0;
  o.world_size = world_size;  // rank 0 returns once everyone has connected
  o.rank = rank;
  o.timeout = timeout;
  o.job_token = default_job_token();
  return o;
}

// ==== The server ========================================================================
//
// Note [TCPStore server]
// ----------------------
// One thread, one poll() over the listening socket, a wake-up socket (the destructor
// writes to it) and every client. Why not a thread per client? The map then needs a
// lock and every waiting GET a condition variable; here the map belongs to one thread
// and a waiting GET is just data: the client's `waiter`, answered when a SET makes its
// keys exist or its deadline passes (poll()'s timeout is the nearest deadline). A
// store serves a few requests per rank at start-up, so one thread is never the limit.
// Each client has an input buffer (requests are parsed when complete) and an output
// buffer (flushed when the socket takes it): a slow or hostile client stalls no one.
// Both are bounded (Note [Bounded buffers]).
//
// Note [Bounded buffers]
// A client that sends requests faster than it reads the replies (hostile, or stuck in a
// loop) must not make rank 0 buffer without end: a thousand pipelined GETs of a 64 MiB
// value would be 64 GiB of replies. So the server reads from a client only while its
// input holds less than the largest request (anything shorter may be an unfinished
// request, which must be let in), and answers only while its output holds less than the
// largest value. The rest waits in the client's socket, and TCP's flow control holds the
// client back: per client, at most about two largest requests in and two replies out.

class TCPStoreServer {
 public:
  TCPStoreServer(Socket listener, std::string token)
      : listener_(std::move(listener)), token_(std::move(token)) {
    int fds[2];
    DDP_CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds) == 0,
              "socketpair() for the TCPStore server's wake-up failed");
    wake_read_ = Socket(fds[0]);
    wake_write_ = Socket(fds[1]);
    thread_ = std::thread([this] { serve(); });
  }

  ~TCPStoreServer() {
    stop_ = true;
    const char byte = 1;
    (void)wake_write_.send_some(&byte, 1);
    thread_.join();
  }

  int port() const { return listener_.local_port(); }

 private:
  using Clock = Socket::Clock;

  struct Waiter {
    Op op;                          // Get or Wait
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
    // Note [Bounded buffers]
    bool wants_input() const { return !closing && in.size() < kMaxRequestBytes; }
    bool may_answer() const { return unsent() < kMaxPendingReplyBytes; }
  };

  void serve();
  void accept_all();
  void read_from(Client& client);
  void flush(Client& client);
  bool handle_requests(Client& client);
  bool handshake(Client& client, Reader& r);
  bool request(Client& client, Reader& r);
  void violation(Client& client, const std::string& message);
  void answer_waiters(bool expire);
  bool try_answer(Client& client, bool expire);

  static void reply_error(Client& client, const std::string& message) {
    put_u8(client.out, static_cast<std::uint8_t>(Status::Error));
    put_str32(client.out, message);
  }

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

void TCPStoreServer::serve() {
  std::vector<pollfd> fds;
  while (!stop_) {
    fds.clear();
    fds.push_back({wake_read_.fd(), POLLIN, 0});
    auto next_deadline = Clock::time_point::max();
    const bool accepting = Clock::now() >= accept_paused_until_;
    fds.push_back({accepting ? listener_.fd() : -1, POLLIN, 0});  // poll() skips fd -1
    if (!accepting) next_deadline = accept_paused_until_;
    for (Client& c : clients_) {
      short events = c.wants_input() ? POLLIN : 0;
      if (c.unsent() > 0) events |= POLLOUT;
      fds.push_back({c.socket.fd(), events, 0});
      if (c.waiter) next_deadline = std::min(next_deadline, c.waiter->deadline);
    }
    const int timeout =
        next_deadline == Clock::time_point::max() ? -1 : remaining_ms(next_deadline);
    if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) {
      std::cerr << "ddp: TCPStore server: poll() failed: " << errno_text() << "\n";
      return;
    }
    if (fds[0].revents != 0) continue;  // the destructor: stop_ is set
    if (fds[1].revents != 0) accept_all();
    std::size_t i = 2;
    for (Client& c : clients_) {
      if (i >= fds.size()) break;  // accepted this round: polled next round
      const short ev = fds[i++].revents;
      if ((ev & (POLLHUP | POLLERR)) && !c.wants_input()) {
        c.socket.close();  // gone while not read from: nothing to wait for (no spinning)
      } else if (ev & (POLLIN | POLLHUP | POLLERR)) {
        read_from(c);
      }
      if (c.unsent() > 0) flush(c);
    }
    answer_waiters(/*expire=*/true);
    for (Client& c : clients_) {
      // Answer, send what the socket takes, and answer again while that made room: when
      // the socket takes it all, no POLLOUT would ever come back to wake us for the rest.
      while (handle_requests(c)) {
        flush(c);
        if (!c.may_answer()) break;  // the socket is full: POLLOUT brings us back
      }
      if (c.unsent() > 0) flush(c);
    }
    clients_.remove_if([](const Client& c) {
      return !c.socket.valid() || (c.closing && c.unsent() == 0);
    });
  }
}

// An accept() that fails (EMFILE: the process is out of file descriptors, as rank 0 of
// a job of ~1000 ranks is under the usual limit of 1024) must not end the server thread,
// which would end rank 0: the store keeps serving the clients it has, and tries new ones
// again after kAcceptPause (the listener stays readable: retrying at once would spin).
void TCPStoreServer::accept_all() {
  for (;;) {
    Socket s;
    try {
      s = listener_.accept(Clock::now());
    } catch (const Error& e) {
      const std::string what = e.what();
      std::cerr << "ddp: TCPStore server: " << what.substr(0, what.find('\n'))
                << "; new connections wait " << kAcceptPause.count() << " ms (serving "
                << clients_.size() << " clients; if this repeats, raise `ulimit -n`)\n";
      accept_paused_until_ = Clock::now() + kAcceptPause;
      return;
    }
    if (!s.valid()) return;
    Client& c = clients_.emplace_back();
    c.peer = s.peer_name();
    c.socket = std::move(s);
  }
}

void TCPStoreServer::read_from(Client& client) {
  char buffer[256 * 1024];
  while (client.wants_input()) {
    const Socket::IoResult r = client.socket.recv_some(buffer, sizeof buffer);
    if (r.status == Socket::IoStatus::Ok && r.bytes > 0) {
      client.in.append(buffer, r.bytes);
      if (r.bytes < sizeof buffer) return;
    } else if (r.status == Socket::IoStatus::WouldBlock) {
      return;
    } else {
      client.socket.close();  // the client left (or broke): forget it
      return;
    }
  }
}

void TCPStoreServer::flush(Client& client) {
  while (client.socket.valid() && client.unsent() > 0) {
    const Socket::IoResult r =
        client.socket.send_some(client.out.data() + client.out_sent, client.unsent());
    if (r.status == Socket::IoStatus::Ok) {
      client.out_sent += r.bytes;
    } else if (r.status == Socket::IoStatus::WouldBlock) {
      break;
    } else {
      client.socket.close();
    }
  }
  // Drop what has gone once it is at least half the buffer: each byte moves at most
  // once more, instead of erasing the front of a 64 MiB reply after every send.
  if (client.out_sent > 0 && client.out_sent >= client.unsent()) {
    client.out.erase(0, client.out_sent);
    client.out_sent = 0;
  }
}

void TCPStoreServer::violation(Client& client, const std::string& message) {
  std::cerr << "ddp: TCPStore server on port " << port() << ": closing the connection from "
            << client.peer << ": " << message << "\n";
  reply_error(client, message);
  client.closing = true;
  client.in.clear();
}

// Parses and answers every complete request in the client's input buffer, in order.
// A client whose GET or WAIT is waiting gets no further requests read until answered,
// nor one that has not taken its replies yet (Note [Bounded buffers]): then it returns
// true, requests are left and only sending makes room for their answers.
bool TCPStoreServer::handle_requests(Client& client) {
  while (client.socket.valid() && !client.closing && !client.waiter && !client.in.empty()) {
    if (!client.may_answer()) return true;
    Reader r{client.in, 0, {}};
    const bool complete = client.greeted ? request(client, r) : handshake(client, r);
    if (!r.violation.empty()) {
      violation(client, r.violation);
      return false;
    }
    if (!complete) return false;  // the rest has not arrived yet
    client.in.erase(0, r.pos);
  }
  return false;
}

bool TCPStoreServer::handshake(Client& client, Reader& r) {
  std::uint32_t magic = 0;
  std::uint32_t version = 0;
  if (!r.u32(magic)) return false;
  if (magic != kMagic) {
    r.violation = "not a ddp TCPStore client (bad magic number)";
    return false;
  }
  std::string token;
  if (!r.u32(version) || !r.str32(token, TCPStore::kMaxTokenBytes, "job token")) return false;
  if (version != kVersion) {
    r.violation = detail::concat("protocol version ", version, ", this server speaks ", kVersion);
  } else if (token != token_) {
    r.violation = detail::concat("job token mismatch (server's is '", token_, "', client's is '",
                                 token, "'): the client belongs to another job");
  } else {
    client.greeted = true;
    put_u8(client.out, static_cast<std::uint8_t>(Status::Ok));
    put_str32(client.out, "");
    return true;
  }
  return false;
}

bool TCPStoreServer::request(Client& client, Reader& r) {
  constexpr auto kKey = TCPStore::kMaxKeyBytes;
  constexpr auto kValue = TCPStore::kMaxValueBytes;
  std::uint8_t op_byte = 0;
  if (!r.u8(op_byte)) return false;
  const auto op = static_cast<Op>(op_byte);
  std::string key;
  std::string& out = client.out;
  auto ok = [&out] { put_u8(out, static_cast<std::uint8_t>(Status::Ok)); };
  auto read_keys = [&r](std::vector<std::string>& keys) {
    std::uint32_t n = 0;
    if (!r.u32(n)) return false;
    if (n > TCPStore::kMaxKeysPerRequest) {
      r.violation = detail::concat(n, " keys in one request, over the limit of ",
                                   TCPStore::kMaxKeysPerRequest);
      return false;
    }
    keys.resize(n);
    for (auto& k : keys) {
      if (!r.str32(k, kKey, "key")) return false;
    }
    return true;
  };
  switch (op) {
    case Op::Set: {
      std::string value;
      if (!r.str32(key, kKey, "key") || !r.str64(value, kValue, "value")) return false;
      data_[key] = std::move(value);
      ok();
      answer_waiters(/*expire=*/false);
      return true;
    }
    case Op::Get:
    case Op::Wait: {
      std::vector<std::string> keys;
      std::uint64_t timeout_ms = 0;
      if (op == Op::Get) {
        keys.resize(1);
        if (!r.str32(keys[0], kKey, "key")) return false;
      } else if (!read_keys(keys)) {
        return false;
      }
      if (!r.u64(timeout_ms)) return false;
      timeout_ms = std::min<std::uint64_t>(timeout_ms, 365ull * 24 * 3600 * 1000);
      client.waiter = Waiter{op, std::move(keys),
                             Clock::now() + std::chrono::milliseconds(timeout_ms)};
      try_answer(client, /*expire=*/false);
      return true;
    }
    case Op::Add: {
      std::uint64_t delta = 0;
      if (!r.str32(key, kKey, "key") || !r.u64(delta)) return false;
      auto it = data_.find(key);
      std::optional<std::int64_t> current = it == data_.end() ? 0 : parse_int(it->second);
      if (!current) {
        reply_error(client, detail::concat("add(\"", key, "\") on a value that is not an integer"));
        return true;
      }
      // Wraps like two's complement instead of overflowing (undefined for signed).
      const auto sum = static_cast<std::int64_t>(static_cast<std::uint64_t>(*current) + delta);
      data_[key] = std::to_string(sum);
      ok();
      put_u64(out, static_cast<std::uint64_t>(sum));
      answer_waiters(/*expire=*/false);
      return true;
    }
    case Op::CompareSet: {
      std::string expected;
      std::string desired;
      if (!r.str32(key, kKey, "key") || !r.str64(expected, kValue, "value") ||
          !r.str64(desired, kValue, "value")) {
        return false;
      }
      auto it = data_.find(key);
      const bool swap = it == data_.end() ? expected.empty() : it->second == expected;
      if (swap) data_[key] = std::move(desired);
      it = data_.find(key);
      ok();
      put_str64(out, it == data_.end() ? std::string() : it->second);
      if (swap) answer_waiters(/*expire=*/false);
      return true;
    }
    case Op::Check: {
      std::vector<std::string> keys;
      if (!read_keys(keys)) return false;
      const bool all = std::all_of(keys.begin(), keys.end(),
                                   [this](const std::string& k) { return data_.contains(k); });
      ok();
      put_u8(out, all ? 1 : 0);
      return true;
    }
    case Op::Delete: {
      if (!r.str32(key, kKey, "key")) return false;
      const bool existed = data_.erase(key) > 0;
      ok();
      put_u8(out, existed ? 1 : 0);
      return true;
    }
    case Op::NumKeys:
      ok();
      put_u64(out, data_.size());
      return true;
    case Op::Hello: break;
  }
  r.violation = detail::concat("unknown request op ", int(op_byte));
  return false;
}

void TCPStoreServer::answer_waiters(bool expire) {
  for (Client& c : clients_) {
    if (c.waiter) try_answer(c, expire);
  }
}

// Answers a waiting GET/WAIT when its keys exist, or (with `expire`) when its deadline
// has passed. Returns whether it was answered.
bool TCPStoreServer::try_answer(Client& client, bool expire) {
  Waiter& w = *client.waiter;
  std::vector<std::string> missing;
  for (const auto& k : w.keys) {
    if (!data_.contains(k)) missing.push_back(k);
  }
  if (missing.empty()) {
    put_u8(client.out, static_cast<std::uint8_t>(Status::Ok));
    if (w.op == Op::Get) put_str64(client.out, data_.at(w.keys[0]));
  } else if (expire && Clock::now() >= w.deadline) {
    put_u8(client.out, static_cast<std::uint8_t>(Status::Timeout));
    put_u32(client.out, static_cast<std::uint32_t>(missing.size()));
    for (const auto& k : missing) put_str32(client.out, k);
  } else {
    return false;
  }
  client.waiter.reset();
  return true;
}

// ==== The client ========================================================================

class TCPStore::Request {
 public:
  explicit Request(Op op) : op_(op) { put_u8(bytes_, static_cast<std::uint8_t>(op)); }
  Request& str32(const std::string& s) { put_str32(bytes_, s); return *this; }
  Request& str64(const std::string& s) { put_str64(bytes_, s); return *this; }
  Request& u64(std::uint64_t v) { put_u64(bytes_, v); return *this; }
  Request& keys(const std::vector<std::string>& keys) {
    put_u32(bytes_, static_cast<std::uint32_t>(keys.size()));
    for (const auto& k : keys) put_str32(bytes_, k);
    return *this;
  }
  // The handshake: magic, version, token (no op byte).
  static Request hello(const std::string& token) {
    Request r(Op::Hello);
    r.bytes_.clear();
    put_u32(r.bytes_, kMagic);
    put_u32(r.bytes_, kVersion);
    put_str32(r.bytes_, token);
    return r;
  }
  Op op() const { return op_; }
  const std::string& bytes() const { return bytes_; }

 private:
  Op op_;
  std::string bytes_;
};

TCPStore::TCPStore(TCPStoreOptions options) : options_(std::move(options)) {
  set_timeout(options_.timeout);
  DDP_CHECK(options_.job_token.size() <= kMaxTokenBytes, "job token of ",
            options_.job_token.size(), " bytes; at most ", kMaxTokenBytes);
  port_ = options_.port;
  if (options_.is_server) {
    // Listen where the others can reach us: every interface, unless the job is all on
    // this host (a loopback MASTER_ADDR), where loopback alone keeps the port private.
    const std::string listen_host = is_loopback(options_.host) ? options_.host : "";
    int error = 0;
    Socket listener = Socket::try_listen(listen_host, options_.port, error);
    if (!listener.valid()) {
      if (error == EADDRINUSE && options_.world_size > 0) probe_taken_port();
      listener = Socket::listen(listen_host, options_.port);  // throws, naming the cause
    }
    server_ = std::make_unique<TCPStoreServer>(std::move(listener), options_.job_token);
    port_ = server_->port();
  }
  const auto deadline = deadline_after(options_.timeout);
  try {
    socket_ = Socket::connect(options_.host, port_, deadline);
  } catch (const Error& e) {
    DDP_FAIL("no store server at ", format_address(options_.host, port_), " after ",
             options_.timeout.count() / 1000.0, " s: is rank 0 up?\n  (", e.what(), ")\n",
             "hint: every rank must use rank 0's MASTER_ADDR and MASTER_PORT; rank 0 must "
             "start within the timeout");
  }
  try {
    round_trip(Request::hello(options_.job_token), options_.timeout);
  } catch (const Error& e) {
    DDP_FAIL("the store server at ", format_address(options_.host, port_),
             " refused this client: ", e.what(),
             "\nhint: all ranks of one job must share the job token (DDP_JOB_TOKEN, "
             "SLURM_JOB_ID or PBS_JOBID); is another job using this port?");
  }
  if (options_.is_server && options_.world_size > 0) set(kServerKey, process_label());
  if (options_.world_size > 0) join_job();
}

// Note [Claiming a rank]
// ----------------------
// A launcher started twice for one job (srun --ntasks-per-node=1 inside an allocation
// of 2 tasks per node starts 2 ddprun per node) makes two processes for every rank,
// with one MASTER_PORT. Without a check, one rank 0 fails on "address already in use"
// and the rest wait out the timeout for peers that will never come. So:
//   - every rank claims its number in the store (compare_set of "__ddp/store/claim/<r>"
//     from "" to "host, pid P"); a second claimant fails at once, naming both;
//   - a rank 0 whose port is taken looks whether a store of this job is serving there
//     (a quick handshake): if so, it is the second rank 0, and fails naming the process
//     that serves the store ("__ddp/store/server");
//   - either way it posts the error under kStoreConflictKey (tcp_store.hpp), which the
//     first set's ranks look at while rank 0 waits for everyone (join_job), once the tcp
//     ring is connected, and from the watchdog (dist/parallel/watchdog.hpp): every rank
//     of both sets stops within seconds, with the same message.
void TCPStore::fail_conflict(const std::string& what) {
  const std::string why = detail::concat(
      what, "\nhint: the launcher was started twice on this node? (e.g. srun "
      "--ntasks-per-node=1 inside an allocation with 2 tasks per node starts 2 ddprun per "
      "node); or two jobs share MASTER_PORT ", port_);
  try {
    compare_set(kStoreConflictKey, "", why);
  } catch (const Error&) {  // the error below says it all the same
  }
  DDP_FAIL(why);
}

void TCPStore::probe_taken_port() {
  try {
    socket_ = Socket::connect(options_.host, options_.port,
                              Clock::now() + std::chrono::milliseconds(500));
    // A store of this job answers the handshake at once; anything else (another program
    // on the port, another job's token) does not, and the port is simply taken.
    round_trip(Request::hello(options_.job_token), std::chrono::milliseconds(200));
  } catch (const Error&) {
    socket_.close();
    return;
  }
  port_ = options_.port;
  std::string server = "?";
  try {
    server = get(kServerKey, std::chrono::milliseconds(1000));
  } catch (const Error&) {
  }
  fail_conflict(detail::concat("two processes were started as rank 0 of this job: ", server,
                               " serves the store at ",
                               format_address(options_.host, options_.port), ", and ",
                               process_label(), ", started later, found that port taken"));
}

// Note [Joining the store]
// ------------------------
// With a world size, the constructor is also the job's first headcount. Rank 0 posts
// the world size it was started with; every other rank reads it and compares it with
// its own before it counts itself in, so "rank 0 thinks 2, rank 1 thinks 3" is an error
// on both sides (the disagreeing rank posts why, and rank 0 reports it) instead of a
// timeout about a neighbour that never connected. Each rank also marks itself present,
// so that rank 0's timeout error can name the ranks that are missing.
void TCPStore::join_job() {
  const std::string world = std::to_string(options_.world_size);
  const std::string me = options_.rank >= 0 ? "rank " + std::to_string(options_.rank)
                                            : std::string("a client");
  if (options_.is_server) {
    set("__ddp/store/world_size", world);
  } else {
    const std::string expected = get("__ddp/store/world_size", options_.timeout);
    if (expected != world) {
      const std::string why = me + " was started with world size " + world +
                              ", but rank 0 with " + expected;
      set("__ddp/store/mismatch", why);
      DDP_FAIL(why, " (store at ", format_address(options_.host, port_), ")\n",
               "hint: every rank must see the same WORLD_SIZE / SLURM_NTASKS / -np");
    }
  }
  if (options_.rank >= 0) {  // Note [Claiming a rank]
    const std::string claimant = process_label();
    const std::string holder =
        compare_set("__ddp/store/claim/" + std::to_string(options_.rank), "", claimant);
    if (holder != claimant) {
      fail_conflict(detail::concat("rank ", options_.rank, " of ", options_.world_size,
                                   " is claimed twice: by ", holder, " first, and by ", claimant,
                                   " second, through the store at ",
                                   format_address(options_.host, port_)));
    }
  }
  if (options_.rank >= 0) set("__ddp/store/present/" + std::to_string(options_.rank), "1");
  const std::int64_t joined = add("__ddp/store/joined", 1);
  if (joined == options_.world_size) set("__ddp/store/all_joined", "1");
  if (!options_.is_server) return;

  // Rank 0 waits for everyone, looking out for a rank that disagreed.
  const auto deadline = deadline_after(options_.timeout);
  while (!check({"__ddp/store/all_joined"})) {
    if (check({kStoreConflictKey})) {
      DDP_FAIL(get(kStoreConflictKey, std::chrono::milliseconds(0)));
    }
    if (check({"__ddp/store/mismatch"})) {
      DDP_FAIL(get("__ddp/store/mismatch", std::chrono::milliseconds(0)),
               "\nhint: every rank must see the same WORLD_SIZE / SLURM_NTASKS / -np");
    }
    if (Clock::now() >= deadline) {
      std::vector<int> missing;
      for (int r = 0; options_.rank >= 0 && r < options_.world_size; ++r) {
        if (!check({"__ddp/store/present/" + std::to_string(r)})) missing.push_back(r);
      }
      DDP_FAIL("only ", get("__ddp/store/joined", std::chrono::milliseconds(0)), " of ",
               options_.world_size, " ranks connected to the store at ",
               format_address(options_.host, port_), " within ", options_.timeout.count(),
               " ms", missing.empty() ? "" : "; missing: " + name_ranks(missing), "\n",
               "hint: did every rank start, with the same MASTER_ADDR/MASTER_PORT?");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

TCPStore::~TCPStore() {
  socket_.close();
  server_.reset();  // stops and joins the server thread
}

std::string TCPStore::where() const {
  return "TCPStore client of " + format_address(options_.host, port_);
}

void TCPStore::check_key(const std::string& key) const {
  DDP_CHECK(key.size() <= kMaxKeyBytes, "store key of ", key.size(), " bytes; at most ",
            kMaxKeyBytes, " (key starts \"", key.substr(0, 40), "\")");
}

// Sends one request and reads its reply, whole: the payload its op implies on OK, the
// missing keys on TIMEOUT, the server's message (thrown) on ERROR. The lock is held
// from the first byte sent to the last byte read, so threads may share one TCPStore.
TCPStore::Reply TCPStore::round_trip(const Request& request,
                                     std::chrono::milliseconds reply_timeout) {
  std::lock_guard lock(mutex_);
  DDP_CHECK(socket_.valid(), where(), ": the connection to the server was lost earlier");
  const auto deadline =
      deadline_after(std::min(reply_timeout, kNoDeadline) +
                     std::clamp(reply_timeout, kMinReplyGrace, kReplyGrace));
  const Op op = request.op();
  Reply reply;
  std::string server_error;
  try {
    socket_.send_all(request.bytes().data(), request.bytes().size(), deadline);
    auto read_u8 = [&] {
      std::uint8_t b = 0;
      socket_.recv_all(&b, 1, deadline);
      return b;
    };
    auto read_uint = [&](int bytes) {
      char b[8];
      socket_.recv_all(b, static_cast<std::size_t>(bytes), deadline);
      return get_le(b, bytes);
    };
    auto read_bytes = [&](std::uint64_t n) {
      DDP_CHECK(n <= kMaxValueBytes, where(), ": reply of ", n, " bytes is over the limit");
      std::string s(n, '\0');
      socket_.recv_all(s.data(), n, deadline);
      return s;
    };
    const std::uint8_t status = read_u8();
    if (status == static_cast<std::uint8_t>(Status::Error)) {
      server_error = read_bytes(read_uint(4));
    } else if (status == static_cast<std::uint8_t>(Status::Timeout)) {
      const auto n = read_uint(4);
      DDP_CHECK(n <= kMaxKeysPerRequest, where(), ": malformed TIMEOUT reply");
      for (std::uint64_t i = 0; i < n; ++i) reply.missing.push_back(read_bytes(read_uint(4)));
      reply.timed_out = true;
    } else {
      DDP_CHECK(status == static_cast<std::uint8_t>(Status::Ok), where(),
                ": bad reply status ", int(status));
      switch (op) {
        case Op::Hello: reply.bytes = read_bytes(read_uint(4)); break;
        case Op::Get:
        case Op::CompareSet: reply.bytes = read_bytes(read_uint(8)); break;
        case Op::Add:
        case Op::NumKeys: reply.number = static_cast<std::int64_t>(read_uint(8)); break;
        case Op::Check:
        case Op::Delete: reply.number = read_u8(); break;
        case Op::Set:
        case Op::Wait: break;
      }
    }
  } catch (const Error&) {
    // A half-sent request or half-read reply leaves the stream out of step: this
    // connection is done, and later calls say so.
    socket_.close();
    throw;
  }
  // An ERROR reply was read whole, so the connection is still in step.
  if (!server_error.empty()) DDP_FAIL(where(), ": the server answered: ", server_error);
  return reply;
}

namespace {
std::string join(const std::vector<std::string>& keys) {
  std::string s;
  for (const auto& k : keys) s += (s.empty() ? "\"" : ", \"") + k + "\"";
  return s;
}
}  // namespace

void TCPStore::set(const std::string& key, const std::string& value,
                   std::chrono::milliseconds timeout) {
  check_key(key);
  DDP_CHECK(value.size() <= kMaxValueBytes, "store value for \"", key, "\" of ", value.size(),
            " bytes; at most ", kMaxValueBytes, "\nhint: the store is for rendezvous, not data");
  round_trip(Request(Op::Set).str32(key).str64(value), timeout);
}

std::string TCPStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  check_key(key);
  const auto ms = static_cast<std::uint64_t>(std::max<std::int64_t>(timeout.count(), 0));
  Reply reply = round_trip(Request(Op::Get).str32(key).u64(ms), timeout);
  DDP_CHECK(!reply.timed_out, where(), ": get(\"", key, "\") timed out after ", timeout.count(),
            " ms: key \"", key, "\" was never set\n",
            "hint: the rank that sets it may have died, be slow, or use another key name");
  return std::move(reply.bytes);
}

std::int64_t TCPStore::add(const std::string& key, std::int64_t delta) {
  check_key(key);
  return round_trip(Request(Op::Add).str32(key).u64(static_cast<std::uint64_t>(delta)),
                    timeout())
      .number;
}

std::string TCPStore::compare_set(const std::string& key, const std::string& expected,
                                  const std::string& desired) {
  check_key(key);
  DDP_CHECK(expected.size() <= kMaxValueBytes && desired.size() <= kMaxValueBytes,
            "compare_set(\"", key, "\"): value over ", kMaxValueBytes, " bytes");
  return round_trip(Request(Op::CompareSet).str32(key).str64(expected).str64(desired),
                    timeout())
      .bytes;
}

void TCPStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  DDP_CHECK(keys.size() <= kMaxKeysPerRequest, "wait() on ", keys.size(), " keys; at most ",
            kMaxKeysPerRequest);
  for (const auto& k : keys) check_key(k);
  const auto ms = static_cast<std::uint64_t>(std::max<std::int64_t>(timeout.count(), 0));
  const Reply reply = round_trip(Request(Op::Wait).keys(keys).u64(ms), timeout);
  DDP_CHECK(!reply.timed_out, where(), ": wait() timed out after ", timeout.count(),
            " ms; still missing: ", join(reply.missing), "\n",
            "hint: the ranks that set them may have died, be slow, or use other key names");
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  DDP_CHECK(keys.size() <= kMaxKeysPerRequest, "check() on ", keys.size(), " keys; at most ",
            kMaxKeysPerRequest);
  for (const auto& k : keys) check_key(k);
  return round_trip(Request(Op::Check).keys(keys), timeout()).number != 0;
}

bool TCPStore::delete_key(const std::string& key) {
  check_key(key);
  return round_trip(Request(Op::Delete).str32(key), timeout()).number != 0;
}

std::int64_t TCPStore::num_keys() { return round_trip(Request(Op::NumKeys), timeout()).number; }

}  // namespace ddp
