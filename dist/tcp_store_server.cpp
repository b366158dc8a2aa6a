// TCPStoreServer (see tcp_store_server.hpp), in reading order: the thread's loop over
// every connection, the bytes in and out, the requests, and the GETs and WAITs that wait.
// Chapter 05. The bytes of each message are tcp_store_protocol.hpp's; the client, which
// every rank (rank 0 included) talks to it through, is tcp_store.cpp.
#include "dist/tcp_store_server.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iostream>

#include "base/deadline.hpp"
#include "base/errno_text.hpp"
#include "base/error.hpp"

namespace ddp {

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

// The protocol's writers (tcp_store_protocol.hpp).
using detail::put_str32;
using detail::put_str64;
using detail::put_u32;
using detail::put_u64;
using detail::put_u8;

namespace {

// How long the server stops accepting after accept() failed (TCPStoreServer::accept_all).
constexpr std::chrono::milliseconds kAcceptPause{100};
// The bounds of a request's fields.
constexpr auto kKey = TCPStore::kMaxKeyBytes;
constexpr auto kValue = TCPStore::kMaxValueBytes;

std::optional<std::int64_t> parse_int(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end != text.c_str() + text.size()) return std::nullopt;
  return v;
}

}  // namespace

// ==== Construction and the end ==========================================================

TCPStoreServer::TCPStoreServer(Socket listener, std::string token)
    : listener_(std::move(listener)), token_(std::move(token)) {
  int fds[2];
  DDP_CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds) == 0,
            "socketpair() for the TCPStore server's wake-up failed");
  wake_read_ = Socket(fds[0]);
  wake_write_ = Socket(fds[1]);
  thread_ = std::thread([this] { serve(); });
}

TCPStoreServer::~TCPStoreServer() {
  stop_ = true;
  const char byte = 1;
  (void)wake_write_.send_some(&byte, 1);
  thread_.join();
}

// ==== The thread: every connection, one poll() ==========================================

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

// ==== The requests ======================================================================

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
    StoreReader r{client.in, 0, {}};
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

bool TCPStoreServer::handshake(Client& client, StoreReader& r) {
  std::uint32_t magic = 0;
  std::uint32_t version = 0;
  if (!r.u32(magic)) return false;
  if (magic != detail::kStoreMagic) {
    r.violation = "not a ddp TCPStore client (bad magic number)";
    return false;
  }
  std::string token;
  if (!r.u32(version) || !r.str32(token, TCPStore::kMaxTokenBytes, "job token")) return false;
  if (version != detail::kStoreVersion) {
    r.violation = detail::concat("protocol version ", version, ", this server speaks ",
                                 detail::kStoreVersion);
  } else if (token != token_) {
    r.violation = detail::concat("job token mismatch (server's is '", token_, "', client's is '",
                                 token, "'): the client belongs to another job");
  } else {
    client.greeted = true;
    put_u8(client.out, static_cast<std::uint8_t>(StoreStatus::Ok));
    put_str32(client.out, "");
    return true;
  }
  return false;
}

// Parses one request (an op byte, then its arguments) from the front of `r` and answers
// it into the client's output buffer. Returns false while the request is incomplete, or
// when it is a protocol violation (r.violation says which).
bool TCPStoreServer::request(Client& client, StoreReader& r) {
  std::uint8_t op_byte = 0;
  if (!r.u8(op_byte)) return false;
  const auto op = static_cast<StoreOp>(op_byte);
  switch (op) {
    case StoreOp::Set: return set(client, r);
    case StoreOp::Get:
    case StoreOp::Wait: return get_or_wait(client, r, op);
    case StoreOp::Add: return add(client, r);
    case StoreOp::CompareSet: return compare_set(client, r);
    case StoreOp::Check: return check(client, r);
    case StoreOp::Delete: return delete_key(client, r);
    case StoreOp::NumKeys:
      num_keys(client);
      return true;
    case StoreOp::Hello: break;
  }
  r.violation = detail::concat("unknown request op ", int(op_byte));
  return false;
}

// ---- One function per op, named after the client's call --------------------------------

void TCPStoreServer::reply_ok(Client& client) {
  put_u8(client.out, static_cast<std::uint8_t>(StoreStatus::Ok));
}

void TCPStoreServer::reply_error(Client& client, const std::string& message) {
  put_u8(client.out, static_cast<std::uint8_t>(StoreStatus::Error));
  put_str32(client.out, message);
}

// u32 n, then n keys.
bool TCPStoreServer::read_keys(StoreReader& r, std::vector<std::string>& keys) {
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
}

bool TCPStoreServer::set(Client& client, StoreReader& r) {
  std::string key;
  std::string value;
  if (!r.str32(key, kKey, "key") || !r.str64(value, kValue, "value")) return false;
  data_[key] = std::move(value);
  reply_ok(client);
  answer_waiters(/*expire=*/false);
  return true;
}

// A GET (one key) or a WAIT (several) becomes the client's waiter, answered at once when
// its keys exist, else when a SET makes them exist or its deadline passes.
bool TCPStoreServer::get_or_wait(Client& client, StoreReader& r, StoreOp op) {
  std::vector<std::string> keys;
  std::uint64_t timeout_ms = 0;
  if (op == StoreOp::Get) {
    keys.resize(1);
    if (!r.str32(keys[0], kKey, "key")) return false;
  } else if (!read_keys(r, keys)) {
    return false;
  }
  if (!r.u64(timeout_ms)) return false;
  timeout_ms = std::min<std::uint64_t>(timeout_ms, 365ull * 24 * 3600 * 1000);
  client.waiter = Waiter{op, std::move(keys),
                         Clock::now() + std::chrono::milliseconds(timeout_ms)};
  try_answer(client, /*expire=*/false);
  return true;
}

bool TCPStoreServer::add(Client& client, StoreReader& r) {
  std::string key;
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
  reply_ok(client);
  put_u64(client.out, static_cast<std::uint64_t>(sum));
  answer_waiters(/*expire=*/false);
  return true;
}

bool TCPStoreServer::compare_set(Client& client, StoreReader& r) {
  std::string key;
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
  reply_ok(client);
  put_str64(client.out, it == data_.end() ? std::string() : it->second);
  if (swap) answer_waiters(/*expire=*/false);
  return true;
}

bool TCPStoreServer::check(Client& client, StoreReader& r) {
  std::vector<std::string> keys;
  if (!read_keys(r, keys)) return false;
  const bool all = std::all_of(keys.begin(), keys.end(),
                               [this](const std::string& k) { return data_.contains(k); });
  reply_ok(client);
  put_u8(client.out, all ? 1 : 0);
  return true;
}

bool TCPStoreServer::delete_key(Client& client, StoreReader& r) {
  std::string key;
  if (!r.str32(key, kKey, "key")) return false;
  const bool existed = data_.erase(key) > 0;
  reply_ok(client);
  put_u8(client.out, existed ? 1 : 0);
  return true;
}

void TCPStoreServer::num_keys(Client& client) {
  reply_ok(client);
  put_u64(client.out, data_.size());
}

// ==== The waiting GETs and WAITs ========================================================

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
    put_u8(client.out, static_cast<std::uint8_t>(StoreStatus::Ok));
    if (w.op == StoreOp::Get) put_str64(client.out, data_.at(w.keys[0]));
  } else if (expire && Clock::now() >= w.deadline) {
    put_u8(client.out, static_cast<std::uint8_t>(StoreStatus::Timeout));
    put_u32(client.out, static_cast<std::uint32_t>(missing.size()));
    for (const auto& k : missing) put_str32(client.out, k);
  } else {
    return false;
  }
  client.waiter.reset();
  return true;
}

}  // namespace ddp
