// TCPStore (see tcp_store.hpp), the client every rank talks to the store through, in
// reading order: the constructor (rank 0 starts the server first), the job's headcount
// (Notes [Claiming a rank] and [Joining the store]), and one request at a time on the
// wire. Chapter 05. The bytes of each request are tcp_store_protocol.hpp's; the server
// that answers them, on rank 0, is tcp_store_server.cpp.
#include "dist/tcp_store.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <thread>

#include "base/deadline.hpp"
#include "base/error.hpp"
#include "base/little_endian.hpp"
#include "dist/launch_env.hpp"  // process_label
#include "dist/tcp_store_protocol.hpp"
#include "dist/tcp_store_server.hpp"
#include "base/who.hpp"  // name_ranks

namespace ddp {

// The protocol's names (tcp_store_protocol.hpp).
using detail::put_str32;
using detail::put_str64;
using detail::put_u32;
using detail::put_u64;
using detail::put_u8;
using detail::StoreOp;
using detail::StoreStatus;

namespace {

// A reply may be late by the server's own timeout; on top of it we allow this much
// before deciding the server itself is gone: as long as the timeout itself, between
// 1 s (a quick question gets a quick verdict) and 10 s.
constexpr std::chrono::milliseconds kMinReplyGrace{1000};
constexpr std::chrono::milliseconds kReplyGrace{10000};

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

// ==== The client ========================================================================

class TCPStore::Request {
 public:
  explicit Request(StoreOp op) : op_(op) { put_u8(bytes_, static_cast<std::uint8_t>(op)); }
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
    Request r(StoreOp::Hello);
    r.bytes_.clear();
    put_u32(r.bytes_, detail::kStoreMagic);
    put_u32(r.bytes_, detail::kStoreVersion);
    put_str32(r.bytes_, token);
    return r;
  }
  StoreOp op() const { return op_; }
  const std::string& bytes() const { return bytes_; }

 private:
  StoreOp op_;
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
  const StoreOp op = request.op();
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
    if (status == static_cast<std::uint8_t>(StoreStatus::Error)) {
      server_error = read_bytes(read_uint(4));
    } else if (status == static_cast<std::uint8_t>(StoreStatus::Timeout)) {
      const auto n = read_uint(4);
      DDP_CHECK(n <= kMaxKeysPerRequest, where(), ": malformed TIMEOUT reply");
      for (std::uint64_t i = 0; i < n; ++i) reply.missing.push_back(read_bytes(read_uint(4)));
      reply.timed_out = true;
    } else {
      DDP_CHECK(status == static_cast<std::uint8_t>(StoreStatus::Ok), where(),
                ": bad reply status ", int(status));
      switch (op) {
        case StoreOp::Hello: reply.bytes = read_bytes(read_uint(4)); break;
        case StoreOp::Get:
        case StoreOp::CompareSet: reply.bytes = read_bytes(read_uint(8)); break;
        case StoreOp::Add:
        case StoreOp::NumKeys: reply.number = static_cast<std::int64_t>(read_uint(8)); break;
        case StoreOp::Check:
        case StoreOp::Delete: reply.number = read_u8(); break;
        case StoreOp::Set:
        case StoreOp::Wait: break;
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
  round_trip(Request(StoreOp::Set).str32(key).str64(value), timeout);
}

std::string TCPStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  check_key(key);
  const auto ms = static_cast<std::uint64_t>(std::max<std::int64_t>(timeout.count(), 0));
  Reply reply = round_trip(Request(StoreOp::Get).str32(key).u64(ms), timeout);
  DDP_CHECK(!reply.timed_out, where(), ": get(\"", key, "\") timed out after ", timeout.count(),
            " ms: key \"", key, "\" was never set\n",
            "hint: the rank that sets it may have died, be slow, or use another key name");
  return std::move(reply.bytes);
}

std::int64_t TCPStore::add(const std::string& key, std::int64_t delta) {
  check_key(key);
  return round_trip(Request(StoreOp::Add).str32(key).u64(static_cast<std::uint64_t>(delta)),
                    timeout())
      .number;
}

std::string TCPStore::compare_set(const std::string& key, const std::string& expected,
                                  const std::string& desired) {
  check_key(key);
  DDP_CHECK(expected.size() <= kMaxValueBytes && desired.size() <= kMaxValueBytes,
            "compare_set(\"", key, "\"): value over ", kMaxValueBytes, " bytes");
  return round_trip(Request(StoreOp::CompareSet).str32(key).str64(expected).str64(desired),
                    timeout())
      .bytes;
}

void TCPStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  DDP_CHECK(keys.size() <= kMaxKeysPerRequest, "wait() on ", keys.size(), " keys; at most ",
            kMaxKeysPerRequest);
  for (const auto& k : keys) check_key(k);
  const auto ms = static_cast<std::uint64_t>(std::max<std::int64_t>(timeout.count(), 0));
  const Reply reply = round_trip(Request(StoreOp::Wait).keys(keys).u64(ms), timeout);
  DDP_CHECK(!reply.timed_out, where(), ": wait() timed out after ", timeout.count(),
            " ms; still missing: ", join(reply.missing), "\n",
            "hint: the ranks that set them may have died, be slow, or use other key names");
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  DDP_CHECK(keys.size() <= kMaxKeysPerRequest, "check() on ", keys.size(), " keys; at most ",
            kMaxKeysPerRequest);
  for (const auto& k : keys) check_key(k);
  return round_trip(Request(StoreOp::Check).keys(keys), timeout()).number != 0;
}

bool TCPStore::delete_key(const std::string& key) {
  check_key(key);
  return round_trip(Request(StoreOp::Delete).str32(key), timeout()).number != 0;
}

std::int64_t TCPStore::num_keys() {
  return round_trip(Request(StoreOp::NumKeys), timeout()).number;
}

}  // namespace ddp
