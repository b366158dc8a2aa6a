// Chapter 07, the tcp group over an emulated link (DDP_TCP_LINK, dist/link_emulation.hpp):
// the grammar and its errors; the wire's arithmetic on a clock of our own; and
// all-reduces in 2 and 4 forked processes, exact, and never faster than the link allows.
// Only lower bounds on time are asserted: a loaded machine can make a collective slower
// than its link, but nothing can make it faster, so these cannot flake. (How close the
// times come to the model is in bench/README.md, measured, not tested.)
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dist/link_emulation.hpp"
#include "dist/process_group_tcp.hpp"
#include "base/error.hpp"
#include "tensor/tensor.hpp"
#include "tests/ch05/fork_ranks.hpp"
#include "tests/ch05/local_store.hpp"

using namespace std::chrono_literals;
using ddp::EmulatedLink;
using ddp::LinkEmulation;
using ddp::ProcessGroupTcp;

namespace {

using ddp::test::local_store_client;
using ddp::test::local_store_server;

// Sets an environment variable for one scope.
struct ScopedEnv {
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  const char* name_;
  std::optional<std::string> old_;
};

// The least time a ring pass of `steps` dependent steps of `chunk` bytes each can take
// over links of rate B and latency L, every rank sending steps*chunk bytes: the last
// chunk's bytes cross `steps` links one after the other (steps*L, plus one chunk on the
// wire), and each link carries the whole stream (steps*chunk/B, plus the last byte's L).
// Perfect pipelining reaches it; steps one after the other take steps*(L + chunk/B).
double least_seconds(const LinkEmulation& link, int steps, double chunk) {
  const double L = std::chrono::duration<double>(link.latency).count();
  const double B = link.bytes_per_second;
  return std::max(steps * L + chunk / B, steps * chunk / B + L);
}

// What ProcessGroupTcp::all_reduce does with `bytes` over `w` ranks: the small path
// (Note [Small all-reduce]) is an all-gather of whole tensors, w-1 steps of S; the ring
// is 2(w-1) steps of S/w.
double least_all_reduce_seconds(const LinkEmulation& link, std::int64_t bytes, int w) {
  if (ProcessGroupTcp::takes_small_all_reduce(static_cast<std::size_t>(bytes), w)) {
    return least_seconds(link, w - 1, static_cast<double>(bytes));
  }
  return least_seconds(link, 2 * (w - 1), static_cast<double>(bytes) / w);
}

}  // namespace

// ---- The grammar ---------------------------------------------------------------------

TEST_CASE("DDP_TCP_LINK: rates in bits or bytes a second, latencies in us or ms", "[ch07]") {
  struct Case {
    const char* text;
    double bytes_per_second;
    std::int64_t latency_ns;
    const char* described;
  };
  const Case cases[] = {
      {"1gbit,50us", 125e6, 50'000, "1 Gbit/s, 50 us"},
      {"125MB/s,0.5ms", 125e6, 500'000, "1 Gbit/s, 500 us"},
      {"100mbit,0us", 12.5e6, 0, "100 Mbit/s, 0 us"},
      {"10GBIT,2ms", 1.25e9, 2'000'000, "10 Gbit/s, 2 ms"},
      {"2.5gbit,12.5us", 312.5e6, 12'500, "2.5 Gbit/s, 12.5 us"},
      {"800kbit,1ms", 100e3, 1'000'000, "800 kbit/s, 1 ms"},
      {"1GB/s,1us", 1e9, 1'000, "8 Gbit/s, 1 us"},
      {"64kb/s,10ms", 64e3, 10'000'000, "512 kbit/s, 10 ms"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    const LinkEmulation link = ddp::parse_link_emulation(c.text);
    CHECK(link.bytes_per_second == Approx(c.bytes_per_second).epsilon(1e-12));
    CHECK(link.latency.count() == c.latency_ns);
    CHECK(link.describe() == c.described);
  }
}

TEST_CASE("DDP_TCP_LINK: a bad value names the variable, the value and the form", "[ch07]") {
  for (const char* bad : {"", "1gbit", "1gbit,", ",50us", "1gbit,50", "1gbit,50s", "fast,50us",
                          "1gbps,50us", "-1gbit,50us", "0gbit,50us", "1gbit,-5us",
                          "1gbit,50us,1", "1gbit, 50us", " 1gbit,50us", "inf gbit,1us",
                          "nangbit,1us", "1gbit,2min", "1gbit,61000ms"}) {
    INFO("value \"" << bad << "\"");
    try {
      ddp::parse_link_emulation(bad);
      FAIL("accepted");
    } catch (const ddp::Error& e) {
      const std::string what = e.what();
      CHECK(what.find(std::string("DDP_TCP_LINK=\"") + bad + "\"") != std::string::npos);
      CHECK(what.find("RATE,DELAY") != std::string::npos);
    }
  }
}

TEST_CASE("DDP_TCP_LINK from the environment: unset and empty are the plain link", "[ch07]") {
  {
    ScopedEnv env("DDP_TCP_LINK", "");
    CHECK_FALSE(ddp::link_emulation_from_env().has_value());
  }
  ScopedEnv env("DDP_TCP_LINK", "1gbit,50us");
  REQUIRE(ddp::link_emulation_from_env().has_value());
  CHECK(ddp::link_emulation_from_env()->latency == 50us);
}

TEST_CASE("a tcp group reads DDP_TCP_LINK, says so, and refuses a bad one", "[ch07]") {
  auto server = local_store_server();
  {
    ScopedEnv env("DDP_TCP_LINK", "1gbit,50us");
    ProcessGroupTcp g(local_store_client(server->port()), 0, 1, 20s, "described");
    CHECK(g.description() == "tcp (emulated link 1 Gbit/s, 50 us)");
    REQUIRE(g.link().has_value());
    CHECK(g.link()->bytes_per_second == 125e6);
  }
  {
    ScopedEnv env("DDP_TCP_LINK", "");
    ProcessGroupTcp g(local_store_client(server->port()), 0, 1, 20s, "plain");
    CHECK(g.description() == "tcp");
    CHECK_FALSE(g.link().has_value());
  }
  ScopedEnv env("DDP_TCP_LINK", "1gbit");
  CHECK_THROWS_WITH(ProcessGroupTcp(local_store_client(server->port()), 0, 1, 20s, "bad"),
                    Catch::Contains("DDP_TCP_LINK=\"1gbit\""));
}

// ---- The wire, on a clock of our own --------------------------------------------------

TEST_CASE("EmulatedLink: frames arrive at rate B, L after their last byte went on",
          "[ch07]") {
  // 1 byte a microsecond, 100 us latency, frames of 1500 bytes: frame f (from 0) of a
  // stretch that went on at t0 arrives at t0 + (f+1)*1500 us + 100 us; a stretch's last,
  // shorter frame when its last byte is through.
  EmulatedLink wire(LinkEmulation{1e6, 100us});
  REQUIRE(wire.frame_bytes() == 1500);
  const EmulatedLink::Clock::time_point t0{std::chrono::seconds(1000)};
  std::vector<std::byte> data(4500);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i * 7);
  REQUIRE(wire.accept(data.data(), 4000, t0) == 4000);
  CHECK(wire.next_arrival(t0) == t0 + 1600us);
  CHECK(wire.due(t0 + 1599us).empty());
  CHECK(wire.due(t0 + 1600us).size() == 1500);
  CHECK(wire.due(t0 + 3099us).size() == 1500);
  CHECK(wire.due(t0 + 3100us).size() == 3000);
  CHECK(wire.due(t0 + 4099us).size() == 3000);
  CHECK(wire.due(t0 + 4100us).size() == 4000);  // the last 1000: the stretch is through
  // A second stretch waits for the wire: it goes on at t0 + 4000 us, not at t0 + 10 us.
  REQUIRE(wire.accept(data.data() + 4000, 500, t0 + 10us) == 500);
  const auto first = wire.due(t0 + 2000us);
  REQUIRE(first.size() == 1500);
  CHECK(std::equal(first.begin(), first.end(), data.begin()));
  wire.delivered(1000);  // the socket took only part of it
  CHECK(wire.due(t0 + 2000us).size() == 500);
  CHECK(wire.next_arrival(t0 + 2000us) == t0 + 3100us);
  wire.delivered(500);
  wire.delivered(wire.due(t0 + 9999us).size());  // the rest of the first stretch
  CHECK(wire.due(t0 + 4599us).empty());
  const auto second = wire.due(t0 + 4600us);
  REQUIRE(second.size() == 500);
  CHECK(std::equal(second.begin(), second.end(), data.begin() + 4000));
  wire.delivered(500);
  CHECK(wire.empty());
  CHECK(wire.next_arrival(t0) == EmulatedLink::Clock::time_point::max());
}

TEST_CASE("EmulatedLink holds at most kWireBytes, and takes more once half is out",
          "[ch07]") {
  EmulatedLink wire(LinkEmulation{1e9, 0us});  // frames of 10 us: 10000 bytes
  REQUIRE(wire.frame_bytes() == 10000);
  const EmulatedLink::Clock::time_point t0{std::chrono::seconds(1)};
  const std::size_t cap = EmulatedLink::kWireBytes;
  std::vector<std::byte> data(cap + cap / 4);
  CHECK(wire.accept(data.data(), data.size(), t0) == cap);
  CHECK(wire.accept(data.data(), data.size(), t0) == 0);
  wire.delivered(cap / 2 - 1);  // more than half still held
  CHECK(wire.accept(data.data(), data.size(), t0) == 0);
  wire.delivered(1);
  CHECK(wire.accept(data.data(), data.size(), t0) == cap / 2);
}

TEST_CASE("EmulatedLink: the bytes are copied onto the wire as they were", "[ch07]") {
  EmulatedLink wire(LinkEmulation{1e9, 0us});
  const EmulatedLink::Clock::time_point t0{std::chrono::seconds(1)};
  std::vector<std::byte> data(100, std::byte{42});
  REQUIRE(wire.accept(data.data(), data.size(), t0) == 100);
  std::fill(data.begin(), data.end(), std::byte{0});  // the sender reuses its memory
  const auto due = wire.due(t0 + 1ms);
  REQUIRE(due.size() == 100);
  CHECK(std::all_of(due.begin(), due.end(), [](std::byte b) { return b == std::byte{42}; }));
}

// ---- All-reduces over it ---------------------------------------------------------------

TEST_CASE("tcp all_reduce over an emulated link: exact, and never faster than the link",
          "[ch07]") {
  struct Case {
    const char* link;
    std::int64_t bytes;
    const char* what;
  };
  const Case cases[] = {
      {"10gbit,3ms", 4096, "small path, latency-bound: w-1 steps of L"},
      {"10gbit,3ms", 262144, "ring, latency-bound: 2(w-1) steps of L"},
      {"100mbit,50us", 16384, "small path, rate-bound: (w-1) S / B"},
      {"100mbit,50us", 1 << 20, "ring, rate-bound: 2(w-1)/w S / B"},
  };
  for (int w : {2, 4}) {
    for (const Case& c : cases) {
      const LinkEmulation link = ddp::parse_link_emulation(c.link);
      const bool small = std::string(c.what).starts_with("small");
      REQUIRE(ProcessGroupTcp::takes_small_all_reduce(static_cast<std::size_t>(c.bytes), w) ==
              small);
      const double least = least_all_reduce_seconds(link, c.bytes, w);
      ddp::test::ForkedStoreServer server;  // ranks forked from a parent without threads
      const int port = server.port();
      const auto codes = ddp::test::run_forked(w, [&](int rank) {
        ProcessGroupTcp g(local_store_client(port), rank, w, 20s, "link", link);
        const std::int64_t n = c.bytes / 4;
        int bad = 0;
        for (int rep = 0; rep < 2; ++rep) {
          ddp::Tensor t = ddp::empty({n});
          for (std::int64_t i = 0; i < n; ++i) t.data<float>()[i] = float((rank + 1) * (i % 5));
          g.barrier()->wait(30s);
          const auto t0 = std::chrono::steady_clock::now();
          g.all_reduce(t)->wait(30s);
          const double mine =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          for (std::int64_t i = 0; i < n; ++i) {
            const float want = float(w * (w + 1) / 2 * (i % 5));
            if (t.data<float>()[i] != want && ++bad <= 3) {
              std::fprintf(stderr, "rank %d: [%lld] = %g, expected %g\n", rank, (long long)i,
                           double(t.data<float>()[i]), double(want));
            }
          }
          // The rank that started first cannot have finished before the link allows:
          // the slowest time over the ranks is the one bounded.
          ddp::Tensor slowest = ddp::full({1}, mine, {ddp::DType::Float32});
          g.all_reduce(slowest, ddp::ReduceOp::Max)->wait(30s);
          const double took = slowest.data<float>()[0];
          if (rank == 0) {
            std::fprintf(stderr, "w=%d %s, %lld bytes (%s): %.2f ms, least %.2f ms\n", w, c.link,
                         (long long)c.bytes, c.what, took * 1e3, least * 1e3);
          }
          if (took < 0.9 * least) {
            std::fprintf(stderr, "rank %d: w=%d %s, %lld bytes: %.3f ms, faster than the "
                         "link allows (%.3f ms)\n", rank, w, c.link, (long long)c.bytes,
                         took * 1e3, least * 1e3);
            ++bad;
          }
        }
        g.barrier()->wait(30s);
        return bad == 0 ? 0 : 2;
      });
      INFO("world size " << w << ", link " << c.link << ", " << c.bytes << " bytes: " << c.what);
      CHECK(codes == std::vector<int>(static_cast<std::size_t>(w), 0));
    }
  }
}

TEST_CASE("DDP_TCP_LINK_SCOPE=between-hosts leaves the links inside a host unpaced", "[ch07]") {
  {
    ScopedEnv link("DDP_TCP_LINK", "1gbit,50us");
    ScopedEnv scope("DDP_TCP_LINK_SCOPE", "between-hosts");
    REQUIRE(ddp::link_emulation_from_env().has_value());
    CHECK(ddp::link_emulation_from_env()->between_hosts_only);
    CHECK(ddp::link_emulation_from_env()->describe() == "1 Gbit/s, 50 us, between hosts");
  }
  {
    ScopedEnv link("DDP_TCP_LINK", "1gbit,50us");
    ScopedEnv scope("DDP_TCP_LINK_SCOPE", "nodes");
    CHECK_THROWS_WITH(ddp::link_emulation_from_env(),
                      Catch::Contains("DDP_TCP_LINK_SCOPE=\"nodes\": expected all"));
  }
  // Two ranks on this host: each one's right neighbour is here, so neither link is paced,
  // and both say so (over sockets: with shared memory allowed, they would take it). Ranks
  // on two hosts: the cluster test of launch/ch07_topology.sh.
  ScopedEnv sockets("DDP_TCP_SHM", "0");
  ddp::LinkEmulation slow = ddp::parse_link_emulation("1mbit,1ms");
  slow.between_hosts_only = true;
  ddp::test::ForkedStoreServer server;
  const int port = server.port();
  const auto codes = ddp::test::run_forked(2, [&](int rank) {
    ProcessGroupTcp g(local_store_client(port), rank, 2, 20s, "scope", slow);
    const std::string want = "tcp (emulated link 1 Mbit/s, 1 ms, between hosts; none to our "
                             "right neighbour)";
    if (g.description() != want) {
      std::fprintf(stderr, "rank %d: description '%s'\n", rank, g.description().c_str());
      return 1;
    }
    // 1 MB over 1 Mbit/s would take 8 s: unpaced, it takes milliseconds.
    ddp::Tensor t = ddp::zeros({250'000});
    const auto t0 = std::chrono::steady_clock::now();
    g.all_reduce(t)->wait(30s);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    g.destroy();
    if (s > 4) {
      std::fprintf(stderr, "rank %d: 1 MB took %.2f s: paced as over 1 Mbit/s\n", rank, s);
      return 1;
    }
    return 0;
  });
  CHECK(codes == std::vector<int>{0, 0});
}
