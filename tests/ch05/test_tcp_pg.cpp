// Chapter 05, ProcessGroupTcp: the ring schedule against the table of its Note, then
// every collective x op x size in 2, 3 and 4 forked processes on 127.0.0.1, checked
// element by element against closed forms computed here rank by rank; a rank that dies
// mid all-reduce, and set-up and teardown that never hang.
#include <catch2/catch.hpp>

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dist/file_store.hpp"
#include "dist/process_group_tcp.hpp"
#include "dist/socket.hpp"
#include "dist/tcp_store.hpp"
#include "base/error.hpp"
#include "tensor/random.hpp"
#include "tensor/tensor.hpp"
#include "tests/ch05/fork_ranks.hpp"
#include "tests/ch05/local_store.hpp"

using namespace std::chrono_literals;
using ddp::ProcessGroupTcp;
using ddp::ReduceOp;
using ddp::Tensor;

namespace {

constexpr ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min};
constexpr std::int64_t k16MiBFloats = 4 * 1024 * 1024;

// The store runs in a process of its own (tests/ch05/local_store.hpp), so that ranks are
// forked from a parent without threads.
std::unique_ptr<ddp::test::ForkedStoreServer> start_server() {
  return std::make_unique<ddp::test::ForkedStoreServer>();
}

struct Rank {
  std::shared_ptr<ddp::TCPStore> store;
  std::unique_ptr<ProcessGroupTcp> group;
};

Rank join(int port, int rank, int world, const std::string& prefix,
          std::chrono::milliseconds timeout = 20s) {
  ddp::TCPStoreOptions o;
  o.port = port;
  o.timeout = timeout;
  Rank r;
  r.store = std::make_shared<ddp::TCPStore>(o);
  r.group = std::make_unique<ProcessGroupTcp>(r.store, rank, world, timeout, prefix);
  return r;
}

// ---- The values and their closed forms ----------------------------------------------
// Rank r holds value(r, i) at index i: the rank, plus a pattern in i so that a chunk
// landing at the wrong offset shows. Floats stay small integers: exact in any order.
// int64 uses large and negative values (avg must truncate toward zero).
template <typename T>
T value(int r, std::int64_t i) {
  if constexpr (std::is_same_v<T, float>) {
    return static_cast<float>(r + i % 7);
  } else {
    return (r + 1) * (i % 5 - 2) + (std::int64_t{1} << 40) * (i % 3 - 1);
  }
}

// The reduction over ranks 0..w-1 of value(r, i), by a plain loop.
template <typename T>
T expected(ReduceOp op, int w, std::int64_t i) {
  T acc = value<T>(0, i);
  for (int r = 1; r < w; ++r) {
    const T v = value<T>(r, i);
    acc = op == ReduceOp::Max ? std::max(acc, v) : op == ReduceOp::Min ? std::min(acc, v)
                                                                      : acc + v;
  }
  return op == ReduceOp::Avg ? acc / static_cast<T>(w) : acc;
}

template <typename T>
Tensor filled(std::int64_t n, const std::function<T(std::int64_t)>& f) {
  Tensor t = ddp::empty({n}, {ddp::dtype_of<T>()});
  T* p = t.data<T>();
  for (std::int64_t i = 0; i < n; ++i) p[i] = f(i);
  return t;
}

// Counts the elements of `t` that differ from f(i); prints the first few.
template <typename T>
int mismatches(const std::string& what, const Tensor& t, const std::function<T(std::int64_t)>& f) {
  int bad = 0;
  const T* p = t.data<T>();
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    if (p[i] != f(i)) {
      if (++bad <= 3) {
        std::fprintf(stderr, "%s: [%lld] = %s, expected %s\n", what.c_str(), (long long)i,
                     std::to_string(p[i]).c_str(), std::to_string(f(i)).c_str());
      }
    }
  }
  return bad;
}

// Every collective the group has, on this rank; returns the number of wrong elements.
template <typename T>
int check_collectives(ProcessGroupTcp& g, const std::vector<std::int64_t>& sizes) {
  const int r = g.rank();
  const int w = g.size();
  const std::string type = std::string(ddp::dtype_name(ddp::dtype_of<T>()));
  int bad = 0;
  for (std::int64_t n : sizes) {
    const std::string at = type + " n=" + std::to_string(n) + " w=" + std::to_string(w);
    for (ReduceOp op : kOps) {
      Tensor t = filled<T>(n, [r](std::int64_t i) { return value<T>(r, i); });
      g.all_reduce(t, op)->wait(30s);
      bad += mismatches<T>("all_reduce " + std::string(to_string(op)) + " " + at, t,
                           [&](std::int64_t i) { return expected<T>(op, w, i); });
    }
    for (int root = 0; root < w; ++root) {
      Tensor t = filled<T>(n, [r](std::int64_t i) { return value<T>(r * 10 + 1, i); });
      g.broadcast(t, root)->wait(30s);
      bad += mismatches<T>("broadcast from " + std::to_string(root) + " " + at, t,
                           [&](std::int64_t i) { return value<T>(root * 10 + 1, i); });
    }
    if (n > 1024 * 1024) continue;  // the gathers move w times n: smaller sizes suffice
    {
      Tensor in = filled<T>(n, [r](std::int64_t i) { return value<T>(r, i); });
      Tensor out = ddp::full({w * n}, -1.0, {ddp::dtype_of<T>()});
      g.all_gather(out, in)->wait(30s);
      // Element j of the output is element j % n of rank j / n's input.
      const std::int64_t m = std::max<std::int64_t>(n, 1);
      bad += mismatches<T>("all_gather " + at, out, [m](std::int64_t j) {
        return value<T>(static_cast<int>(j / m), j % m);
      });
    }
    for (ReduceOp op : kOps) {
      // Rank r's input at global index j is value(r, j); rank r keeps [r*n, (r+1)*n).
      Tensor in = filled<T>(w * n, [r](std::int64_t j) { return value<T>(r, j); });
      Tensor out = ddp::full({n}, -1.0, {ddp::dtype_of<T>()});
      g.reduce_scatter(out, in, op)->wait(30s);
      bad += mismatches<T>("reduce_scatter " + std::string(to_string(op)) + " " + at, out,
                           [&](std::int64_t i) { return expected<T>(op, w, r * n + i); });
    }
  }
  return bad;
}

// Many collectives queued before any wait: they run in order, each on its own tensor.
int check_queue(ProcessGroupTcp& g) {
  std::vector<Tensor> tensors;
  std::vector<std::shared_ptr<ddp::Work>> works;
  for (int k = 0; k < 10; ++k) {
    tensors.push_back(ddp::full({1000 + k}, static_cast<double>(g.rank() + k)));
    works.push_back(g.all_reduce(tensors.back()));
  }
  int bad = 0;
  for (int k = 9; k >= 0; --k) {
    works[static_cast<std::size_t>(k)]->wait(30s);
    const int w = g.size();
    const float want = static_cast<float>(w * (w - 1) / 2 + w * k);
    bad += mismatches<float>("queued all_reduce " + std::to_string(k),
                             tensors[static_cast<std::size_t>(k)],
                             [want](std::int64_t) { return want; });
  }
  return bad;
}

// The barrier holds everyone until the last rank (rank 0, 300 ms late) arrives.
int check_barrier(ProcessGroupTcp& g) {
  g.barrier()->wait(30s);
  const auto start = std::chrono::steady_clock::now();
  if (g.rank() == 0) std::this_thread::sleep_for(300ms);
  g.barrier()->wait(30s);
  const auto waited = std::chrono::steady_clock::now() - start;
  if (waited < 250ms) {
    std::fprintf(stderr, "rank %d left the barrier after %lld ms, before rank 0 came\n", g.rank(),
                 (long long)std::chrono::duration_cast<std::chrono::milliseconds>(waited).count());
    return 1;
  }
  return 0;
}

}  // namespace

// ---- The schedule -------------------------------------------------------------------

TEST_CASE("ring schedule for 4 ranks is the table of its Note", "[ch05][tcp][ex05.1]") {
  // {send, recv} per step (rows) and rank (columns), copied from the Note.
  const int table[6][4][2] = {
      {{3, 2}, {0, 3}, {1, 0}, {2, 1}}, {{2, 1}, {3, 2}, {0, 3}, {1, 0}},
      {{1, 0}, {2, 1}, {3, 2}, {0, 3}}, {{0, 3}, {1, 0}, {2, 1}, {3, 2}},
      {{3, 2}, {0, 3}, {1, 0}, {2, 1}}, {{2, 1}, {3, 2}, {0, 3}, {1, 0}}};
  for (int step = 0; step < 6; ++step) {
    for (int rank = 0; rank < 4; ++rank) {
      const ddp::RingStep s = ddp::ring_all_reduce_step(rank, 4, step);
      CHECK(s.send_chunk == table[step][rank][0]);
      CHECK(s.recv_chunk == table[step][rank][1]);
      CHECK(s.reduce == (step < 3));
    }
  }
}

TEST_CASE("ring schedule moves every chunk through every rank, for 2 to 8 ranks",
          "[ch05][tcp][ex05.1]") {
  for (int w = 2; w <= 8; ++w) {
    // Simulate it: which ranks' contributions each rank's copy of each chunk holds.
    const auto ws = static_cast<std::size_t>(w);
    std::vector<std::vector<std::set<int>>> has(ws, std::vector<std::set<int>>(ws));
    for (int r = 0; r < w; ++r) {
      for (int c = 0; c < w; ++c) has[r][c] = {r};
    }
    for (int step = 0; step < 2 * (w - 1); ++step) {
      auto next = has;
      for (int r = 0; r < w; ++r) {
        const ddp::RingStep s = ddp::ring_all_reduce_step(r, w, step);
        const int right = (r + 1) % w;
        const ddp::RingStep t = ddp::ring_all_reduce_step(right, w, step);
        REQUIRE(t.recv_chunk == s.send_chunk);  // what r sends is what r+1 expects
        if (s.reduce) {
          next[right][s.send_chunk].insert(has[r][s.send_chunk].begin(),
                                           has[r][s.send_chunk].end());
        } else {
          next[right][s.send_chunk] = has[r][s.send_chunk];
        }
      }
      has = next;
      if (step == w - 2) {  // end of the reduce-scatter: rank r owns chunk r, complete
        for (int r = 0; r < w; ++r) CHECK(has[r][r].size() == static_cast<std::size_t>(w));
      }
    }
    for (int r = 0; r < w; ++r) {
      for (int c = 0; c < w; ++c) CHECK(has[r][c].size() == static_cast<std::size_t>(w));
    }
  }
}

TEST_CASE("ring chunks tile 0..n with sizes that differ by at most one", "[ch05][tcp][ex05.1]") {
  for (std::int64_t n : {0, 1, 7, 8, 1001}) {
    for (int w = 1; w <= 5; ++w) {
      std::int64_t next = 0;
      for (int c = 0; c < w; ++c) {
        const auto [begin, end] = ddp::ring_chunk(n, w, c);
        CHECK(begin == next);
        CHECK((end - begin == n / w || end - begin == n / w + 1));
        next = end;
      }
      CHECK(next == n);
    }
  }
}

TEST_CASE("split_address undoes format_address and refuses what is not host:port",
          "[ch05][tcp]") {
  for (const auto& [host, port] : std::vector<std::pair<std::string, int>>{
           {"127.0.0.1", 4711}, {"::1", 0}, {"node07", 65535}}) {
    CHECK(ddp::split_address(ddp::format_address(host, port)) == std::make_pair(host, port));
  }
  for (const char* bad : {"127.0.0.1", "127.0.0.1:", "127.0.0.1:http", "h:70000", "h:-1"}) {
    CHECK_THROWS_WITH(ddp::split_address(bad), Catch::Contains("expected host:port"));
  }
}

TEST_CASE("PageBuffer starts on a page boundary (Note [4K aliasing])", "[ch05][tcp]") {
  for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{4097},
                            ddp::ProcessGroupTcp::kScratchBytes}) {
    ddp::PageBuffer buffer(bytes);
    CHECK(reinterpret_cast<std::uintptr_t>(buffer.data()) % 4096 == 0);
    CHECK(buffer.size() == bytes);
    if (bytes > 0) {  // all of it is ours to write
      std::memset(buffer.data(), 0xab, bytes);
      CHECK(buffer.data()[bytes - 1] == std::byte{0xab});
    }
  }
}

// ---- Real processes -----------------------------------------------------------------

TEST_CASE("tcp group of one process: every collective is the identity", "[ch05][tcp]") {
  auto server = start_server();
  Rank me = join(server->port(), 0, 1, "one");
  CHECK(check_collectives<float>(*me.group, {0, 1, 7, 1001}) == 0);
  CHECK(check_collectives<std::int64_t>(*me.group, {0, 1001}) == 0);
  me.group->barrier()->wait(5s);
}

TEST_CASE("tcp collectives refuse a bad root or mismatched tensors and name the rank",
          "[ch05][tcp]") {
  // The checks every backend shares (ProcessGroup::check_*), on a group of one.
  auto server = start_server();
  Rank me = join(server->port(), 0, 1, "checks");
  Tensor two = ddp::zeros({2});
  Tensor three = ddp::zeros({3});
  Tensor ints = ddp::zeros({2}, {ddp::DType::Int64});
  CHECK_THROWS_WITH(me.group->broadcast(two, 1),
                    Catch::Contains("rank 0/1 (tcp, ") &&
                        Catch::Contains(") broadcast: root 1 is not a rank of this group of 1"));
  CHECK_THROWS_WITH(me.group->all_gather(three, two),
                    Catch::Contains(") all_gather: output has 3 elements, "
                                    "expected size() * input.numel() = 1 * 2"));
  CHECK_THROWS_WITH(me.group->reduce_scatter(ints, two),
                    Catch::Contains(") reduce_scatter: input is float32") &&
                        Catch::Contains("but output is int64"));
  CHECK_THROWS_WITH(me.group->reduce_scatter(two, three),
                    Catch::Contains("input has 3 elements, expected size() * output.numel() "
                                    "= 1 * 2"));
  Tensor undefined;
  CHECK_THROWS_WITH(me.group->all_reduce(undefined),
                    Catch::Contains("rank 0/1 (tcp, ") &&
                        Catch::Contains(") all_reduce: tensor is undefined"));
  Tensor strided = ddp::zeros({3, 2}).t();
  CHECK_THROWS_WITH(me.group->broadcast(strided, 0),
                    Catch::Contains(") broadcast: tensor (float32 (2, 3) on cpu) must be "
                                    "contiguous\nhint: pass t.contiguous()"));
  // Refused before anything was queued: the group still works.
  CHECK(check_collectives<float>(*me.group, {5}) == 0);
}

TEST_CASE("tcp collectives in 2, 3 and 4 processes match the closed forms", "[ch05][tcp]") {
  ::setenv("DDP_TCP_SHM", "0", 1);  // the ring's: test_tcp_shm.cpp has shared memory's
  for (int w : {2, 3, 4}) {
    auto server = start_server();
    const int port = server->port();
    const auto codes = ddp::test::run_forked(w, [port, w](int rank) {
      Rank me = join(port, rank, w, "w" + std::to_string(w));
      int bad = check_collectives<float>(*me.group, {0, 1, 7, 1001, k16MiBFloats});
      bad += check_collectives<std::int64_t>(*me.group, {0, 1, 7, 1001, 100003});
      bad += check_queue(*me.group);
      bad += check_barrier(*me.group);
      me.group->barrier()->wait(30s);  // nobody tears down while others still talk
      return bad == 0 ? 0 : 2;
    });
    INFO("world size " << w);
    CHECK(codes == std::vector<int>(static_cast<std::size_t>(w), 0));
  }
}

// The plain ring (DDP_TCP_RING=plain, dist/plain_ring.hpp) against closed forms, and
// against the pipelined ring, bit for bit: both add each element in the same order around
// the ring (sizes above the small all-reduce's, which adds in another order).
TEST_CASE("plain ring all_reduce equals the closed forms and the pipelined ring bit for bit",
          "[ch05][tcp][ex05.2]") {
  ::setenv("DDP_TCP_SHM", "0", 1);  // the ring's: test_tcp_shm.cpp has shared memory's
  for (int w : {2, 3, 4}) {
    auto server = start_server();
    const int port = server->port();
    const auto codes = ddp::test::run_forked(w, [port, w](int rank) {
      ::setenv("DDP_TCP_RING", "plain", 1);
      Rank plain = join(port, rank, w, "plain" + std::to_string(w));
      ::unsetenv("DDP_TCP_RING");
      Rank pipelined = join(port, rank, w, "pipelined" + std::to_string(w));
      int bad = plain.group->description() == "tcp (plain ring)" ? 0 : 1;
      for (std::int64_t n : {0, 1, 7, 1001, 100003}) {
        for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg}) {
          Tensor t = ddp::zeros({n});
          for (std::int64_t i = 0; i < n; ++i) t.data<float>()[i] = value<float>(rank, i);
          plain.group->all_reduce(t, op)->wait(30s);
          for (std::int64_t i = 0; i < n; ++i) {
            float sum = 0;
            for (int r = 0; r < w; ++r) sum += value<float>(r, i);
            const float want = op == ReduceOp::Sum ? sum : sum / static_cast<float>(w);
            if (t.data<float>()[i] != want) {
              std::fprintf(stderr, "rank %d n %lld: [%lld] = %g, expected %g\n", rank,
                           static_cast<long long>(n), static_cast<long long>(i),
                           t.data<float>()[i], want);
              ++bad;
              break;
            }
          }
        }
      }
      // Random floats, where the order of the additions shows in the last bits.
      const std::int64_t n = 100003;
      ddp::Generator gen(1000 + static_cast<std::uint64_t>(rank));
      Tensor a = ddp::randn({n}, gen);
      Tensor b = a.clone();
      plain.group->all_reduce(a)->wait(30s);
      pipelined.group->all_reduce(b)->wait(30s);
      if (std::memcmp(a.data<float>(), b.data<float>(), n * sizeof(float)) != 0) {
        std::fprintf(stderr, "rank %d: plain and pipelined rings differ\n", rank);
        ++bad;
      }
      plain.group->barrier()->wait(30s);
      pipelined.group->barrier()->wait(30s);
      return bad == 0 ? 0 : 2;
    });
    INFO("world size " << w);
    CHECK(codes == std::vector<int>(static_cast<std::size_t>(w), 0));
  }
}

TEST_CASE("DDP_TCP_RING must be plain or pipelined, and names itself", "[ch05][tcp]") {
  auto server = start_server();
  ::setenv("DDP_TCP_RING", "fast", 1);
  CHECK_THROWS_WITH(join(server->port(), 0, 1, "bad-ring"),
                    Catch::Contains("DDP_TCP_RING='fast': expected 'plain'"));
  ::unsetenv("DDP_TCP_RING");
}

TEST_CASE("tcp ranks that disagree on DDP_TCP_RING are refused at set-up, naming it",
          "[ch05][tcp]") {
  // Rank 1 runs the plain ring, rank 0 the pipelined one: each is the other's left
  // neighbour, so both refuse, before any collective could mix the two.
  auto server = start_server();
  const int port = server->port();
  const auto codes = ddp::test::run_forked(2, [port](int rank) {
    ::setenv("DDP_TCP_RING", rank == 1 ? "plain" : "pipelined", 1);
    std::string message;
    try {
      join(port, rank, 2, "mixed-ring", 5s);
    } catch (const ddp::Error& e) {
      message = e.what();
    }
    const std::string want = rank == 0 ? "rank 1 (our left neighbour) runs the plain ring, "
                                         "this rank the pipelined one"
                                       : "rank 0 (our left neighbour) runs the pipelined "
                                         "ring, this rank the plain one";
    const bool ok = message.find(want) != std::string::npos &&
                    message.find("set DDP_TCP_RING the same on every rank") != std::string::npos;
    if (!ok) std::fprintf(stderr, "rank %d: \"%s\"\n", rank, message.c_str());
    return ok ? 0 : 3;
  });
  CHECK(codes == std::vector<int>{0, 0});
}

TEST_CASE("tcp all_reduce fails naming the rank that died, then fails fast", "[ch05][tcp]") {
  ::setenv("DDP_TCP_SHM", "0", 1);  // the ring's: test_tcp_shm.cpp has shared memory's
  for (int w : {3, 4}) {
    const int victim = 2;
    auto server = start_server();
    const int port = server->port();
    const auto codes = ddp::test::run_forked(w, [port, w, victim](int rank) {
      Rank me = join(port, rank, w, "death" + std::to_string(w));
      me.group->barrier()->wait(30s);
      Tensor t = ddp::full({k16MiBFloats}, 1.0);
      auto work = me.group->all_reduce(t);
      // Abruptly, mid all-reduce. SIGKILL, not _exit(): under ThreadSanitizer _exit()
      // first waits a second for other threads (atexit_sleep_ms), and in that second this
      // rank's communication thread finishes its part of the ring.
      if (rank == victim) ::raise(SIGKILL);
      const auto start = std::chrono::steady_clock::now();
      std::string message;
      try {
        work->wait(60s);
      } catch (const ddp::Error& e) {
        message = e.what();
      }
      const auto took = std::chrono::steady_clock::now() - start;
      if (message.find("rank 2 (") == std::string::npos || took > 15s) {
        std::fprintf(stderr, "rank %d: after %lld ms: \"%s\"\n", rank,
                     (long long)std::chrono::duration_cast<std::chrono::milliseconds>(took).count(),
                     message.c_str());
        return 3;
      }
      // The group is broken for good, and says so at once: "failed earlier", not the
      // timeout's "did not send ... within the timeout" after 60 s.
      try {
        me.group->barrier()->wait(60s);
        return 4;
      } catch (const ddp::Error& e) {
        if (std::string(e.what()).find("failed earlier") == std::string::npos) return 5;
      }
      return 0;
    });
    INFO("world size " << w);
    for (int r = 0; r < w; ++r) {
      CHECK(codes[static_cast<std::size_t>(r)] == (r == victim ? 128 + SIGKILL : 0));
    }
  }
}

TEST_CASE("tcp nests the report of the rank that failed first under its own error",
          "[ch05][tcp]") {
  ::setenv("DDP_TCP_SHM", "0", 1);  // the ring's: test_tcp_shm.cpp has shared memory's
  // Rank 1 calls all_reduce at once and times out waiting for rank 0, which comes 3 s
  // late: rank 1 leaves its report in the store and shuts its sockets. Rank 0 then sees
  // the connection closed and must tell rank 1's story, nested under its own line, with
  // rank 1's hint rather than a second, generic one.
  auto server = start_server();
  const int port = server->port();
  const auto codes = ddp::test::run_forked(2, [port](int rank) {
    Rank me = join(port, rank, 2, "relay", 1s);
    if (rank == 0) std::this_thread::sleep_for(3s);
    Tensor t = ddp::full({1000}, 1.0);
    std::string message;
    try {
      me.group->all_reduce(t)->wait(30s);
    } catch (const ddp::Error& e) {
      message = e.what();
    }
    if (rank == 1) return message.find("rank 0 has not failed") != std::string::npos ? 0 : 2;
    const std::size_t nested = message.find("\n  rank 1 had failed first:\n    ");
    bool ok = message.find("rank 1 (") != std::string::npos && nested != std::string::npos;
    // After that line: rank 1's report, every line indented by four spaces, then only
    // our own "  at file:line".
    int unindented = 0;
    for (std::size_t line = message.find('\n', nested + 1); ok && line != std::string::npos;) {
      const std::size_t next = message.find('\n', line + 1);
      const std::size_t length = next == std::string::npos ? std::string::npos : next - line - 1;
      if (message.compare(line + 1, std::min<std::size_t>(length, 4), "    ") != 0) ++unindented;
      line = next;
    }
    ok = ok && unindented == 1 && message.find("\nhint:") == std::string::npos;
    if (!ok) std::fprintf(stderr, "rank 0: \"%s\"\n", message.c_str());
    return ok ? 0 : 3;
  });
  CHECK(codes == std::vector<int>{0, 0});
}

TEST_CASE("tcp refuses ranks that call different collectives, naming both", "[ch05][tcp]") {
  ::setenv("DDP_TCP_SHM", "0", 1);  // the ring's: test_tcp_shm.cpp has shared memory's
  // Rank 1 all-reduces 4 floats while the others all-reduce 6 (it used to finish with
  // garbage while rank 0 failed); then, in a fresh group, rank 2 broadcasts where the
  // others all-reduce. Every rank fails, and a rank whose left neighbour disagrees names
  // that neighbour's call and its own, before using any of its bytes. One race is
  // allowed for: with 3 ranks, rank 2 may refuse rank 1's header and close before rank
  // 0's header has reached rank 1. Rank 1 then fails on its right neighbour's close,
  // and names the two calls through the reason rank 2 published ("rank 2 had failed
  // first: ... its collective #2 is <rank 1's>, this rank's #2 is <rank 2's>"); the
  // third run makes rank 0 late, so that this path is taken every time.
  using Run = std::pair<int, std::chrono::milliseconds>;  // world size, rank 0's delay
  for (const auto& [w, late] : {Run{2, 0ms}, Run{3, 0ms}, Run{3, 300ms}}) {
    auto server = start_server();
    const int port = server->port();
    const auto codes = ddp::test::run_forked(w, [port, w, late](int rank) {
      Rank me = join(port, rank, w, "mismatch" + std::to_string(w), 5s);
      me.group->barrier()->wait(30s);
      if (rank == 0) std::this_thread::sleep_for(late);
      Tensor t = ddp::full({rank == 1 ? 4 : 6}, 1.0);
      std::string message;
      try {
        me.group->all_reduce(t)->wait(30s);
      } catch (const ddp::Error& e) {
        message = e.what();
      }
      const int left = (rank + w - 1) % w;
      const int right = (rank + 1) % w;
      const bool disagree = (rank == 1) != (left == 1);
      auto call = [](int r) {
        return r == 1 ? std::string("all_reduce of 4 float32") : "all_reduce of 6 float32";
      };
      auto has = [&message](const std::string& part) {
        return message.find(part) != std::string::npos;
      };
      bool ok = !message.empty();
      if (disagree) {
        const bool own = has("rank " + std::to_string(left) + " (left neighbour") &&
                         has("is in another collective: its collective #2 is " + call(left)) &&
                         has("this rank's #2 is " + call(rank));
        const bool from_right =
            right != left && (right == 1) != (rank == 1) &&
            has("rank " + std::to_string(right) + " (right neighbour") &&
            has("rank " + std::to_string(right) + " had failed first:") &&
            has("is in another collective: its collective #2 is " + call(rank)) &&
            has("this rank's #2 is " + call(right));
        ok = ok && (own || from_right);
      }
      if (!ok) std::fprintf(stderr, "rank %d: \"%s\"\n", rank, message.c_str());
      return ok ? 0 : 3;
    });
    INFO("world size " << w << ", rank 0 late by " << late.count() << " ms");
    CHECK(codes == std::vector<int>(static_cast<std::size_t>(w), 0));
  }
  auto server = start_server();
  const int port = server->port();
  const auto codes = ddp::test::run_forked(3, [port](int rank) {
    Rank me = join(port, rank, 3, "order", 5s);
    Tensor t = ddp::full({6}, 1.0);
    std::string message;
    try {
      (rank == 2 ? me.group->broadcast(t, 0) : me.group->all_reduce(t))->wait(30s);
    } catch (const ddp::Error& e) {
      message = e.what();
    }
    // Rank 0's left neighbour is rank 2, which broadcasts.
    if (rank != 0) return message.empty() ? 3 : 0;
    return message.find("its collective #1 is broadcast of 6 float32 from rank 0, this "
                        "rank's #1 is all_reduce of 6 float32 (sum)") != std::string::npos
               ? 0
               : 4;
  });
  CHECK(codes == std::vector<int>{0, 0, 0});
}

TEST_CASE("tcp reports a failure within its timeout when the store is frozen", "[ch05][tcp]") {
  // The store serves from a process of its own, stopped (SIGSTOP: a frozen node, not a
  // closed connection) once the ring is up. Rank 1 never calls the all-reduce. Rank 0's
  // fails after the group's 1 s plus the failure report's short waits on the store
  // (kReportTimeout), not the store's own 20 s timeout, twice over.
  int to_parent[2];
  REQUIRE(::pipe(to_parent) == 0);
  const pid_t server = ::fork();
  REQUIRE(server >= 0);
  if (server == 0) {
    ::alarm(60);
    auto store = ddp::test::local_store_server();  // in this process: SIGSTOP freezes it
    const int port = store->port();
    (void)!::write(to_parent[1], &port, sizeof port);
    for (;;) ::pause();
  }
  int port = 0;
  REQUIRE(::read(to_parent[0], &port, sizeof port) == static_cast<ssize_t>(sizeof port));
  auto join_frozen = [port](int rank) {
    ddp::TCPStoreOptions o;
    o.port = port;
    o.timeout = 20s;
    Rank r;
    r.store = std::make_shared<ddp::TCPStore>(o);
    r.group = std::make_unique<ProcessGroupTcp>(r.store, rank, 2, 1s, "frozen");
    return r;
  };
  Rank a;
  Rank b;
  std::thread other([&] { b = join_frozen(1); });
  a = join_frozen(0);
  other.join();
  ::kill(server, SIGSTOP);

  Tensor t = ddp::full({1000}, 1.0);
  const auto start = std::chrono::steady_clock::now();
  std::string message;
  try {
    a.group->all_reduce(t)->wait(60s);
  } catch (const ddp::Error& e) {
    message = e.what();
  }
  const auto took = std::chrono::steady_clock::now() - start;
  ::kill(server, SIGKILL);
  ::waitpid(server, nullptr, 0);
  INFO(message);
  CHECK(message.find("rank 1 (") != std::string::npos);
  CHECK(took < 8s);  // a bound, not a speed: 1 s + at most 2.5 s; it took over 30 s
  b.group.reset();
  a.group.reset();
}

TEST_CASE("tcp group through a FileStore explains a loopback address from another host",
          "[ch05][tcp]") {
  // Two "hosts": each rank gets a host name of its own that does not resolve, so each
  // publishes 127.0.0.1, as a host name mapped to 127.0.1.1 does on a real cluster; rank
  // 1 also gets a network namespace of its own, so neither loopback reaches the other.
  // Each rank fails to connect, and says why: the neighbour's host and its loopback.
  const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                     ("ddp_tcp_loopback_" + std::to_string(::getpid()));
  std::filesystem::remove(path);
  const auto codes = ddp::test::run_forked(2, [&path](int rank) {
    const std::string name = rank == 0 ? "ddp-host-a.invalid" : "ddp-host-b.invalid";
    if (::unshare(CLONE_NEWUTS | (rank == 1 ? CLONE_NEWNET : 0)) != 0 ||
        ::sethostname(name.data(), name.size()) != 0) {
      return 77;  // not root: cannot play two hosts
    }
    auto store = std::make_shared<ddp::FileStore>(path.string(), 10s);
    std::string message;
    try {
      ProcessGroupTcp group(store, rank, 2, 2s, "loopback");
    } catch (const ddp::Error& e) {
      message = e.what();
    }
    const std::string other = rank == 0 ? "ddp-host-b.invalid" : "ddp-host-a.invalid";
    const bool ok = message.find("cannot reach rank " + std::to_string(1 - rank)) !=
                        std::string::npos &&
                    message.find("runs on " + other + " but published a loopback address") !=
                        std::string::npos;
    if (!ok) std::fprintf(stderr, "rank %d: \"%s\"\n", rank, message.c_str());
    return ok ? 0 : 3;
  });
  std::filesystem::remove(path);
  if (codes == std::vector<int>{77, 77}) {  // never passed silently: ctest says Skipped
    std::printf("not root: no namespaces to play two hosts in; skipped (exit 77)\n");
    std::fflush(stdout);
    std::_Exit(77);
  }
  CHECK(codes == std::vector<int>{0, 0});
}

TEST_CASE("a Work waited on with milliseconds::max() waits until it is done", "[ch05][tcp]") {
  // wait_for(max()) overflowed and threw "did not finish within ..." at once.
  ddp::FutureWork work("test work", 10s);
  std::thread finisher([&] {
    std::this_thread::sleep_for(50ms);
    work.finish();
  });
  CHECK_NOTHROW(work.wait(std::chrono::milliseconds::max()));
  CHECK(work.is_completed());
  finisher.join();
}

TEST_CASE("block_stream of a Work finished on the host is wait, timeout included",
          "[ch05][tcp]") {
  // tcp and mpi finish collectives on a host thread: there is no event to hand the GPU,
  // so chapter 07's Reducer, which ends backward with block_stream, must wait there.
  ddp::FutureWork slow("test work", 10s);
  CHECK_THROWS_WITH(slow.block_stream(50ms),
                    Catch::Contains("test work did not finish within 50 ms"));
  std::thread finisher([&] {
    std::this_thread::sleep_for(50ms);
    slow.finish();
  });
  CHECK_NOTHROW(slow.block_stream(10s));
  CHECK(slow.is_completed());
  finisher.join();

  ddp::FutureWork failed("failed work", 10s);
  failed.fail(std::make_exception_ptr(ddp::Error("the ring broke")));
  CHECK_THROWS_WITH(failed.block_stream(10s), Catch::Contains("the ring broke"));
}

TEST_CASE("tcp group set-up names the rank that never came", "[ch05][tcp]") {
  auto server = start_server();
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(join(server->port(), 0, 2, "absent", 300ms),
                    Catch::Contains("rank 1") && Catch::Contains("never published"));
  CHECK(std::chrono::steady_clock::now() - start < 5s);
}

TEST_CASE("tcp group destructor does not wait for a peer that never joins in",
          "[ch05][tcp]") {
  auto server = start_server();
  const int port = server->port();
  Rank a;
  Rank b;
  std::thread other([&] { b = join(port, 1, 2, "teardown"); });
  a = join(port, 0, 2, "teardown");
  other.join();
  Tensor t = ddp::full({1000}, 1.0);
  auto work = a.group->all_reduce(t);  // rank 1 never calls it
  auto queued = a.group->barrier();
  const auto start = std::chrono::steady_clock::now();
  a.group.reset();
  CHECK(std::chrono::steady_clock::now() - start < 2s);
  CHECK_THROWS_WITH(work->wait(1s), Catch::Contains("destroyed"));
  CHECK_THROWS_WITH(queued->wait(1s), Catch::Contains("destroyed"));
  b.group.reset();
}
