// Chapter 05, TCPStore: every operation against what a map would answer, waits that
// wait and time out naming their keys, several processes adding at once, and a server
// that survives clients sending a wrong token, an oversized frame or random bytes, and
// running out of file descriptors.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dist/socket.hpp"
#include "dist/tcp_store.hpp"
#include "base/error.hpp"
#include "tests/ch05/fork_ranks.hpp"
#include "tests/support/test_scale.hpp"

using namespace std::chrono_literals;
using ddp::TCPStore;
using ddp::TCPStoreOptions;

namespace {

TCPStoreOptions server_options(std::string token = "") {
  TCPStoreOptions o;
  o.host = "127.0.0.1";
  o.port = 0;  // any free port
  o.is_server = true;
  o.timeout = 10s;
  o.job_token = std::move(token);
  return o;
}

TCPStoreOptions client_options(int port, std::string token = "") {
  TCPStoreOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.timeout = 10s;
  o.job_token = std::move(token);
  return o;
}

// Little-endian frame pieces, written out independently of tcp_store_protocol.cpp.
void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
std::string hello(const std::string& token) {
  std::string s;
  s += "DDPS";
  put_le(s, 1, 4);
  put_le(s, token.size(), 4);
  return s + token;
}

ddp::Socket raw_connect(int port) {
  return ddp::Socket::connect("127.0.0.1", port, ddp::Socket::Clock::now() + 5s);
}

// Reads until the server closes the connection; returns what came (or throws on timeout).
std::string read_until_closed(const ddp::Socket& s) {
  std::string got;
  const auto deadline = ddp::Socket::Clock::now() + 5s;
  for (;;) {
    char buffer[4096];
    const auto r = s.recv_some(buffer, sizeof buffer);
    if (r.status == ddp::Socket::IoStatus::Ok) {
      got.append(buffer, r.bytes);
    } else if (r.status == ddp::Socket::IoStatus::WouldBlock) {
      REQUIRE(ddp::Socket::Clock::now() < deadline);
      std::this_thread::sleep_for(5ms);
    } else {
      return got;
    }
  }
}

}  // namespace

TEST_CASE("TCPStore set get add check delete compare_set num_keys", "[ch05][store]") {
  TCPStore server(server_options());
  REQUIRE(server.port() > 0);
  TCPStore client(client_options(server.port()));

  client.set("a", "1");
  CHECK(server.get("a") == "1");
  const std::string binary("x\0y\xff", 4);  // values are bytes, '\0' included
  server.set("bin", binary);
  CHECK(client.get("bin") == binary);
  client.set("a", "2");  // overwrite
  CHECK(server.get("a") == "2");

  CHECK(client.add("n", 5) == 5);  // a missing key counts as 0
  CHECK(server.add("n", -7) == -2);
  CHECK(client.get("n") == "-2");  // counters read as decimal text
  CHECK_THROWS_WITH(client.add("bin", 1), Catch::Contains("not an integer"));
  CHECK(client.get("a") == "2");  // that error left the connection usable

  CHECK(client.check({"a", "n"}));
  CHECK_FALSE(client.check({"a", "missing"}));
  CHECK(client.num_keys() == 3);
  CHECK(client.delete_key("a"));
  CHECK_FALSE(client.delete_key("a"));
  CHECK_FALSE(server.check({"a"}));
  CHECK(server.num_keys() == 2);

  // compare_set: swaps only on a match; a missing key matches "".
  CHECK(client.compare_set("cs", "", "first") == "first");
  CHECK(client.compare_set("cs", "wrong", "second") == "first");
  CHECK(client.compare_set("cs", "first", "second") == "second");
  CHECK(server.get("cs") == "second");
  CHECK(client.compare_set("other", "not-empty", "x") == "");  // missing, no swap
  CHECK_FALSE(client.check({"other"}));
}

TEST_CASE("TCPStore get and wait block until the key is set", "[ch05][store]") {
  TCPStore server(server_options());
  TCPStore client(client_options(server.port()));
  std::thread setter([&] {
    std::this_thread::sleep_for(150ms);
    TCPStore other(client_options(server.port()));
    other.set("late", "here");
    std::this_thread::sleep_for(50ms);
    other.set("later", "too");
  });
  const auto start = std::chrono::steady_clock::now();
  CHECK(client.get("late", 5s) == "here");
  CHECK(std::chrono::steady_clock::now() - start >= 100ms);
  client.wait({"late", "later"}, 5s);
  CHECK(client.get("later") == "too");
  setter.join();
}

TEST_CASE("TCPStore takes milliseconds::max() as no deadline", "[ch05][store]") {
  // now + max() overflows (undefined behaviour; here it happened to land in the future,
  // where FileStore's and Work's landed in the past): the deadline must saturate.
  TCPStore server(server_options());
  TCPStore client(client_options(server.port()));
  client.set_timeout(std::chrono::milliseconds::max());
  std::thread setter([&] {
    std::this_thread::sleep_for(100ms);
    TCPStore other(client_options(server.port()));
    other.set("late", "here");
  });
  CHECK(client.get("late", std::chrono::milliseconds::max()) == "here");
  client.wait({"late"}, std::chrono::milliseconds::max());
  client.set("now", "1");  // the store's own timeout is max() too
  CHECK(client.get("now") == "1");
  setter.join();
}

TEST_CASE("TCPStore timeouts name the missing keys", "[ch05][store]") {
  TCPStore server(server_options());
  TCPStore client(client_options(server.port()));
  client.set("present", "1");
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(client.get("never-set-key", 200ms),
                    Catch::Contains("never-set-key") && Catch::Contains("timed out"));
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK(waited >= 190ms);
  CHECK(waited < 3s);
  try {
    client.wait({"present", "missing-1", "missing-2"}, 100ms);
    FAIL("wait did not time out");
  } catch (const ddp::Error& e) {
    const std::string m = e.what();
    CHECK(m.find("\"missing-1\", \"missing-2\"") != std::string::npos);
    CHECK(m.find("\"present\"") == std::string::npos);
  }
  CHECK(client.get("present") == "1");  // still connected
}

TEST_CASE("TCPStore counts concurrent adds from 4 processes exactly", "[ch05][store]") {
  TCPStore server(server_options());
  const int port = server.port();  // known to the children: they are forked after this
  const auto codes = ddp::test::run_forked(4, [port](int) {
    TCPStore client(client_options(port));
    for (int i = 0; i < 500; ++i) client.add("counter", 1);
    client.add("finished", 1);
    return 0;
  });
  CHECK(codes == std::vector<int>{0, 0, 0, 0});
  CHECK(server.get("counter") == "2000");
  CHECK(server.get("finished") == "4");
}

TEST_CASE("TCPStore threads may share one client", "[ch05][store]") {
  TCPStore server(server_options());
  TCPStore client(client_options(server.port()));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) client.add("shared", 1);
    });
  }
  for (auto& t : threads) t.join();
  CHECK(client.get("shared") == "800");
}

TEST_CASE("TCPStore waits for world_size clients or says how many came", "[ch05][store]") {
  {
    TCPStoreOptions o = server_options();
    o.world_size = 2;
    o.timeout = 300ms;
    CHECK_THROWS_WITH(TCPStore(o), Catch::Contains("only 1 of 2 ranks"));
  }
  // With a free port picked first, so that the other rank knows it in advance.
  int port = 0;
  {
    ddp::Socket probe = ddp::Socket::listen("127.0.0.1", 0);
    port = probe.local_port();
  }
  std::thread other([port] {
    TCPStoreOptions o = client_options(port);
    o.world_size = 2;
    TCPStore client(o);
    client.set("hi", "from 1");
  });
  TCPStoreOptions o = server_options();
  o.port = port;
  o.world_size = 2;
  TCPStore server(o);  // returns once the other has joined
  CHECK(server.get("hi", 5s) == "from 1");
  other.join();
}

TEST_CASE("A socket still names its peer after the peer reset the connection", "[ch05][store]") {
  const auto soon = ddp::Socket::Clock::now() + 5s;
  ddp::Socket server = ddp::Socket::listen("127.0.0.1", 0);
  ddp::Socket client = ddp::Socket::connect("127.0.0.1", server.local_port(), soon);
  ddp::Socket accepted = server.accept(soon);
  REQUIRE(accepted.valid());
  const std::string server_name = "127.0.0.1:" + std::to_string(server.local_port());
  CHECK(client.peer_name() == server_name);
  CHECK(accepted.peer_name() == "127.0.0.1:" + std::to_string(client.local_port()));
  // SO_LINGER 0: close() resets the connection, after which getpeername() fails with
  // ENOTCONN on the client; its error must still say whom it lost.
  const linger reset{1, 0};
  REQUIRE(::setsockopt(accepted.fd(), SOL_SOCKET, SO_LINGER, &reset, sizeof reset) == 0);
  accepted.close();
  char byte = 0;
  CHECK_THROWS_WITH(client.recv_all(&byte, 1, soon), Catch::StartsWith(server_name) ||
                                                         Catch::Contains("from " + server_name));
}

TEST_CASE("TCPStore refuses a client with another job token", "[ch05][store]") {
  TCPStore server(server_options("job-A"));
  CHECK_THROWS_WITH(TCPStore(client_options(server.port(), "job-B")),
                    Catch::Contains("refused") && Catch::Contains("job token mismatch") &&
                        Catch::Contains("job-B"));
  TCPStore good(client_options(server.port(), "job-A"));  // the server still serves
  good.set("k", "v");
  CHECK(server.get("k") == "v");
}

TEST_CASE("TCPStore closes only the client that sent an oversized frame", "[ch05][store]") {
  TCPStore server(server_options());
  TCPStore client(client_options(server.port()));
  client.set("before", "1");

  SECTION("a key over 4 KiB") {
    ddp::Socket raw = raw_connect(server.port());
    std::string frame = hello("");
    frame.push_back(1);  // SET
    put_le(frame, TCPStore::kMaxKeyBytes + 1, 4);
    raw.send_all(frame.data(), frame.size(), ddp::Socket::Clock::now() + 5s);
    const std::string reply = read_until_closed(raw);
    // Handshake OK (status 0, empty message), then ERROR (2) with a message.
    REQUIRE(reply.size() > 6);
    CHECK(reply[0] == 0);
    CHECK(reply[5] == 2);
    CHECK(reply.find("over the limit") != std::string::npos);
  }
  SECTION("a value over 64 MiB, refused from its length alone") {
    ddp::Socket raw = raw_connect(server.port());
    std::string frame = hello("");
    frame.push_back(1);  // SET
    put_le(frame, 1, 4);
    frame += "k";
    put_le(frame, TCPStore::kMaxValueBytes + 1, 8);
    raw.send_all(frame.data(), frame.size(), ddp::Socket::Clock::now() + 5s);
    const std::string reply = read_until_closed(raw);
    CHECK(reply.find("over the limit") != std::string::npos);
  }
  SECTION("the client library refuses to send one") {
    CHECK_THROWS_WITH(client.set("big", std::string(TCPStore::kMaxValueBytes + 1, 'x')),
                      Catch::Contains("at most"));
    CHECK_THROWS_WITH(client.get(std::string(TCPStore::kMaxKeyBytes + 1, 'k')),
                      Catch::Contains("at most"));
  }
  client.set("after", "2");
  CHECK(client.get("before") == "1");
  TCPStore late(client_options(server.port()));
  CHECK(late.get("after") == "2");
}

TEST_CASE("TCPStore survives random bytes from a stranger", "[ch05][store]") {
  TCPStore server(server_options());
  TCPStore client(client_options(server.port()));
  std::mt19937 rng(5);
  // The handshake of the protocol (tcp_store_protocol.hpp), written out by hand: magic "DDPS",
  // version 1, an empty token, little-endian. Odd rounds send it first, so that their
  // random bytes reach the request parser instead of failing the magic number.
  const std::string handshake("DDPS\x01\0\0\0\0\0\0\0", 12);
  for (int round = 0; round < 6; ++round) {
    ddp::Socket raw = raw_connect(server.port());
    std::string junk(1000 + round * 5000, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    if (round % 2 == 1) {  // accepted: status OK, an empty message (5 zero bytes)
      raw.send_all(handshake.data(), handshake.size(), ddp::Socket::Clock::now() + 2s);
      std::string accepted(5, 'x');
      raw.recv_all(accepted.data(), accepted.size(), ddp::Socket::Clock::now() + 2s);
      REQUIRE(accepted == std::string(5, '\0'));
    }
    // The server may close on the first bytes; a failed send is fine too.
    try {
      raw.send_all(junk.data(), junk.size(), ddp::Socket::Clock::now() + 2s);
    } catch (const ddp::Error&) {
    }
    read_until_closed(raw);  // it does close us
    client.set("round", std::to_string(round));
  }
  TCPStore after(client_options(server.port()));
  CHECK(after.get("round") == "5");
  CHECK(after.num_keys() == 1);
}

// Resident memory of this process in bytes; the server runs in it, on its own thread.
std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

TEST_CASE("TCPStore holds back a client that never reads its replies, then answers them all",
          "[ch05][store]") {
  TCPStore server(server_options());
  TCPStore client(client_options(server.port()));
  const std::string value(1 << 20, 'v');
  client.set("big", value);
  ddp::Socket raw = raw_connect(server.port());
  const std::string greeting = hello("");
  raw.send_all(greeting.data(), greeting.size(), ddp::Socket::Clock::now() + 5s);
  std::string accepted(5, 'x');
  raw.recv_all(accepted.data(), accepted.size(), ddp::Socket::Clock::now() + 5s);
  REQUIRE(accepted == std::string(5, '\0'));

  // 400 GETs of the 1 MiB value in one go: 400 MiB of replies if the server made them
  // all at once. It may buffer about one largest value (64 MiB) and leave the rest of
  // the requests unread until the client takes its replies.
  constexpr int kGets = 400;
  std::string gets;
  for (int i = 0; i < kGets; ++i) {
    gets.push_back(2);  // GET
    put_le(gets, 3, 4);
    gets += "big";
    put_le(gets, 0, 8);  // timeout_ms
  }
  // 200 MiB in a release build; more where a sanitizer keeps shadow memory and freed
  // blocks resident (tests/support/test_scale.hpp: x1.5 under ASan, which measured ~150
  // to ~210 MiB here), still under what the bug costs there: its 400 MiB of replies
  // plus the same overhead. The tsan preset leaves this test out (Note [Tests under
  // sanitizers]).
  const auto bound = static_cast<std::size_t>(200.0 * ddp::test::memory_scale()) << 20;
  const std::size_t before = resident_bytes();
  raw.send_all(gets.data(), gets.size(), ddp::Socket::Clock::now() + 5s);
  std::size_t grown = 0;
  const auto until = std::chrono::steady_clock::now() + 2s;
  while (std::chrono::steady_clock::now() < until && grown < bound) {
    std::this_thread::sleep_for(20ms);
    grown = std::max(grown, resident_bytes() - std::min(before, resident_bytes()));
  }
  INFO("the process grew by " << (grown >> 20) << " MiB (bound " << (bound >> 20) << " MiB)");
  CHECK(grown < bound);

  client.set("meanwhile", "served");  // others are still served
  CHECK(client.get("meanwhile") == "served");

  // Every reply arrives, in order, as the client reads: OK, u64 length, the value.
  std::string reply(9 + value.size(), '\0');
  int whole = 0;
  for (int i = 0; i < kGets; ++i) {
    INFO("reply " << i);
    raw.recv_all(reply.data(), reply.size(), ddp::Socket::Clock::now() + 10s);
    whole += reply[0] == 0 && reply.compare(1, 8, std::string("\0\0\x10\0\0\0\0\0", 8)) == 0 &&
             reply.compare(9, value.size(), value) == 0;
  }
  CHECK(whole == kGets);
}

TEST_CASE("TCPStore keeps serving when rank 0 runs out of file descriptors", "[ch05][store]") {
  // In a child process, which may lower its own descriptor limit.
  const auto codes = ddp::test::run_forked(1, [](int) {
    TCPStore server(server_options());
    TCPStore client(client_options(server.port()));
    // The strangers' sockets are made first; then the limit is set to the lowest free
    // descriptor number, so that no new one can be made and the server's accept() of
    // their connections fails with EMFILE. Before the fix that exception left the server
    // thread and ended the process.
    std::vector<int> strangers;
    for (int i = 0; i < 4; ++i) strangers.push_back(::socket(AF_INET, SOCK_STREAM, 0));
    // Note [UBSan without file descriptors]: in the asan build, UBSan checks the vptr of
    // every stream the failure path uses, and on a miss in its type cache it first
    // probes the object's memory through a pipe(), which fails here with EMFILE: a
    // false "invalid vptr" (GCC 12's libsanitizer; a 15-line program does the same).
    // Streams of the same types used now, while descriptors are free, put those types
    // in the cache: the checks then pass without the probe. Nothing to do elsewhere.
    try {
      DDP_CHECK(false, "warm-up ", server.port(), ' ', std::size_t{0}, 0LL);
    } catch (const ddp::Error& e) {
      (void)e.what();
      std::cerr.flush();
    }
    int lowest_free = 0;
    while (::fcntl(lowest_free, F_GETFD) != -1) ++lowest_free;
    rlimit limit{};
    ::getrlimit(RLIMIT_NOFILE, &limit);
    limit.rlim_cur = static_cast<rlim_t>(lowest_free);
    ::setrlimit(RLIMIT_NOFILE, &limit);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(server.port()));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int fd : strangers) ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
    std::this_thread::sleep_for(300ms);  // the server fails to accept, pauses, tries again
    client.set("still", "serving");      // its thread is alive
    for (int fd : strangers) ::close(fd);
    std::this_thread::sleep_for(300ms);
    TCPStore late(client_options(server.port()));  // descriptors free again: accepted
    return late.get("still") == "serving" ? 0 : 1;
  });
  CHECK(codes == std::vector<int>{0});
}

TEST_CASE("TCPStore client gives up on an empty port within its deadline", "[ch05][store]") {
  int port = 0;
  {
    ddp::Socket probe = ddp::Socket::listen("127.0.0.1", 0);
    port = probe.local_port();
  }  // closed: nothing listens there now
  TCPStoreOptions o = client_options(port);
  o.timeout = 500ms;
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(TCPStore(o), Catch::Contains("no store server at 127.0.0.1:" +
                                                 std::to_string(port)) &&
                                     Catch::Contains("MASTER_ADDR"));
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK(waited >= 400ms);
  CHECK(waited < 3s);
}

TEST_CASE("TCPStore clients see the server go away instead of hanging", "[ch05][store]") {
  auto server = std::make_unique<TCPStore>(server_options());
  TCPStore client(client_options(server->port()));
  std::atomic<bool> threw = false;
  std::thread waiter([&] {
    try {
      client.get("never", 20s);
    } catch (const ddp::Error&) {
      threw = true;
    }
  });
  std::this_thread::sleep_for(100ms);
  const auto start = std::chrono::steady_clock::now();
  server.reset();
  waiter.join();
  CHECK(threw);
  CHECK(std::chrono::steady_clock::now() - start < 5s);
}
